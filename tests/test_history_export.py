"""``tenancy history export``: the service's recorded history as a scenario that replays as it happened.

The real controller, store and engine, with a backend the test drives by hand (it plays the
cluster: a pod ends when the test says so, an eviction is done when its grace has passed), on a
clock the test moves. Two teams on one node of 8 CPUs; a and b each guarantee 4 and may use 8.

    t=100  alice submits a1 (6 CPUs, grace 5 s): it runs; a borrows 2.
    t=110  bob submits b1 (4 CPUs): within b's guarantee, so b reclaims: a1 is evicted; its Job
           queues a replacement at once (it waits: 6 CPUs, 4 free once b1 runs).
    t=115  a1 is gone (grace 5 s): b1 runs.
    t=120  alice submits a2 (2 CPUs): it runs.  t=130  alice cancels a2.
    t=175  b1 ends (ran 60 s): a1's replacement runs.  t=275  it ends (ran 100 s).  Exported at t=300.

The export is replayed by ``Simulator`` under the recorded tree and must give the recorded
admissions and evictions: per team and phase at the end, which workloads ran, and who evicted whom.
"""

from __future__ import annotations

from collections import Counter

import pytest

from builders import node, tree
from idle_backend import IdleBackend
from hub_ext.planning.history import recorded_scenario
from hub_ext.quota.nodes import parse_node
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store
from hub_ext.sim.scenario import parse_scenario
from hub_ext.sim.simulator import Simulator
from hub_ext.tenants import tenants_from_groups

ROOT = node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"])])
MANIFEST = {"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree", "metadata": {"name": "t"},
            "spec": {"root": ROOT}}


class _HandDriven(IdleBackend):
    """A cluster that does what it is told, when the test tells it."""

    NODES = [{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}]


@pytest.fixture
def service(tmp_path):
    t = [100.0]
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=tree(ROOT), backend=_HandDriven(),
                   clock=lambda: t[0])
    c.tree_manifest = MANIFEST
    c.set_tenants(tenants_from_groups([
        {"name": "team-a", "users": ["alice"], "properties": {"tenancy.namespace": "team-a"}},
        {"name": "team-b", "users": ["bob"], "properties": {"tenancy.namespace": "team-b"}},
    ], tree(ROOT), ["low-priority-dev", "high-priority-research", "critical-prod"]))
    return c, t


def _pod(c, name, phase="Running"):
    return next(p for p in c.engine.pods.values() if p.owner and p.owner[1] == name and p.phase.value == phase)


def _record(c, t) -> None:
    """The history of the module's docstring."""
    alice, bob = (Identity(name=n, tenants=[x for x in c.tenants if n in x.members]) for n in ("alice", "bob"))
    job = {"command": ["train"], "gracePeriodSeconds": 5}
    c.submit(alice, {**job, "name": "a1", "resources": {"requests": {"cpu": "6"}}})
    c.tick()
    t[0] = 110
    c.submit(bob, {**job, "name": "b1", "resources": {"requests": {"cpu": "4"}}})
    c.tick()
    victim = _pod(c, "a1", "Terminating")
    t[0] = 115
    c.eviction_done(victim.uid)
    c.tick()
    t[0] = 120
    a2 = c.submit(alice, {**job, "name": "a2", "resources": {"requests": {"cpu": "2"}}})
    c.tick()
    t[0] = 130
    c.cancel(alice, a2)
    c.tick()
    t[0] = 175
    c.pod_exited(_pod(c, "b1").uid, 0)
    c.tick()
    t[0] = 275
    c.pod_exited(_pod(c, "a1").uid, 0)
    c.tick()


