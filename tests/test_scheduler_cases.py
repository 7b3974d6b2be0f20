"""The engine's decisions, one named case per row (in the style of Kueue's preemption tests).

Each case: a quota tree (or none), nodes, pods already running (admitted in
order, one second apart; ``gang=n`` makes a gang of n pods), optionally a pod
preempting just before (its victims still terminating), one incoming pod or
gang; expected: which pods are evicted and what happens to the incoming one
once they are gone. A new scenario is one entry.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from builders import PodDef as P, engine, node, ref, run_all, settle, submit, submit_pods, tree
from hub_ext.quota.resourcequota import parse_resource_quota
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
# Issue 9's examples: one 40-cpu node; root guarantees and caps 20, leaves a and b guarantee 10, may use 20.
HALVES = tree(node("root", {"cpu": 20}, {"cpu": 20}, children=[
    node("a", {"cpu": 10}, {"cpu": 20}, ["a"]), node("b", {"cpu": 10}, {"cpu": 20}, ["b"])]))
BIG = {"n1": {"cpu": 40}}
MIXED = tree(node("root", {"cpu": 8, "nvidia.com/gpu": 4}, {"cpu": 8, "nvidia.com/gpu": 4}, children=[
    node("a", {"cpu": 4, "nvidia.com/gpu": 2}, {"cpu": 8, "nvidia.com/gpu": 4}, ["a"]),
    node("b", {"cpu": 4, "nvidia.com/gpu": 2}, {"cpu": 8, "nvidia.com/gpu": 4}, ["b"])]))
# root -> x, y (guarantee 10) -> x1, x2, y1, y2 (guarantee 5); everyone may use the whole root.
THREE_LEVELS = tree(node("root", {"cpu": 20}, {"cpu": 20}, children=[
    node("x", {"cpu": 10}, {"cpu": 20}, children=[
        node("x1", {"cpu": 5}, {"cpu": 20}, ["x1"]), node("x2", {"cpu": 5}, {"cpu": 20}, ["x2"])]),
    node("y", {"cpu": 10}, {"cpu": 20}, children=[
        node("y1", {"cpu": 5}, {"cpu": 20}, ["y1"]), node("y2", {"cpu": 5}, {"cpu": 20}, ["y2"])]),
]))
THREES = tree(node("root", {"cpu": 12}, {"cpu": 12}, children=[
    node(n, {"cpu": 4}, {"cpu": 12}, [n]) for n in ("a", "b", "c")]))
CAPPED = tree(node("t", {}, {"cpu": 6}, ["t"]))  # one leaf: no guarantee, a ceiling of 6
# A GPU-only leaf, the root's only child, under a root that also guarantees cpu.
GPU_LEAF = tree(node("root", {"cpu": 2, "nvidia.com/gpu": 1}, {}, children=[
    node("t", {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1}, ["t"])]))


@dataclass
class Case:
    running: list
    incoming: P
    nodes: dict = field(default_factory=lambda: {"n1": {"cpu": 8}})
    tree: object = None
    evicted: set = field(default_factory=set)  # refs of victims
    outcome: str = "Running"  # the incoming pod (every pod of a gang), once victims are gone
    reason: str | None = None  # its reason code when it waits
    preempting: P | None = None  # submitted just before the incoming one; its victims are still terminating


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
        outcome="Pending", reason="inadmissible"),
    "a pod above any node's allocatable is inadmissible and evicts nobody": Case(
        running=[P("x/a", 8, pc=LOW)], incoming=P("y/huge", 9, pc=CRIT), outcome="Pending", reason="inadmissible"),
    "non-preemptible pods are never victims": Case(
        running=[P("x/keep", 4, pc=LOW, preemptible=False), P("x/go", 4, pc=LOW)],
        incoming=P("y/crit", 8, pc=CRIT), outcome="Pending", reason="cluster-capacity"),
    "without a tree the namespace does not matter: the most recent of the lowest priority goes": Case(
        nodes={"n1": {"cpu": 6}}, running=[P("x/a", 2, pc=LOW), P("x/b", 2, pc=LOW), P("y/c", 2, pc=LOW)],
        incoming=P("z/crit", 2, pc=CRIT), evicted={"y/c"}),  # kube-scheduler's order, though x uses more
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
    # -- the revised rules (DESIGN.md "Preemption", 2026-12-01; issue 9) -----------------------
    "issue 9: a large borrower is reclaimed whole, though that takes it below its min": Case(
        tree=HALVES, nodes=BIG, running=[P("b/big", 15), P("a/first", 5)], incoming=P("a/second", 5),
        evicted={"b/big"}),
    "issue 9: borrowed room goes back before the team's own lower-priority work": Case(
        tree=HALVES, nodes=BIG, running=[P("a/nb", 4, pc=LOW)] + [P(f"b/r{i}", 4, pc=HIGH) for i in range(4)],
        incoming=P("a/train", 4, pc=HIGH), evicted={"b/r3"}),
    "own lower-priority pods it evicts can bring its side within min, opening reclaim": Case(
        tree=HALVES, nodes=BIG, running=[P("a/l1", 4, pc=LOW), P("a/l2", 4, pc=LOW)]
        + [P(f"b/h{i}", 4, pc=HIGH) for i in range(3)],
        incoming=P("a/h", 6, pc=HIGH), evicted={"a/l2", "b/h2"}),  # not both of a's: b borrows
    # t is within its (GPU) min, so rule 1 is open below the root, where t has no sibling to reclaim
    # from; the root is above its cpu min until t's own low pod (on n2, no room for hi) goes too.
    "own lower-priority pods open reclaim further up than a level with nothing to give": Case(
        tree=GPU_LEAF, nodes={"n1": {"cpu": 2, "nvidia.com/gpu": 1}, "n2": {"cpu": 2}},
        running=[P("o/crit", 2, pc=CRIT), P("t/low", 2, pc=LOW)], incoming=P("t/hi", 2, gpu=1, pc=HIGH),
        evicted={"o/crit", "t/low"}),  # o is outside the tree: reclaimed whatever its priority
    # Only n2 has a GPU for c/p. The quota search took a/l first (lowest priority, frees root's cpu),
    # which left a too close to its min for a/h, the pod on n2, to go too; a/h alone does both.
    "victims freeing quota elsewhere do not use up what the victim on the one node that can hold it needs": Case(
        tree=tree(node("root", {"cpu": 6}, {"cpu": 6}, children=[
            node("a", {"cpu": 1}, {"cpu": 6}, ["a"]), node("c", {}, {"cpu": 6}, ["c"])])),
        nodes={"n1": {"cpu": 2}, "n2": {"cpu": 4, "nvidia.com/gpu": 1}},
        running=[P("a/l", 2, pc=LOW), P("a/h", 4, pc=HIGH)], incoming=P("c/p", 2, gpu=1, pc=CRIT),
        evicted={"a/h"}),  # rule 2: a keeps 2 of its min 1; a/l too would take it to 0
    # The quota is short of 4 at the root (6 of 6 used) and c (no min) cannot reclaim, so rule 2 only: a
    # may give 5 of its 6 above its min 1. Rule 3 takes a/l first (lowest priority; the root still short
    # of 2), then a/h would take a to 0: refused. a/h alone frees the 4 and keeps a at 2: it must go.
    "a victim taken first for the quota does not use up what the one victim that suffices needs": Case(
        tree=tree(node("root", {"cpu": 6}, {"cpu": 6}, children=[
            node("a", {"cpu": 1}, {"cpu": 6}, ["a"]), node("c", {}, {"cpu": 6}, ["c"])])),
        running=[P("a/l", 2, pc=LOW), P("a/h", 4, pc=HIGH)], incoming=P("c/p", 4, pc=CRIT),
        evicted={"a/h"}),
    # The same on the node alone (the quota has room: 5 of the root's 10 in use): n1 has 1 cpu free, a/l
    # frees 1 more and then a/h may not go (a at 0 of its min 1); a/h alone frees 4 and keeps a at 1.
    "a victim taken first on the node does not use up what the one victim that suffices needs": Case(
        tree=tree(node("root", {"cpu": 10}, {"cpu": 10}, children=[
            node("a", {"cpu": 1}, {"cpu": 10}, ["a"]), node("c", {}, {"cpu": 10}, ["c"])])),
        running=[P("o/x", 2, pc=CRIT, preemptible=False), P("a/l", 1, pc=LOW), P("a/h", 4, pc=HIGH)],
        incoming=P("c/p", 4, pc=CRIT), evicted={"a/h"}),
    "the victim that takes a subtree below its min is its last; the next comes from elsewhere": Case(
        tree=THREES, nodes={"n1": {"cpu": 12}},
        running=[P("a/p1", 3), P("a/p2", 3), P("b/p1", 3), P("b/p2", 3)], incoming=P("c/p", 4),
        evicted={"b/p2", "a/p2"}),  # b goes to 3 < 4 and gives no more
    "several resources: only the resource it is short of is judged": Case(
        tree=MIXED, nodes={"g1": {"cpu": 16, "nvidia.com/gpu": 4}},
        running=[P("a/p1", 2, gpu=2), P("a/p2", 2, gpu=2)], incoming=P("b/q", 1, gpu=1), evicted={"a/p2"}),
    "several resources: a large GPU borrower is reclaimed whole": Case(
        tree=MIXED, nodes={"g1": {"cpu": 16, "nvidia.com/gpu": 4}},
        running=[P("b/big", 1, gpu=3), P("a/one", 1, gpu=1)], incoming=P("a/two", 1, gpu=1), evicted={"b/big"}),
    "three levels: a leaf reclaims from its sibling when their parent is above its min": Case(
        tree=THREE_LEVELS, nodes=BIG, running=[P("x1/a", 4), P("x1/b", 4), P("y1/c", 12)],
        incoming=P("x2/d", 3), evicted={"x1/b"}),  # x would be 11 > 10: y1 is out of reach
    "three levels: reclaim reaches a cousin, from the leaf above its min": Case(
        tree=THREE_LEVELS, nodes=BIG,
        running=[P("x1/a", 4), P("y1/c1", 4), P("y1/c2", 4), P("y1/c3", 4), P("y2/e", 4)],
        incoming=P("x2/d", 4), evicted={"y1/c3"}),
    "non-preemptible pods of a borrowing team are passed over": Case(
        tree=HALVES, nodes=BIG, running=[P("b/np", 10, preemptible=False), P("b/extra", 5), P("a/first", 5)],
        incoming=P("a/second", 5), evicted={"b/extra"}),
    "a non-preemptible pod reclaims within its guarantee": Case(
        tree=HALVES, nodes=BIG, running=[P("b/big", 15), P("a/first", 5)],
        incoming=P("a/np", 5, preemptible=False), evicted={"b/big"}),
    "a pod above its leaf's max is inadmissible, whatever its priority": Case(
        tree=TWO_TEAMS, nodes={"n1": {"cpu": 16}}, running=[P("team-b/b", 2, pc=LOW)],
        incoming=P("team-a/big", 9, pc=CRIT), outcome="Pending", reason="inadmissible"),
    "preemptionPolicy Never waits, even below its guarantee": Case(
        tree=HALVES, nodes=BIG, running=[P("b/big", 15), P("a/first", 5)],
        incoming=P("a/second", 5, never=True), outcome="Pending", reason="quota-max"),
    "a second reclaimer waits for the room already being freed": Case(
        tree=HALVES, nodes=BIG, running=[P("b/b1", 5), P("b/b2", 5), P("b/big", 10)],
        preempting=P("a/first", 5), incoming=P("a/second", 5)),  # big (10) goes for first: room for both
    "room promised by a victim still terminating is counted: no second victim": Case(
        running=[P("x/a", 4, pc=LOW), P("x/b", 4, pc=LOW)], preempting=P("y/c", 2, pc=CRIT),
        incoming=P("y/d", 2, pc=CRIT)),
    # -- gangs ----------------------------------------------------------------------------
    "a gang reclaims room for all its pods at once": Case(
        tree=HALVES, nodes=BIG, running=[P(f"b/b{i}", 5) for i in range(4)], incoming=P("a/job", 5, gang=2),
        evicted={"b/b2", "b/b3"}),
    "a gang preempts for a node for each pod; victims it does not need are spared": Case(
        nodes={"n1": {"cpu": 4}, "n2": {"cpu": 4}},
        running=[P("x/l1", 4, pc=LOW), P("x/h", 2, pc=HIGH), P("x/l2", 2, pc=LOW)],
        incoming=P("y/g", 2, pc=CRIT, gang=2), evicted={"x/l1"}),  # l2 was taken first, then spared
    "a running gang is one victim of its whole size": Case(
        nodes={"n1": {"cpu": 4}}, running=[P("x/g", 2, pc=LOW, gang=2)], incoming=P("y/c", 2, pc=CRIT),
        evicted={"x/g-0", "x/g-1"}),
    "a gang taken first is spared when a later victim suffices": Case(
        tree=CAPPED, nodes={"n1": {"cpu": 4}, "n2": {"cpu": 2}},
        running=[P("t/big", 4, pc=LOW), P("t/g", 1, pc=LOW, gang=2)], incoming=P("t/h", 4, pc=HIGH),
        evicted={"t/big"}),
    "a gang whose total is above its leaf's max is inadmissible": Case(
        tree=CAPPED, nodes={"n1": {"cpu": 16}}, running=[P("t/a", 1, pc=LOW)],
        incoming=P("t/g", 3, pc=CRIT, gang=3), outcome="Pending", reason="inadmissible"),
    "a gang that cannot get a node for each pod evicts nobody": Case(
        nodes={"n1": {"cpu": 4}, "n2": {"cpu": 4}}, running=[P("x/l", 2, pc=LOW), P("x/keep", 4, pc=CRIT)],
        incoming=P("y/g", 3, pc=CRIT, gang=2), outcome="Pending", reason="cluster-capacity"),
    # Priority mode tries n1 first (a borrows most) and fails at a/high (same class); then b/low, its own
    # leaf's, opens rule 1 on n2: n1 is tried again and a/high reclaimed (b ends at its min, 6).
    "a gang's own-leaf victim opens reclaim on a node it tried before": Case(
        tree=tree(node("root", children=[node("a", {"cpu": 1}, {}, ["a"]), node("b", {"cpu": 6}, {}, ["b"])])),
        nodes={"n1": {"cpu": 4}, "n2": {"cpu": 4}},
        running=[P("a/low", 2, pc=LOW), P("a/high", 2, pc=HIGH), P("b/low", 2, pc=LOW)],
        incoming=P("b/g", 3, pc=HIGH, gang=2), evicted={"a/low", "a/high", "b/low"}),
}
# The selector case needs labelled nodes.
LABELS = {"respects the node selector when choosing a node": {"n1": {"pool": "one"}, "n2": {"pool": "two"}}}


@pytest.mark.parametrize("name", list(CASES))
def test_case(name):
    case = CASES[name]
    eng = engine(case.tree, case.nodes, LABELS.get(name))
    run_all(eng, case.running)
    if case.preempting:
        submit_pods(eng, case.preempting, 50.0)
        assert eng.schedule(50.0).evictions
    pods = submit_pods(eng, case.incoming, 100.0)
    decisions = eng.schedule(100.0)
    assert {ref(e.victim) for e in decisions.evictions} == case.evicted
    for ev in decisions.evictions:
        assert ev.victim.phase is Phase.TERMINATING
    if case.evicted:
        assert all(p.nominated for p in pods)  # waiting for its victims, its room promised
    for p in [p for p in eng.pods.values() if p.phase is Phase.TERMINATING]:
        eng.complete_eviction(p.uid, 130.0)
    assert settle(eng, 130.0) == []  # the victims gone, nobody else is evicted
    assert [p.phase.value for p in pods] == [case.outcome] * len(pods), pods[0].reason
    if case.reason:
        assert {p.reason.code for p in pods} == {case.reason}, pods[0].reason
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
    assert big.reason.code == "inadmissible"  # more than the node has: it holds no place in the queue
    assert eng.positions() == {new.uid: (1, 1)}


def test_inadmissible_work_rejoins_the_queue_in_its_place_when_the_tree_lets_it():
    small = tree(node("root", {"cpu": 4}, {"cpu": 4}, children=[node("a", {"cpu": 4}, {"cpu": 4}, ["a"])]))
    eng = engine(small, {"n1": {"cpu": 16}})
    run_all(eng, [P("a/run", 4)])
    big = submit(eng, P("a/big", 6), 1)
    later = submit(eng, P("a/later", 2), 2)
    eng.schedule(3)
    assert big.reason.code == "inadmissible" and big.phase is Phase.PENDING
    assert big.reason.message == ("needs 6 cpu, more than quota a's max of 4: it cannot start unless that max is "
                                  "raised; ask for less")
    assert eng.positions() == {later.uid: (1, 1)}  # the inadmissible pod holds no place
    eng.schedule(4)
    assert big.reason.code == "inadmissible"  # parked: nothing changed, nothing looked at
    eng.set_tree(tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[node("a", {"cpu": 8}, {"cpu": 8}, ["a"])])))
    eng.schedule(5)
    assert not big.inadmissible and big.reason.code == "quota-max"  # admissible now: it waits its turn
    assert later.phase is Phase.RUNNING  # 4 + 2 of 8: it fits; big (6) waits first in line for the room
    assert eng.positions() == {big.uid: (1, 1)}


def test_parked_pods_are_retried_when_room_is_released():
    eng = engine(None, {"n1": {"cpu": 4}})
    a = run_all(eng, [P("x/a", 4, pc=LOW)])["x/a"]
    waiting = submit(eng, P("x/b", 4, pc=LOW), 1)
    eng.schedule(1)
    eng.schedule(2)
    assert waiting.phase is Phase.PENDING
    eng.finish(a.uid, 3)
    assert eng.schedule(3).admitted == [waiting]


def test_a_parked_reclaimer_wakes_when_its_side_drops_to_its_min_above_its_leaf():
    """GPU_LEAF: t is within its min, so rule 1 was open below the root (where t has no sibling) and the
    parked pod watched no usage on its side; the root's cpu dropping to its min opens rule 1 above it."""
    eng = engine(GPU_LEAF, {"n1": {"cpu": 2, "nvidia.com/gpu": 1}, "n2": {"cpu": 2}})
    pods = run_all(eng, [P("o/crit", 2, pc=CRIT), P("t/busy", 2, pc=HIGH)])
    hi = submit(eng, P("t/hi", 2, gpu=1, pc=HIGH), 10)
    assert eng.schedule(10).evictions == []  # busy has its priority: rule 1 stays shut above the root
    eng.finish(pods["t/busy"].uid, 11)  # on n2, where hi cannot run: the root uses 0 of its 2 cpu
    assert [ref(e.victim) for e in eng.schedule(12).evictions] == ["o/crit"] and hi.nominated


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
    copy = eng.replica(smaller_a, queue=True)
    assert sorted(p.name for p in copy.pods.values()) == ["a1", "b"]  # the terminating pod is gone
    assert [p.name for p in copy.pending] == ["b"]  # the nominee queues again, in its place
    d = copy.schedule(11)
    assert [p.name for p in d.admitted] == ["b"] and d.evictions == []
    assert copy.quota.nodes["a"].max == {"cpu": 4000} and copy.quota.nodes["a"].used == {"cpu": 4000}
    # the original is untouched
    assert eng.quota.nodes["a"].max == {"cpu": 8000} and waiting.nominated
    assert pods["team-a/a2"].phase is Phase.TERMINATING and eng.cluster.nodes["n1"].free["cpu"] == -4000


