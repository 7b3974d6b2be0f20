"""The engine's decisions, one named case per row (in the style of Kueue's preemption tests).

Each case: a quota tree (or none), nodes, pods already running (admitted in
order, one second apart), one incoming pod; expected: which pods are evicted
and what happens to the incoming one. A new scenario is one entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from builders import PodDef as P, engine, node, ref, run_all, settle, submit, tree
from hub_ext.scheduler.model import Phase

LOW, HIGH, CRIT = "low-priority-dev", "high-priority-research", "critical-prod"

# Two teams under one root: guarantee 4 cpu each, may borrow up to 8.
TWO_TEAMS = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]),
    node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"]),
]))
# The seed's shape, small: root -> {a -> a1, a2; b -> b1, b2}, leaves guarantee 2, may use 4.
FOUR_LEAVES = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, children=[
        node("a1", {"cpu": 2}, {"cpu": 4}, ["ns1"]), node("a2", {"cpu": 2}, {"cpu": 4}, ["ns2"])]),
    node("b", {"cpu": 4}, {"cpu": 8}, children=[
        node("b1", {"cpu": 2}, {"cpu": 4}, ["ns3"]), node("b2", {"cpu": 2}, {"cpu": 4}, ["ns4"])]),
]))
# Small guarantees: both teams mostly borrow.
BORROWERS = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 2}, {"cpu": 8}, ["team-a"]),
    node("b", {"cpu": 2}, {"cpu": 8}, ["team-b"]),
]))
GPU_ONLY = tree(node("root", {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 4}, children=[
    node("x", {"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 4}, ["team-x"]),
    node("y", {"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 4}, ["team-y"]),
]))


@dataclass
class Case:
    running: list
    incoming: P
    nodes: dict = field(default_factory=lambda: {"n1": {"cpu": 8}})
    tree: object = None
    evicted: set = field(default_factory=set)  # refs of victims
    outcome: str = "Running"  # the incoming pod, once victims are gone
    reason: str | None = None  # its reason code when it waits


CASES = {
    # -- priority preemption without a tree (the first seed) ---------------------------
    "preempts the lowest priority pod": Case(
        running=[P("x/hi", 4, pc=HIGH), P("x/low", 4, pc=LOW)], incoming=P("y/crit", 4, pc=CRIT),
        evicted={"x/low"}),
    "takes the most recently admitted among equals": Case(
        running=[P("x/old", 4, pc=LOW), P("x/new", 4, pc=LOW)], incoming=P("y/hi", 4, pc=HIGH),
        evicted={"x/new"}),
    "never preempts equal priority": Case(
        running=[P("x/a", 4, pc=HIGH), P("x/b", 4, pc=HIGH)], incoming=P("y/c", 4, pc=HIGH),
        outcome="Pending", reason="cluster-capacity"),
    "preemptionPolicy Never waits instead": Case(
        running=[P("x/a", 8, pc=LOW)], incoming=P("y/b", 4, pc=CRIT, never=True),
        outcome="Pending", reason="cluster-capacity"),
    "evicts several small pods on one node when one is not enough": Case(
        running=[P("x/a", 2, pc=LOW), P("x/b", 2, pc=LOW), P("x/c", 2, pc=LOW), P("x/d", 2, pc=LOW)],
        incoming=P("y/big", 4, pc=CRIT), evicted={"x/c", "x/d"}),
    "victims come from the one node that can make room": Case(
        nodes={"n1": {"cpu": 4}, "n2": {"cpu": 4}},
        running=[P("x/a", 2, pc=LOW), P("x/b", 2, pc=HIGH), P("x/c", 2, pc=LOW), P("x/d", 2, pc=LOW)],
        incoming=P("y/big", 4, pc=HIGH), evicted={"x/c", "x/d"}),
    "no futile eviction when no set makes room": Case(
        running=[P("x/a", 4, pc=LOW), P("x/b", 4, pc=HIGH)], incoming=P("y/big", 8, pc=HIGH),
        outcome="Pending", reason="cluster-capacity"),
    "does not evict for a pod no node could ever hold": Case(
        running=[P("x/a", 8, pc=LOW)], incoming=P("y/gpu", 1, gpu=1, pc=CRIT),
        outcome="Pending", reason="cluster-capacity"),
    "non-preemptible pods are never victims": Case(
        running=[P("x/keep", 4, pc=LOW, preemptible=False), P("x/go", 4, pc=LOW)],
        incoming=P("y/crit", 8, pc=CRIT), outcome="Pending", reason="cluster-capacity"),
    "respects the node selector when choosing a node": Case(
        nodes={"n1": {"cpu": 4}, "n2": {"cpu": 4}},
        running=[P("x/a", 4, pc=LOW), P("x/b", 4, pc=LOW)],
        incoming=P("y/c", 4, pc=CRIT, selector={"pool": "two"}), evicted={"x/b"}),
    # -- the quota tree: reclaim, borrowing, guarantees ---------------------------------
    "reclaims a guarantee from a borrower whatever its priority": Case(
        tree=TWO_TEAMS, running=[P("team-a/c1", 4, pc=CRIT), P("team-a/c2", 4, pc=CRIT)],
        incoming=P("team-b/n", 2, pc=LOW), evicted={"team-a/c2"}),
    "does not reclaim beyond the guarantee": Case(
        tree=TWO_TEAMS, running=[P("team-a/a", 2, pc=LOW), P("team-b/b1", 4, pc=LOW), P("team-a/a2", 2, pc=LOW)],
        incoming=P("team-b/b2", 2, pc=LOW), outcome="Pending", reason="quota-max"),
    "never preempts a tenant within its guarantee, even at higher priority": Case(
        tree=TWO_TEAMS, running=[P("team-a/a", 4, pc=LOW), P("team-b/b", 4, pc=LOW)],
        incoming=P("team-b/crit", 2, pc=CRIT), evicted={"team-b/b"}),
    "priority preemption inside the own leaf": Case(
        tree=TWO_TEAMS, running=[P("team-a/low", 4, pc=LOW), P("team-a/hi", 4, pc=HIGH)],
        incoming=P("team-a/crit", 4, pc=CRIT), evicted={"team-a/low"}),
    "priority preemption of a borrowing sibling": Case(
        tree=BORROWERS, running=[P("team-b/hi", 4, pc=HIGH), P("team-a/low", 2, pc=LOW), P("team-a/low2", 2, pc=LOW)],
        incoming=P("team-b/crit", 2, pc=CRIT), evicted={"team-a/low2"}),
    "priority preemption never takes a sibling below its guarantee": Case(
        tree=TWO_TEAMS, running=[P("team-b/hi", 4, pc=HIGH), P("team-a/low", 2, pc=LOW), P("team-a/low2", 2, pc=LOW)],
        incoming=P("team-b/crit", 2, pc=CRIT), evicted={"team-b/hi"}),
    "a leaf at its max waits even with higher priority": Case(
        tree=TWO_TEAMS, running=[P("team-a/a", 8, pc=HIGH)], incoming=P("team-a/b", 1, pc=HIGH),
        outcome="Pending", reason="quota-max"),
    "between equally borrowing siblings takes the most recently admitted": Case(
        tree=FOUR_LEAVES,
        running=[P("ns1/p1", 2), P("ns1/p2", 2), P("ns2/p1", 2), P("ns2/p2", 2)],
        incoming=P("ns4/p", 2), evicted={"ns2/p2"}),
    "takes from the sibling most over its share first": Case(
        tree=FOUR_LEAVES,
        running=[P("ns1/p1", 2), P("ns1/p2", 2), P("ns2/p1", 1), P("ns2/p2", 1), P("ns2/p3", 1), P("ns4/p1", 1)],
        incoming=P("ns3/p", 1), evicted={"ns1/p2"}),
    "a reclaimer outside the tree cannot reclaim": Case(
        tree=TWO_TEAMS, running=[P("team-a/a", 8, pc=LOW)], incoming=P("other/x", 2, pc=LOW),
        outcome="Pending", reason="cluster-capacity"),
    "tree pods reclaim room from namespaces outside the tree": Case(
        tree=TWO_TEAMS, running=[P("other/x", 6, pc=CRIT)], incoming=P("team-a/a", 4, pc=LOW),
        evicted={"other/x"}),
    "non-preemptible pods run only within the guarantee": Case(
        tree=TWO_TEAMS, running=[P("team-a/a", 4, pc=LOW, preemptible=False)],
        incoming=P("team-a/b", 1, pc=LOW, preemptible=False), outcome="Pending", reason="quota-min"),
    "a GPU-only tree leaves cpu to the cluster": Case(
        tree=GPU_ONLY, nodes={"g1": {"cpu": 64, "nvidia.com/gpu": 4}},
        running=[P("team-x/a", 1, gpu=2, pc=LOW), P("team-x/b", 1, gpu=2, pc=LOW)],
        incoming=P("team-y/c", 1, gpu=1, pc=LOW), evicted={"team-x/b"}),
    "a pod needing none of a node's resources cannot reclaim through it": Case(
        tree=GPU_ONLY, nodes={"g1": {"cpu": 4, "nvidia.com/gpu": 4}},
        running=[P("team-x/a", 4, gpu=1, pc=LOW)], incoming=P("team-y/cpu-only", 2, pc=LOW),
        outcome="Pending", reason="cluster-capacity"),
}
# The selector case needs labelled nodes.
LABELS = {"respects the node selector when choosing a node": {"n1": {"pool": "one"}, "n2": {"pool": "two"}}}


@pytest.mark.parametrize("name", list(CASES))
def test_case(name):
    case = CASES[name]
    eng = engine(case.tree, case.nodes, LABELS.get(name))
    run_all(eng, case.running)
    pod = submit(eng, case.incoming, 100.0)
    decisions = eng.schedule(100.0)
    assert {ref(e.victim) for e in decisions.evictions} == case.evicted
    for ev in decisions.evictions:
        assert ev.victim.phase is Phase.TERMINATING
        assert pod.phase is Phase.PENDING and pod.node is not None  # nominated, waiting
        eng.complete_eviction(ev.victim.uid, 130.0)
    assert pod.phase.value == case.outcome, pod.reason
    if case.reason:
        assert pod.reason.code == case.reason, pod.reason
    # Nothing more happens once settled: the decision was final.
    assert settle(eng, 200.0) == []


def test_victims_keep_their_node_until_gone():
    eng = engine(None, {"n1": {"cpu": 4}})
    run_all(eng, [P("x/low", 4, pc=LOW)])
    crit = submit(eng, P("y/crit", 4, pc=CRIT), 10)
    [ev] = eng.schedule(10).evictions
    assert ev.victim.phase is Phase.TERMINATING and ev.deadline == 10 + 30
    assert eng.cluster.nodes["n1"].free["cpu"] == -4000  # both charged while the victim terminates
    other = submit(eng, P("z/other", 1, pc=CRIT), 11)
    eng.schedule(11)
    assert other.phase is Phase.PENDING  # the freed room is promised to the nominee
    assert eng.complete_eviction(ev.victim.uid, 40) == [crit]
    assert crit.phase is Phase.RUNNING and crit.node == "n1" and crit.admitted_at == 40


def test_grace_period_comes_from_the_victim():
    eng = engine(None, {"n1": {"cpu": 4}})
    run_all(eng, [P("x/low", 4, pc=LOW, grace=5)])
    submit(eng, P("y/crit", 4, pc=CRIT), 10)
    [ev] = eng.schedule(10).evictions
    assert ev.deadline == 15
    assert ev.victim.reason.code == "preempted" and "y/crit" in ev.victim.reason.message


def test_reason_names_node_resource_and_amounts():
    eng = engine(TWO_TEAMS, {"n1": {"cpu": 16}})
    run_all(eng, [P("team-a/a", 8, pc=LOW)])
    pod = submit(eng, P("team-a/b", 1, pc=LOW), 5)
    eng.schedule(5)
    assert pod.reason.code == "quota-max"
    assert pod.reason.details == {"node": "a", "resource": "cpu", "need": "1", "used": "8", "limit": "8"}
    assert pod.reason.message == "quota a is at its max for cpu: needs 1, uses 8 of 8"


def test_queue_order_is_priority_then_age_and_does_not_block():
    eng = engine(None, {"n1": {"cpu": 4}})
    big = submit(eng, P("x/big", 8, pc=CRIT), 0)  # can never fit
    old = submit(eng, P("x/old", 2, pc=LOW), 1)
    hi = submit(eng, P("x/hi", 2, pc=HIGH), 2)
    new = submit(eng, P("x/new", 2, pc=LOW), 3)
    assert [p.uid for p in eng.pending] == [big.uid, hi.uid, old.uid, new.uid]
    eng.schedule(4)
    assert (big.phase, hi.phase, old.phase, new.phase) == (Phase.PENDING, Phase.RUNNING, Phase.RUNNING, Phase.PENDING)
    assert eng.positions() == {big.uid: (1, 1), new.uid: (2, 2)}


def test_parked_pods_are_retried_when_room_is_released():
    eng = engine(None, {"n1": {"cpu": 4}})
    a = run_all(eng, [P("x/a", 4, pc=LOW)])["x/a"]
    waiting = submit(eng, P("x/b", 4, pc=LOW), 1)
    eng.schedule(1)
    eng.schedule(2)
    assert waiting.phase is Phase.PENDING
    eng.finish(a.uid, 3)
    assert eng.schedule(3).admitted == [waiting]


def test_guarantees_scale_down_when_the_cluster_is_small():
    eng = engine(TWO_TEAMS, {"n1": {"cpu": 4}})
    assert eng.quota.nodes["a"].min == {"cpu": 2000} and eng.quota.nodes["root"].min == {"cpu": 4000}
    assert eng.warnings == ["guarantees of cpu scaled to 50%: the cluster has 4, the tree guarantees 8"]
    eng.add_node("n2", {"cpu": 4000})
    assert eng.quota.nodes["a"].min == {"cpu": 4000} and eng.warnings == []


def test_two_reclaimers_take_one_pod_from_each_borrowing_sibling():
    """The second seed's fairness: "root.a.1 and root.a.2 each lose one pod"."""
    eng = engine(FOUR_LEAVES, {"n1": {"cpu": 8}})
    run_all(eng, [P(f"ns{n}/p{i}", 1) for n in (1, 2) for i in range(4)])
    submit(eng, P("ns4/q1", 1), 10)
    submit(eng, P("ns4/q2", 1), 11)
    evictions = settle(eng, 12)
    assert sorted(ref(e.victim) for e in evictions) == ["ns1/p3", "ns2/p3"]
    assert {n: eng.quota.nodes[n].used["cpu"] for n in ("a1", "a2", "b2")} == {"a1": 3000, "a2": 3000, "b2": 2000}