@pytest.mark.asyncio
async def test_the_export_replays_the_recorded_admissions_and_evictions(service):
    c, t = service
    _record(c, t)
    recorded = {r.name: r for r in c.store.history_rows(0, 300)}
    assert {n: r.state for n, r in recorded.items()} == {"a1": "Succeeded", "b1": "Succeeded", "a2": "Cancelled"}
    assert Counter(p.phase for r in recorded.values() for p in r.pods) == {"Succeeded": 2, "Evicted": 1, "Deleted": 1}

    t[0] = 290
    c.add_nodes([parse_node({"name": "n2", "allocatable": {"cpu": "8"}}, "n2")])  # after the period's start
    t[0] = 300
    doc = recorded_scenario(c, None, 300.0)
    assert doc["nodes"] == [{"name": "n1", "allocatable": {"cpu": "8", "memory": "32Gi"}}]  # as at t=100
    assert doc["objects"] == [MANIFEST]
    durations = {s["apply"][0]["metadata"]["name"]: s["apply"][0]["metadata"]["annotations"]
                 ["tenancy.jupyter.org/duration"] for s in doc["steps"] if "apply" in s}
    assert durations == {"a1": "100s", "b1": "60s", "a2": "10s"}  # observed: the evicted attempt does not count
    # b1's step ends when its eviction is done (t=15, as the simulator settles it): a2 comes 5 s later.
    assert [s.get("advance") or s.get("name") for s in doc["steps"]] == [
        "alice submitted a1", "10s", "bob submitted b1", "5s", "alice submitted a2", "10s", "a2 was cancelled",
        "170s"]

    replay = Simulator(parse_scenario(doc))
    reports = list(replay.run())
    evictions = [(e["namespace"], e["owner"], e["reason"], e["preemptor"].split("/")[0])
                 for r in reports for e in r["evictions"]]
    assert evictions == [("team-a", "Job/a1", "reclaimed", "team-b")]  # recorded: a1 reclaimed by team-b's b1
    assert Counter((p["namespace"], p["phase"]) for p in reports[-1]["pods"]) == {
        ("team-a", "Succeeded"): 1, ("team-b", "Succeeded"): 1}
    started = [(r["time"], p["owner"]) for r in reports for p in r["pods"] if p["phase"] == "Running"]
    first_start = {}
    for at, owner in started:
        first_start.setdefault(owner, at)
    # Recorded starts, less t=100: a1 0, b1 15, a2 20; the replay's clock agrees to the second.
    assert first_start == {"Job/a1": 0, "Job/b1": 15, "Job/a2": 20}
    assert reports[-1]["time"] == 200


def test_no_history_is_none_and_a_bad_period_is_one_line(service):
    from hub_ext.planning.period import parse_since
    from hub_ext.quota.errors import ValidationError

    c, _ = service
    assert recorded_scenario(c, 7 * 86400, 300.0) is None
    assert parse_since("7d") == 7 * 86400 and parse_since("36h") == 36 * 3600
    for bad in ("7x", "", "-1d", "0d"):
        with pytest.raises(ValidationError, match="--since"):
            parse_since(bad)


def test_the_tree_at_the_start_is_the_one_an_edit_replaced_and_later_edits_are_steps():
    from types import SimpleNamespace as Event

    from hub_ext.planning.history import export, tree_at

    old, new, now = {"kind": "ElasticQuotaTree", "v": 1}, {"kind": "ElasticQuotaTree", "v": 2}, {"v": 3}
    edits = [Event(time=50.0, details={"before": old, "manifest": new})]
    assert tree_at(edits, 10.0, now) == old  # before the edit: what it replaced
    assert tree_at(edits, 60.0, now) == new  # after: what it put in force
    assert tree_at([], 60.0, now) == now  # never edited: the tree in force now

    class _Engine:
        cluster = Event(nodes={})
        classes = Event(by_name={})
        resource_quotas = {}

    doc = export([], edits, start=10.0, end=100.0, engine=_Engine(), tree_manifest=now)
    assert doc["objects"] == [old]
    assert doc["steps"] == [{"advance": "40s"}, {"name": "the quota tree changed", "apply": [new]}, {"advance": "50s"}]


@pytest.mark.asyncio
async def test_usage_per_team_from_the_recorded_history(service):
    """Over 100..300 (the last 200 s), by team (guarantees: a 4, b 4 CPUs):
    team-a waits: a1 0 (t=100) and 65 (its replacement, 110..175), a2 0 -> p50 0, p95 65; b: b1 110..115 -> 5.
    used: a 6*15 + 6*100 + 2*10 = 710 CPU-s; b 4*60 = 240. a borrows 2 over 100..115 and 175..275: 230 CPU-s,
    lent by b (idle then): 230. below guarantee: b waited 110..115 at 0 while a borrowed: 5 s; a 0 (b never
    borrowed). Cluster: 950 of 8*200 CPU-s."""
    from hub_ext.planning.usage import csv_rows, seen_by, usage

    c, t = service
    _record(c, t)
    report = usage(c, 200, 300.0, "team")
    teams = {x["name"]: x for x in report["teams"]}
    a, b = teams["team-a"], teams["team-b"]
    assert (a["wait_p50_s"], a["wait_p95_s"], b["wait_p50_s"], b["wait_p95_s"]) == (0, 65, 5, 5)
    assert (a["evictions_suffered"], a["evictions_caused"], b["evictions_suffered"], b["evictions_caused"]) == (1, 0, 0, 1)
    assert a["used_hours"]["cpu"] == round(710 / 3600, 3) and b["used_hours"]["cpu"] == round(240 / 3600, 3)
    assert a["borrowed_hours"] == {"cpu": round(230 / 3600, 3)} == b["lent_hours"]
    assert (a["below_guarantee_s"], b["below_guarantee_s"]) == (0, 5)
    assert report["cluster"]["utilisation"]["cpu"] == round(950 / 1600, 4)
    bob = Identity(name="bob", tenants=[x for x in c.tenants if "bob" in x.members])
    assert [x["name"] for x in seen_by(report, bob)["teams"]] == ["team-b"]  # users: their teams only
    assert csv_rows(report)[0][:3] == ["name", "resource", "used_hours"]
    by_user = {x["name"]: x for x in usage(c, 200, 300.0, "user")["teams"]}
    assert by_user["alice"]["evictions_suffered"] == 1 and by_user["bob"]["evictions_caused"] == 1
    assert by_user["alice"]["borrowed_hours"] is None
    assert usage(c, 60, 1000.0) is None  # nothing in that period