def test_no_ping_pong_after_a_large_borrower_is_reclaimed():
    """Issue 9: the evicted 15-cpu pod, queued again, would take b to 15 > its min: it cannot reclaim back."""
    eng = engine(HALVES, BIG)
    run_all(eng, [P("b/big", 15), P("a/first", 5)])
    submit(eng, P("a/second", 5), 10)
    assert [ref(e.victim) for e in settle(eng, 10)] == ["b/big"]
    again = submit(eng, P("b/big-again", 15), 20)
    assert settle(eng, 20) == [] and again.phase is Phase.PENDING
    assert again.reason.message == "quota root is at its max for cpu: needs 15, uses 10 of 20"
    assert eng.quota.nodes["a"].used == {"cpu": 10000}


def test_two_gangs_that_would_deadlock_pod_by_pod_run_one_after_the_other():
    """Admitted pod by pod, each gang would hold 2 of the 4 GPUs and wait for good for its third."""
    eng = engine(None, {"g1": {"cpu": 16, "nvidia.com/gpu": 2}, "g2": {"cpu": 16, "nvidia.com/gpu": 2}})
    first = submit_pods(eng, P("x/a", 1, gpu=1, gang=3), 0)
    second = submit_pods(eng, P("y/b", 1, gpu=1, gang=3), 0)
    assert sorted(ref(p) for p in eng.schedule(1).admitted) == ["x/a-0", "x/a-1", "x/a-2"]
    assert {p.phase for p in second} == {Phase.PENDING} and all(p.node is None for p in second)
    assert eng.cluster.free_total["nvidia.com/gpu"] == 1000  # the waiting gang holds nothing
    assert second[0].reason.message == \
        "gang y/b needs 3 pods of cpu=1, nvidia.com/gpu=1 at once; 1 would fit on the cluster's nodes"
    for p in first:
        eng.finish(p.uid, 2)
    assert sorted(ref(p) for p in eng.schedule(3).admitted) == ["y/b-0", "y/b-1", "y/b-2"]