def test_a_replica_under_another_tree_leaves_the_original_alone():
    eng = engine(TWO_TEAMS, {"n1": {"cpu": 8}})
    pods = run_all(eng, [P("team-a/a1", 4), P("team-a/a2", 4)])
    waiting = submit(eng, P("team-b/b", 4), 10)
    [ev] = eng.schedule(10).evictions  # b reclaims its guarantee: a2 terminates, b is nominated
    assert ref(ev.victim) == "team-a/a2" and waiting.nominated
    smaller_a = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
        node("a", {"cpu": 2}, {"cpu": 4}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8}, ["team-b"])]))
    copy = eng.replica(smaller_a)
    assert sorted(p.name for p in copy.pods.values()) == ["a1", "b"]  # the terminating pod is gone
    assert [p.name for p in copy.pending] == ["b"]  # the nominee queues again, in its place
    d = copy.schedule(11)
    assert [p.name for p in d.admitted] == ["b"] and d.evictions == []
    assert copy.quota.nodes["a"].max == {"cpu": 4000} and copy.quota.nodes["a"].used == {"cpu": 4000}
    # the original is untouched
    assert eng.quota.nodes["a"].max == {"cpu": 8000} and waiting.nominated
    assert pods["team-a/a2"].phase is Phase.TERMINATING and eng.cluster.nodes["n1"].free["cpu"] == -4000