@pytest.mark.asyncio
async def test_usage_counts_the_nodes_as_they_were_and_names_the_cluster_row(service):
    """n2 (8 CPUs) joins at t=290: over 100..300 the cluster had 8*190 + 16*10 = 1680 CPU-s, of which 950 used
    (not 950 of today's 16*200). The cluster's row is named and totals what the teams used, in the CSV too."""
    from hub_ext.planning.usage import CSV_COLUMNS, csv_rows, usage
    from hub_ext.planning.usage_text import render

    c, t = service
    _record(c, t)
    t[0] = 290
    c.add_nodes([parse_node({"name": "n2", "allocatable": {"cpu": "8"}}, "n2")])
    report = usage(c, 200, 300.0, "team")
    cluster = report["cluster"]
    assert cluster["utilisation"]["cpu"] == round(950 / 1680, 4)
    assert cluster["idle_hours"]["cpu"] == round((1680 - 950) / 3600, 3)
    assert cluster["name"] == "cluster" and cluster["used_hours"]["cpu"] == round(710 / 3600, 3) + round(240 / 3600, 3)
    rows = csv_rows(report)
    assert rows[0] == CSV_COLUMNS and len({len(r) for r in rows}) == 1
    last = dict(zip(CSV_COLUMNS, next(r for r in rows if r[0] == "cluster" and r[1] == "cpu")))
    assert (last["utilisation"], last["idle_hours"], last["wait_p50_s"]) == (round(950 / 1680, 4),
                                                                               round(730 / 3600, 3), "")
    assert render(report, "json").splitlines()[-1].startswith('{"scope": "cluster", "name": "cluster"')


@pytest.mark.asyncio
async def test_the_services_comparison_plays_the_recorded_history_under_both_trees(service, capsys, monkeypatch):
    """What ``POST /api/v1/whatif`` runs in its own process: under the recorded tree b1 reclaims from a1
    (as recorded); with b's guarantee taken away it cannot, and waits for a1 to end (100 s after t=100)."""
    import copy
    import io
    import json

    from hub_ext.planning import whatif_child

    c, t = service
    _record(c, t)
    doc = recorded_scenario(c, None, 300.0)
    proposed = copy.deepcopy(MANIFEST)
    proposed["spec"]["root"]["children"][1]["min"] = {"cpu": "0"}
    rows = {r.get("name", "cluster"): r for r in whatif_child.rows({"scenario": doc, "tree": proposed})}
    assert set(rows) == {"a", "b", "cluster"}
    a, b = rows["a"], rows["b"]
    assert (a["current"]["evictions_suffered"], b["current"]["evictions_caused"]) == (1, 1)
    assert (a["proposed"]["evictions_suffered"], b["proposed"]["evictions_caused"]) == (0, 0)
    assert (b["current"]["wait_p50_s"], b["proposed"]["wait_p50_s"]) == (5, 90)  # reclaim's grace; a1's rest
    bad = copy.deepcopy(proposed)
    bad["spec"]["root"]["children"][1]["min"] = {"cpu": "9"}  # above root's max of 8
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"scenario": doc, "tree": bad})))
    assert whatif_child.main() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "min" in err, err


@pytest.mark.asyncio
async def test_two_workloads_of_one_name_are_two_workloads_in_the_export(service):
    """The service tells bob's two "bob-train" jobs apart by id; the scenario must too, or it applies the
    second as an update of the first and the replay runs one job where two ran."""
    c, t = service
    alice = Identity(name="alice", tenants=[x for x in c.tenants if "alice" in x.members])
    job = {"command": ["train"], "name": "same", "resources": {"requests": {"cpu": "2"}}}
    first, second = c.submit(alice, job), c.submit(alice, job)
    c.tick()
    t[0] = 160
    doc = recorded_scenario(c, None, 160.0)
    names = [s["apply"][0]["metadata"]["name"] for s in doc["steps"] if "apply" in s]
    assert sorted(names) == sorted([f"same-{first.id}", f"same-{second.id}"]), names
    reports = list(Simulator(parse_scenario(doc)).run())
    assert {p["owner"] for r in reports for p in r["pods"] if p["phase"] == "Running"} == {f"Job/{n}" for n in names}