def test_a_waiting_gang_blocks_nobody_behind_it_and_takes_one_place_in_the_queue():
    eng = engine(None, {"n1": {"cpu": 4}})
    gang = submit_pods(eng, P("x/g", 2, pc=CRIT, never=True, gang=3), 0)  # 6 cpu on a 4-cpu cluster
    small = submit(eng, P("x/small", 1, pc=LOW), 1)
    later = submit(eng, P("x/later", 4, pc=LOW), 2)
    assert eng.schedule(3).admitted == [small]
    positions = eng.positions()
    assert [positions[p.uid] for p in gang] == [(1, 1)] * 3 and positions[later.uid] == (2, 2)
    assert gang[0].reason.details == {"need": "cpu=2", "gang": "x/g", "pods": 3, "fit": 2}


def test_a_gang_over_its_quota_max_says_how_many_would_fit():
    eng = engine(CAPPED, {"n1": {"cpu": 16}})
    run_all(eng, [P("t/a", 1)])
    gang = submit_pods(eng, P("t/g", 2, gang=3), 1)
    eng.schedule(1)
    assert {p.reason.code for p in gang} == {"quota-max"}
    assert gang[0].reason.message == ("gang t/g needs 3 pods of cpu=2 at once; 2 would fit: "
                                      "quota t is at its max for cpu: needs 6, uses 1 of 6")


