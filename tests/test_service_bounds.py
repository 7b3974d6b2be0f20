"""What one submission may carry, what it is charged, and who may release a notebook: the
controller and the submission checks on their own (a real engine, store and local backend;
the HTTP side of the same rules is tested against the real hub in tests/hub/test_trust.py)."""

from __future__ import annotations

import pytest

from builders import node, tree
from hub_ext.backends.local import LocalBackend
from hub_ext.quota import ValidationError, parse_limit_range
from hub_ext.service.controller import SERVICE, Controller, Forbidden, Identity, TooMany
from hub_ext.service.handlers import parse_json
from hub_ext.service.store import Store
from hub_ext.service.workloads import Bounds, check_body, with_default_requests
from hub_ext.tenants import tenants_from_groups

TREE = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"])]))
DEFAULTS = {"notebook": {"cpu": "1", "memory": "1Gi"}, "training": {"cpu": "1", "memory": "1Gi"}}


@pytest.fixture
def controller(tmp_path):
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}],
                           data_dir=str(tmp_path / "data"))
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=backend,
                   default_requests=DEFAULTS, max_queued_per_user=3, bounds=Bounds(max_replicas=8))
    c.set_tenants(tenants_from_groups([
        {"name": "team-a", "users": ["alice"], "properties": {"tenancy.namespace": "team-a"}},
        {"name": "team-b", "users": ["bob"], "properties": {"tenancy.namespace": "team-b"}},
    ], TREE, ["low-priority-dev", "high-priority-research", "critical-prod"]))
    return c


def who(c, name):
    return Identity(name=name, tenants=[t for t in c.tenants if name in t.members])


@pytest.mark.parametrize("body, message", [
    ({"command": ["x" * 70_000]}, "command is 70,001 bytes, more than the 65,536 allowed"),
    ({"script": "#" * 300_000}, "script is 300,000 bytes, more than the 262,144 allowed"),
    ({"command": ["true"], "env": {"A": "x" * 70_000}}, "env is 70,003 bytes"),
    ({"command": ["true"], "env": {f"V{i}": "" for i in range(200)}}, "env has 200 variables"),
    ({"command": ["true"], "replicas": 65}, "replicas 65 is more than the 64 allowed"),
    ({"command": ["true"], "replicas": 10**12}, "is larger than"),
], ids=["command", "script", "env-bytes", "env-entries", "replicas", "huge-replicas"])
def test_sizes_are_capped_with_a_sentence(body, message):
    with pytest.raises(ValidationError, match=message):
        check_body(body)


def test_errors_echo_only_a_short_prefix_of_the_input():
    for body in ({"kind": "k" * 100_000}, {"name": "N" * 100_000}, {"command": ["true"], "env": {"1" * 100_000: ""}},
                 {"command": ["true"], "resources": {"requests": {"cpu": "9" * 100_000 + "x"}}}):
        with pytest.raises(ValidationError) as err:
            check_body(body)
        assert len(str(err.value)) < 300, str(err.value)[:400]


def test_open_resources_get_the_kinds_default_unless_a_limit_range_gives_one():
    spec = check_body({"command": ["true"], "resources": {"limits": {"memory": "2Gi"}}})
    assert with_default_requests(spec, DEFAULTS["training"], [])["resources"]["requests"] == {"cpu": "1"}
    ranges = [parse_limit_range({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "d", "namespace": "x"},
                                 "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "250m"}}]}})]
    assert with_default_requests(spec, DEFAULTS["training"], ranges)["resources"]["requests"] == {}
    given = check_body({"command": ["true"], "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}})
    assert with_default_requests(given, DEFAULTS["training"], []) == given


def test_jobs_without_requests_are_charged(controller):
    row = controller.submit(who(controller, "alice"), {"command": ["sleep", "60"], "replicas": 8})
    assert row.spec["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    controller.engine.schedule(0)
    leaf = controller.engine.quota.nodes["a"]
    assert leaf.used["cpu"] == 8000  # eight pods, one CPU each: nothing runs for free


def test_one_user_may_queue_only_so_many_jobs(controller):
    alice = who(controller, "alice")
    for _ in range(3):
        controller.submit(alice, {"command": ["true"], "resources": {"requests": {"cpu": "9"}}})  # never fits: stays queued
    with pytest.raises(TooMany, match="alice has 3 notebooks and jobs waiting or running already"):
        controller.submit(alice, {"command": ["true"]})
    controller.submit(who(controller, "bob"), {"command": ["true"]})  # a teammate is not held back by it


@pytest.mark.asyncio
async def test_only_the_spawners_credential_releases_a_notebook_without_stopping_it(controller):
    alice = who(controller, "alice")
    row = controller.submit(alice.as_spawner(), {"kind": "notebook", "resources": {"requests": {"cpu": "2"}}})
    controller.engine.schedule(0)
    with pytest.raises(Forbidden, match="only the hub's spawner"):
        controller.cancel(alice, row, by_spawner=True)
    assert row.id in controller.rows and controller.engine.quota.nodes["a"].used["cpu"] == 2000
    controller.cancel(SERVICE, row, by_spawner=True)
    assert row.state == "Stopped" and controller.engine.quota.nodes["a"].used.get("cpu", 0) == 0


@pytest.mark.asyncio
async def test_notebooks_whose_server_the_hub_lost_give_their_room_back(controller):
    t = [100.0]
    controller.clock = lambda: t[0]
    alice, bob = who(controller, "alice"), who(controller, "bob")
    gone = controller.submit(alice.as_spawner(), {"kind": "notebook", "serverName": "gpu"})
    kept = controller.submit(bob.as_spawner(), {"kind": "notebook"})
    controller.tick()
    active = {("bob", "")}
    assert controller.reconcile_servers(active, grace=10) == []  # first seen missing: not yet
    t[0] += 5
    assert controller.reconcile_servers(active, grace=10) == []
    t[0] += 6
    assert controller.reconcile_servers(active, grace=10) == [gone]
    assert gone.state == "Stopped" and kept.state == "Running"
    assert "the hub no longer runs alice's server 'gpu'" in controller.store.events(gone.id)[-1].message
    t[0] += 60
    assert controller.reconcile_servers(active, grace=10) == []  # bob's stays


@pytest.mark.asyncio
async def test_a_server_seen_again_is_not_released(controller):
    t = [100.0]
    controller.clock = lambda: t[0]
    row = controller.submit(who(controller, "alice").as_spawner(), {"kind": "notebook"})
    controller.reconcile_servers(set(), grace=10)
    t[0] += 5
    controller.reconcile_servers({("alice", "")}, grace=10)  # the hub shows it again: the clock restarts
    t[0] += 6
    assert controller.reconcile_servers(set(), grace=10) == [] and row.state != "Stopped"


@pytest.mark.parametrize("raw, message", [
    (b"[" * 1000 + b"]" * 1000, "nested more than 64 levels"),
    (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested more than 64 levels"),
    (b"{nope", "the body is not JSON"),
])
def test_bodies_that_are_not_sensible_json_are_a_400(raw, message):
    with pytest.raises(ValidationError, match=message):
        parse_json(raw)
