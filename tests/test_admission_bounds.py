"""Issue 21's admission bounds on the controller itself (a real engine, store and local backend):
the floor every pod is charged, caps counting running work per user and per team, notebooks
queued by the spawner alone and stopped by their owner or an admin, and text that is not UTF-8.
The same rules over HTTP, against the real demo hub, are in tests/hub/test_trust.py."""

from __future__ import annotations

import json
import re

import pytest

from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.quota import ValidationError, parse_limit_range
from hub_ext.service.controller import Controller, Forbidden, Identity, TooMany
from hub_ext.service.handlers import parse_json
from hub_ext.service.store import Store
from hub_ext.service.workloads import check_body, with_floor
from hub_ext.tenants import tenants_from_groups

TREE = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"])]))
FLOOR = {"cpu": "100m", "memory": "64Mi"}


@pytest.fixture
def controller(tmp_path):
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}],
                           data_dir=str(tmp_path / "data"))
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend,
                   default_requests={"training": {"cpu": "1", "memory": "1Gi"}},
                   max_workloads_per_user=3, max_workloads_per_team=4)
    c.set_tenants(tenants_from_groups([
        {"name": "team-a", "users": ["alice", "ann", "amos"], "properties": {"tenancy.namespace": "team-a"}},
        {"name": "team-b", "users": ["bob"], "properties": {"tenancy.namespace": "team-b"}},
    ], TREE, ["low-priority-dev", "high-priority-research", "critical-prod"]))
    return c


def who(c, name):
    return Identity(name=name, tenants=[t for t in c.tenants if name in t.members])


@pytest.mark.parametrize("amount", ["0", "-0", "1e-30", "0.0001", "0m"])
def test_requests_below_the_floor_are_raised_to_it(amount):
    spec = check_body({"command": ["true"], "resources": {"requests": {"cpu": amount, "memory": amount}}})
    floored, raised = with_floor(spec, FLOOR, [])
    assert floored["resources"]["requests"] == FLOOR
    assert raised == [f"cpu request {amount} raised to the least a pod is charged, 100m",
                      f"memory request {amount} raised to the least a pod is charged, 64Mi"]


def test_a_limit_below_the_floor_is_raised_with_the_request_and_a_limit_range_default_is_kept():
    spec = check_body({"command": ["true"], "resources": {"limits": {"cpu": "10m"}, "requests": {"memory": "1Gi"}}})
    floored, raised = with_floor(spec, FLOOR, [])
    assert floored["resources"] == {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "100m"}}
    assert raised == ["cpu limit 10m raised to the least a pod is charged, 100m"]
    ranges = [parse_limit_range({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "d", "namespace": "x"},
                                 "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "50m"}}]}})]
    open_cpu = check_body({"command": ["true"], "resources": {"requests": {"memory": "1Gi"}}})
    assert with_floor(open_cpu, FLOOR, ranges) == (open_cpu, [])  # the namespace's own answer
    assert with_floor(check_body({"command": ["true"]}), {}, []) == (check_body({"command": ["true"]}), [])


def test_a_job_asking_for_nothing_is_charged_the_floor_for_each_pod(tmp_path):
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}],
                           data_dir=str(tmp_path / "data"))
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend)  # no default_requests
    c.set_tenants(tenants_from_groups([{"name": "team-a", "users": ["alice"], "properties": {"tenancy.namespace": "team-a"}}],
                                      TREE, ["high-priority-research"]))
    row = c.submit(who(c, "alice"), {"command": ["sleep", "60"], "replicas": 8, "gang": False,
                                     "resources": {"requests": {"cpu": "1e-30", "memory": "0"}}})
    c.engine.schedule(0)
    assert c.engine.quota.nodes["a"].used["cpu"] == 800  # eight pods, 100m each
    assert "cpu request 1e-30 raised to the least a pod is charged, 100m" in c.store.events(row.id)[0].message


@pytest.mark.asyncio
async def test_running_work_counts_against_the_users_cap(controller):
    alice = who(controller, "alice")
    rows = [controller.submit(alice, {"command": ["sleep", "60"], "resources": {"requests": {"cpu": "100m"}}})
            for _ in range(3)]
    controller.tick()
    assert [r.state for r in rows] == ["Running"] * 3
    with pytest.raises(TooMany, match="alice has 3 notebooks and jobs waiting or running already"):
        controller.submit(alice, {"command": ["true"]})
    controller.cancel(alice, rows[0])
    controller.submit(alice, {"command": ["true"]})  # one ended: room for one more
    for row in rows[1:]:
        controller.cancel(alice, row)