def test_resource_quota_judges_a_gang_whole_at_submission():
    eng = engine(None, {"n1": {"cpu": 16}})
    eng.apply_resource_quota(parse_resource_quota({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq", "namespace": "x"},
        "spec": {"hard": {"requests.cpu": "5"}}}))
    gang = submit_pods(eng, P("x/g", 2, gang=3), 0)
    assert {p.phase for p in gang} == {Phase.REJECTED} and not eng.pending
    assert gang[0].reason.message == ("gang x/g (3 pods) is forbidden: exceeded quota: rq, requested: "
                                      "requests.cpu=6, used: requests.cpu=0, limited: requests.cpu=5")
    assert eng.rq_used[("x", "rq")] == {}  # nothing charged
    assert [p.phase for p in submit_pods(eng, P("x/h", 2, gang=2), 1)] == [Phase.PENDING] * 2


def test_gang_pods_start_together_once_their_victims_are_gone():
    eng = engine(None, {"n1": {"cpu": 4}, "n2": {"cpu": 4}})
    low = run_all(eng, [P("x/a", 4, pc=LOW), P("x/b", 4, pc=LOW)])
    gang = submit_pods(eng, P("y/g", 3, pc=CRIT, gang=2), 1)
    d = eng.schedule(1)
    assert d.nominated == gang and sorted(ref(e.victim) for e in d.evictions) == ["x/a", "x/b"]
    assert {e.preemptor.uid for e in d.evictions} == {gang[0].uid}
    assert eng.complete_eviction(low["x/a"].uid, 30) == []  # one victim still terminating: none starts
    assert eng.complete_eviction(low["x/b"].uid, 31) == gang
    assert {p.phase for p in gang} == {Phase.RUNNING} and {p.node for p in gang} == {"n1", "n2"}


