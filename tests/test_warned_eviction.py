"""Issue 22: a warned eviction is withdrawn when its reason goes away, and the warned notebook shows
`Running` with its warning meanwhile, never `Pending` (a real engine, store and local backend with a
warning window; no hub: the backend's eviction waits out the warning before it would stop a server)."""

from __future__ import annotations

import asyncio

import pytest

from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store
from hub_ext.tenants import tenants_from_groups

TREE = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"])]))


@pytest.fixture
def controller(tmp_path):
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "16", "memory": "32Gi"}}],
                           data_dir=str(tmp_path / "data"), notebook_warning_seconds=60)
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend)
    c.set_tenants(tenants_from_groups([
        {"name": "team-a", "users": ["carol"], "properties": {"tenancy.namespace": "team-a"}},
        {"name": "team-b", "users": ["bob"], "properties": {"tenancy.namespace": "team-b"}},
    ], TREE, ["low-priority-dev", "high-priority-research", "critical-prod"]))
    return c


def who(c, name):
    return Identity(name=name, tenants=[t for t in c.tenants if name in t.members])


def notebook(c, user, server, cpu, profile="large"):
    return c.submit(who(c, user).as_spawner(), {"kind": "notebook", "serverName": server, "profile": profile,
                                                "resources": {"requests": {"cpu": str(cpu)}}})


async def warned(c):
    """bob borrows team-a's guarantee with two notebooks; carol's notebook reclaims the second."""
    bob1 = notebook(c, "bob", "one", 4)
    c.tick()
    bob2 = notebook(c, "bob", "two", 4)
    c.tick()
    assert (bob1.state, bob2.state) == ("Running", "Running")
    carol = notebook(c, "carol", "", 4)
    c.tick()
    await asyncio.sleep(0)  # the backend's eviction starts its warning
    assert bob2.id in c.evicting
    return bob2, carol


@pytest.mark.asyncio
async def test_a_warned_notebook_shows_running_with_its_warning(controller):
    bob2, carol = await warned(controller)
    view = controller.view(bob2)
    assert view["state"] == "Running" and bob2.state == "Running"  # not Pending: its server still runs
    assert view["evictionDeadline"] > controller.clock() + 50 and "reclaim" in view["evictionMessage"]
    assert controller.view(carol)["state"] == "Pending"


@pytest.mark.asyncio
async def test_the_warning_is_withdrawn_when_the_preemptor_is_cancelled(controller):
    bob2, carol = await warned(controller)
    task = controller.evicting[bob2.id]["task"]
    controller.cancel(who(controller, "carol"), carol)
    controller.tick()
    await asyncio.sleep(0)
    assert task.cancelled()  # the server is never stopped
    view = controller.view(bob2, events=True)
    assert view["state"] == "Running" and "evictionDeadline" not in view
    assert view["evictionWithdrawn"]["message"] == withdrawn_sentence()
    assert view["pods"][0]["phase"] == "Running" and view["reason"] is None
    withdrawn = [e for e in view["events"] if e["type"] == "eviction-withdrawn"]
    assert [e["message"] for e in withdrawn] == [withdrawn_sentence()]
    assert controller.engine.quota.nodes["b"].used["cpu"] == 8000  # counted as running again
    again = notebook(controller, "carol", "", 4)  # and reclaimed like any borrower, if needed again
    controller.tick()
    await asyncio.sleep(0)
    assert bob2.id in controller.evicting and again.state == "Pending"
    assert "evictionWithdrawn" not in controller.view(bob2)  # warned again: the new countdown, not the old words


def withdrawn_sentence():
    return ("The warning is withdrawn: the work that needed its room no longer waits for it; "
            "bob's notebook 'two' (Large) is not stopped: it keeps running.")


@pytest.mark.asyncio
async def test_the_warning_is_withdrawn_when_another_end_frees_the_room_and_the_preemptor_starts(controller):
    bob2, carol = await warned(controller)
    bob1 = next(r for r in controller.rows.values() if r.spec.get("serverName") == "one")
    controller.cancel(who(controller, "bob"), bob1)  # bob stops his other notebook himself
    controller.tick()
    await asyncio.sleep(0)
    assert bob2.state == "Running" and bob2.id not in controller.evicting
    assert carol.state == "Running"
    [event] = [e for e in controller.store.events(bob2.id) if e.type == "eviction-withdrawn"]
    assert event.message == ("The warning is withdrawn: room was freed elsewhere and carol's notebook (Large) "
                             "starts beside it; bob's notebook 'two' (Large) is not stopped: it keeps running.")