def test_a_team_is_capped_whoever_of_it_submits(controller):
    for name in ("alice", "alice", "ann", "ann"):
        controller.submit(who(controller, name), {"command": ["sleep", "60"], "resources": {"requests": {"cpu": "9"}}})
    with pytest.raises(TooMany, match="team team-a has 4 notebooks and jobs waiting or running already"):
        controller.submit(who(controller, "amos"), {"command": ["true"]})
    with pytest.raises(TooMany, match="max_workloads_per_team"):
        controller.submit(who(controller, "amos").as_spawner(), {"kind": "notebook"})
    controller.submit(who(controller, "bob"), {"command": ["true"]})  # another team is not held back


def test_the_old_name_of_the_users_cap_still_works(tmp_path):
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, max_queued_per_user=5,
                   backend=LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "1"}}],
                                        data_dir=str(tmp_path / "data")))
    assert (c.max_workloads_per_user, c.max_workloads_per_team) == (5, 0)


@pytest.mark.asyncio
async def test_only_the_spawner_queues_a_notebook_and_only_its_owner_or_an_admin_stops_it(controller):
    alice, ann = who(controller, "alice"), who(controller, "ann")
    with pytest.raises(Forbidden, match="notebooks are started by the hub"):
        controller.submit(alice, {"kind": "notebook"})
    with pytest.raises(Forbidden, match="notebooks are started by the hub"):
        controller.submit(Identity(name="root", admin=True), {"kind": "notebook", "namespace": "team-a"})
    assert controller.preview_submit(alice, {"kind": "notebook"})["state"] == "Running"  # a dry run stores nothing
    row = controller.submit(alice.as_spawner(), {"kind": "notebook"})
    controller.tick()
    with pytest.raises(Forbidden, match="only alice or an admin may stop alice's notebook"):
        controller.cancel(ann, row)
    assert row.state == "Running" and controller.engine.quota.nodes["a"].used["cpu"] > 0
    controller.cancel(Identity(name="root", admin=True), row)
    assert row.state == "Stopped"


@pytest.mark.parametrize("body, field", [
    ({"command": ["echo", "\ud800"]}, "command[1]"),
    ({"command": ["true"], "env": {"X": "a\udfffb"}}, "env.X"),
    ({"command": ["true"], "serverName": "\ud83d"}, "serverName"),
    ({"command": ["true"], "profile": "x\udc00"}, "profile"),
    ({"script": "print('\ud800')"}, "script"),
    ({"command": ["true"], "datasets": [{"name": "d", "mountPath": "/d/\ud800"}]}, "datasets[0].mountPath"),
], ids=["command", "env", "serverName", "profile", "script", "mountPath"])
def test_text_that_is_not_utf8_is_a_400_naming_the_field(controller, body, field):
    with pytest.raises(ValidationError, match=rf"^workload: {re.escape(field)} is not valid UTF-8"):
        controller.submit(who(controller, "alice"), body)
    assert controller.rows == {} and controller.store.active_workload_ids() == []  # nothing half-stored
    with pytest.raises(ValidationError, match=rf"^request body: {re.escape(field)} is not valid UTF-8"):
        parse_json(json.dumps(body).encode())  # as a client sends it: \ud800 escaped in ASCII JSON


def test_a_surrogate_pair_is_text(controller):
    check_body({"command": ["echo", "\U0001f600"]})
    assert parse_json('{"command": ["echo", "\\ud83d\\ude00"]}'.encode()) == {"command": ["echo", "\U0001f600"]}


def test_the_counts_the_caps_read_follow_rows_in_and_out(controller):
    rows = [controller.submit(who(controller, name), {"command": ["true"], "resources": {"requests": {"cpu": "9"}}})
            for name in ("alice", "ann", "bob")]
    active = controller.rows
    assert (active.per_user, active.per_team) == ({"alice": 1, "ann": 1, "bob": 1}, {"team-a": 2, "team-b": 1})
    controller.cancel(who(controller, "ann"), rows[1])
    active[rows[0].id] = rows[0]  # the same row again (a restore) counts once
    assert (active.per_user, active.per_team) == ({"alice": 1, "bob": 1}, {"team-a": 1, "team-b": 1})
    assert active.pop("nope", None) is None and active.pop(rows[2].id) is rows[2]
    del active[rows[0].id]
    assert (active, active.per_user, active.per_team) == ({}, {}, {})