def test_the_seed_demo_is_unchanged():
    """The second seed's demo under the revised rules: Running per namespace 4 -> 4,4 -> 3,3,2 -> 2,2,2,2."""
    from hub_ext.quota.workloads import WorkloadSpec
    from hub_ext.scheduler.owners import Owner

    def team(name, first):
        leaves = [node(f"{name}.{i}", {"cpu": 10}, {"cpu": 20}, [f"ns{first + i - 1}"]) for i in (1, 2)]
        return node(name, {"cpu": 20}, {"cpu": 40}, children=leaves)

    demo = tree(node("root", {"cpu": 40}, {"cpu": 40}, children=[team("root.a", 1), team("root.b", 3)]))
    eng, owners, running = engine(demo, {"node-1": {"cpu": 56}}), [], []
    for i, ns in enumerate(("ns1", "ns2", "ns3", "ns4")):
        owners.append(Owner(WorkloadSpec("Deployment", ns, "nginx", P(f"{ns}/x", 5).spec(), pods=5)))
        for _ in range(5):  # the Deployments' controllers and the scheduler, until nothing changes
            for owner in owners:
                owner.reconcile(eng, 10.0 * i)
            settle(eng, 10.0 * i)
        running.append(sorted(Counter(p.namespace for p in eng.pods.values() if p.phase is Phase.RUNNING).values()))
    assert running == [[4], [4, 4], [2, 3, 3], [2, 2, 2, 2]]


def test_a_reclaimed_borrower_gets_at_most_the_reclaim_grace():
    """A borrower asking for an hour's grace does not hold another team's guarantee for an hour
    (``TenancyService.max_reclaim_grace_seconds``); a priority preemption keeps the victim's own."""
    eng = engine(TWO_TEAMS, {"n1": {"cpu": 8}})
    eng.max_reclaim_grace = 60
    run_all(eng, [P("team-a/a1", 4, grace=3600), P("team-a/a2", 4, grace=3600)])  # a borrows b's 4
    submit(eng, P("team-b/b", 4), 10)
    [ev] = eng.schedule(10).evictions
    assert ev.victim.reason.code == "reclaimed" and ev.deadline == 10 + 60
    assert ev.victim.reason.details["gracePeriodSeconds"] == 60
    other = engine(None, {"n1": {"cpu": 4}})
    other.max_reclaim_grace = 60
    run_all(other, [P("x/low", 4, pc=LOW, grace=3600)])
    submit(other, P("y/crit", 4, pc=CRIT), 10)
    [ev] = other.schedule(10).evictions
    assert ev.victim.reason.code == "preempted" and ev.deadline == 10 + 3600


def test_an_eviction_whose_preemptor_is_cancelled_is_withdrawn():
    eng = engine(None, {"n1": {"cpu": 4}})
    low = run_all(eng, [P("x/low", 4, pc=LOW)])["x/low"]
    crit = submit(eng, P("y/crit", 1, pc=CRIT), 10)
    [ev] = eng.schedule(10).evictions
    assert eng.needless_evictions() == []  # its preemptor still needs the room
    eng.delete(crit.uid)  # cancelled inside the warning
    [(victims, preemptor)] = eng.needless_evictions()
    assert victims == [low] and preemptor is None
    assert eng.withdraw_eviction(victims, preemptor, 12) == []
    assert low.phase is Phase.RUNNING and low.reason is None and low.preempted_by is None
    assert eng.cluster.nodes["n1"].leaving == {"cpu": 0} and not eng.cluster.leaving_nodes
    assert eng.needless_evictions() == []
    again = submit(eng, P("y/again", 1, pc=CRIT), 13)  # the victim is a victim again, like any running pod
    [ev] = eng.schedule(13).evictions
    assert ev.victim is low and again.nominated


def test_an_eviction_is_withdrawn_when_another_end_frees_the_room_and_its_preemptor_starts_beside_it():
    eng = engine(None, {"n1": {"cpu": 4}})
    pods = run_all(eng, [P("x/low", 2, pc=LOW), P("x/short", 2, pc=HIGH)])
    crit = submit(eng, P("y/crit", 2, pc=CRIT), 10)
    [ev] = eng.schedule(10).evictions
    assert ev.victim is pods["x/low"]
    eng.finish(pods["x/short"].uid, 11)  # room freed by another end
    [(victims, preemptor)] = eng.needless_evictions()
    assert victims == [pods["x/low"]] and preemptor is crit
    assert eng.withdraw_eviction(victims, preemptor, 11) == [crit]
    assert crit.phase is Phase.RUNNING and pods["x/low"].phase is Phase.RUNNING
    assert eng.cluster.nodes["n1"].free["cpu"] == 0 and eng.cluster.nodes["n1"].reserved.get("cpu", 0) == 0


def test_a_reclaim_is_withdrawn_when_the_borrowers_sibling_ends():
    eng = engine(TWO_TEAMS, {"n1": {"cpu": 16}})
    pods = run_all(eng, [P("team-b/own", 4, pc=LOW), P("team-b/borrow", 2, pc=LOW), P("team-b/more", 2, pc=LOW)])
    mine = submit(eng, P("team-a/mine", 2, pc=LOW), 10)
    d = eng.schedule(10)
    assert [e.victim for e in d.evictions] == [pods["team-b/more"]]
    assert eng.needless_evictions() == []
    eng.finish(pods["team-b/borrow"].uid, 11)  # the root has room for both again
    [(victims, preemptor)] = eng.needless_evictions()
    assert eng.withdraw_eviction(victims, preemptor, 11) == [mine]
    assert eng.quota.nodes["root"].used["cpu"] == 8000 and eng.quota.nodes["root"].leaving["cpu"] == 0


def test_an_eviction_is_needless_once_its_preemptor_is_queued_again_elsewhere():
    eng = engine(None, {"n1": {"cpu": 4}, "n2": {"cpu": 2}})
    low = run_all(eng, [P("x/low", 4, pc=LOW), P("x/other", 2, pc=LOW)])["x/low"]
    crit = submit(eng, P("y/crit", 4, pc=CRIT), 10)
    [ev] = eng.schedule(10).evictions
    assert ev.victim is low and crit.node == "n1"
    assert eng.update_node("n1", {"cpu": 4000}, schedulable=False) == [crit]  # cordoned: it waits for another node
    [(victims, preemptor)] = eng.needless_evictions()
    assert victims == [low] and preemptor is None
