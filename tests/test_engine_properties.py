"""Property-based tests of the scheduler engine against DESIGN.md "Semantics" (Preemption as revised 2026-12-01).

Random valid quota trees (1-3 levels, 1-6 leaves; cpu and sometimes
nvidia.com/gpu; a resource guaranteed, only capped, or not managed at all),
random clusters (1-6 nodes of 2-16 cpus), namespaces on leaves and outside the
tree, pods of several sizes (1-8 cpus, 0-2 GPUs; all of 1 cpu in "unit"
configurations), some of them gangs of 2-3 pods, and random sequences of
operations (submit, schedule, complete an eviction, finish, fail or delete a
pod, settle). After every step the invariants are recomputed from the pods
alone, independently of the engine's counters:

1. no quota node above ``max``, counting pods running or terminating; the
   engine's ``used`` is exactly what running and nominated pods request;
2. no cluster node over its allocatable, now or once evictions complete;
3. every eviction is allowed, victim by victim in the order taken (a gang is
   one victim of its whole size): by rule 1 (reclaim: below the lowest common
   ancestor the preemptor's side is within ``min`` once the whole plan is
   gone; the victim's side used more than its ``min`` of each contested
   resource the victim frees, counting the victims taken before it) or by
   rule 2 (priority: strictly lower priority, in the preemptor's own leaf or
   in a leaf whose side stays at or above ``min`` once the whole plan is gone);
4. no futile eviction: each plan makes room (a node for each of the
   preemptor's pods) and is minimal (no victim can be spared: without it there
   is no room, or another victim is no longer allowed), a nominated pod starts
   as soon as its victims are gone and the room is really free, and every pod
   that evicted in a settle runs by its end (no eviction admits nothing);
5. after settling, the guarantee holds (see ``check_guarantee``): no pending
   pod whose path below the root stays within ``min`` with it admitted, while
   the other subtrees hold more than its shortfall above their ``min`` (the
   caveats, stated there, are DESIGN's: pods are atomic, the set is minimal,
   a node must have room); with unit pods, simply: a leaf with a pending pod
   that fits in its guarantee has got its guarantee back;
6. after settling, no pending pod while lower-priority pods of its own leaf
   together free its size (on a node, and on every quota node of its path);
7. after settling, no pending pod would fit by evicting a set of pods the
   rules allow: every set tried when at most ``EXHAUSTIVE`` running units
   free something it asks for, else found greedily (sound, not complete);
8. the same operations give the same decisions;
9. ``preemptionPolicy: Never`` pods never evict; non-preemptible pods are never
   victims and run only within ``min``;
10. no gang is ever partly running: never some of its pods waiting while others
   hold room; its pods are admitted, nominated and evicted in one decision.

The number of examples comes from a hypothesis profile: "engine-ci" (the
default, what CI runs) or "engine-deep" (``ENGINE_PROPERTIES_PROFILE=engine-deep``,
for a run by hand); ``ENGINE_PROPERTIES_EXAMPLES`` overrides either.

The engine bugs these properties found have minimal regression tests at the
end of the file.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from builders import PodDef, engine, node, submit, submit_pods, tree
from hub_ext.scheduler.engine import Engine
from hub_ext.scheduler.model import Phase

GPU = "nvidia.com/gpu"
CPU = "cpu"
UNIT = 1000  # one cpu / one gpu, in milli-units
LOW, HIGH, CRIT = "low-priority-dev", "high-priority-research", "critical-prod"

# ---------------------------------------------------------------------------
# Configuration: our own model of the tree and the cluster (independent of the engine)
# ---------------------------------------------------------------------------
@dataclass
class QSpec:
    name: str
    min: dict  # resource -> milli, as configured
    max: dict
    parent: str | None = None
    children: list = field(default_factory=list)
    namespaces: list = field(default_factory=list)

    @property
    def managed(self) -> set:
        return set(self.min) | set(self.max)


@dataclass
class Config:
    qnodes: dict | None  # name -> QSpec, root first; None: no tree
    nodes: list  # [(name, {resource: milli})]
    namespaces: list  # namespaces on leaves, then namespaces outside the tree
    unit: bool = False  # only 1-cpu pods and every quota node manages cpu (invariant 5's simple form)
    _paths: dict = field(default_factory=dict, repr=False, compare=False)  # the tree never changes: paths kept

    def leaf_of(self, ns: str) -> str | None:
        if not self.qnodes:
            return None
        return next((q.name for q in self.qnodes.values() if ns in q.namespaces), None)

    def path(self, ns: str) -> list[str]:
        """Quota nodes from the namespace's leaf up to the root; [] outside the tree."""
        out = self._paths.get(ns)
        if out is None:
            out, name = [], self.leaf_of(ns)
            while name is not None:
                out.append(name)
                name = self.qnodes[name].parent
            self._paths[ns] = out
        return list(out)

    @property
    def capacity(self) -> dict:
        total: dict = {}
        for _, alloc in self.nodes:
            for r, a in alloc.items():
                total[r] = total.get(r, 0) + a
        return total

    def expected_min(self) -> dict:
        """Guarantees in force: scaled down in proportion when the cluster holds less (DESIGN "Quota tree")."""
        if not self.qnodes:
            return {}
        cap, total = self.capacity, {}
        for q in self.qnodes.values():
            for r, a in q.min.items():
                anc = q.parent
                while anc is not None and r not in self.qnodes[anc].min:
                    anc = self.qnodes[anc].parent
                if anc is None:  # no ancestor guarantees r: a top-level guarantee
                    total[r] = total.get(r, 0) + a
        return {
            name: {r: a if total[r] <= cap.get(r, 0) else a * cap.get(r, 0) // total[r] for r, a in q.min.items()}
            for name, q in self.qnodes.items()
        }


def _qty(res: str, milli: int) -> str:
    return f"{milli}m" if res == CPU else str(milli // UNIT)


def build_engine(cfg: Config) -> Engine:
    t = None
    if cfg.qnodes:
        def conv(q: QSpec) -> dict:
            return node(q.name, {r: _qty(r, a) for r, a in q.min.items()}, {r: _qty(r, a) for r, a in q.max.items()},
                        q.namespaces, [conv(cfg.qnodes[c]) for c in q.children])
        t = tree(conv(next(iter(cfg.qnodes.values()))))
    return engine(t, {name: {r: _qty(r, a) for r, a in alloc.items()} for name, alloc in cfg.nodes})


def pod(ref: str, cpu: int = 0, gpu: int = 0, pc: str = LOW, never=False, preemptible=True, gang: int = 0) -> PodDef:
    """A pod of ``cpu``/``gpu`` milli-units (``gang`` > 1: a gang of that many)."""
    return PodDef(ref, cpu=f"{cpu}m" if cpu else None, gpu=gpu // UNIT if gpu else None, pc=pc, never=never,
                  preemptible=preemptible, gang=gang)


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------
@st.composite
def configs(draw, unit: bool | None = None, with_tree: bool | None = None):
    unit = draw(st.integers(0, 2)) == 0 if unit is None else unit
    gpu = False if unit else draw(st.booleans())
    resources = [CPU, GPU] if gpu else [CPU]
    nodes = []
    for i in range(draw(st.sampled_from([1, 1, 2, 2, 3, 4, 5, 6]))):
        alloc = {CPU: draw(st.sampled_from([2, 4, 4, 6, 8, 8, 16] if not unit else [2, 2, 4, 4, 6, 8])) * UNIT}
        if gpu:
            g = draw(st.sampled_from([0, 1, 2, 4]))
            if g:
                alloc[GPU] = g * UNIT
        nodes.append((f"n{i}", alloc))
    cap: dict = {}
    for _, alloc in nodes:
        for r, a in alloc.items():
            cap[r] = cap.get(r, 0) + a

    has_tree = draw(st.integers(0, 4)) > 0 if with_tree is None else with_tree
    qnodes = None
    if has_tree:
        qnodes = {}
        levels = draw(st.integers(0, 2))  # 0: the root is the only node (and the leaf)
        counter = iter(range(100))

        def build(level: int, parent: str | None, remaining: int) -> int:
            """Add a subtree with at most ``remaining`` leaves; returns how many it has."""
            name = "root" if parent is None else f"q{next(counter)}"
            qnodes[name] = QSpec(name, {}, {}, parent)
            if parent is not None:
                qnodes[parent].children.append(name)
            if level == levels or (level > 0 and draw(st.integers(0, 3)) == 0):
                return 1
            k = draw(st.integers(1, min(3, remaining)))
            used = 0
            for i in range(k):
                used += build(level + 1, name, remaining - used - (k - i - 1))
            return used

        build(0, None, 6)
        # Quotas top down; children's min sum <= the parent's min where the parent names the resource.
        # "Shared out" trees (as the seeds' and issue 9's): the root guarantees and caps the cluster, every
        # node guarantees part of its parent's guarantee and may use the whole root, so teams borrow.
        shared_out = draw(st.integers(0, 2)) == 0
        left: dict = {}  # (node, resource) -> guarantee still free for its children
        for name, q in qnodes.items():
            for r in resources:
                parent_names = q.parent is not None and r in qnodes[q.parent].managed
                modes = ["min+max", "min+max", "min", "max"] + ([] if unit else ["none"])
                mode = "min+max" if shared_out else draw(st.sampled_from(modes))
                if mode == "none":
                    continue
                if shared_out:
                    total = cap.get(r, 0) // UNIT
                    if q.parent is None:
                        low = total
                    else:  # about an equal share of the parent's guarantee
                        share = qnodes[q.parent].min[r] // UNIT // len(qnodes[q.parent].children)
                        low = min(draw(st.integers(max(share - 1, 0), share)), left[(q.parent, r)] // UNIT)
                    q.min[r], q.max[r] = low * UNIT, total * UNIT
                    if q.parent is not None:
                        left[(q.parent, r)] -= q.min[r]
                    left[(name, r)] = q.min[r]
                    continue
                if parent_names:
                    low = draw(st.integers(0, left[(q.parent, r)] // UNIT)) * UNIT if mode != "max" else 0
                    left[(q.parent, r)] -= low
                else:
                    # Unit mode keeps guarantees within the cluster; otherwise they may exceed it (scaled down).
                    top = cap.get(r, 0) // UNIT + (0 if unit else 2)
                    low = draw(st.integers(0, top)) * UNIT if mode != "max" else 0
                if mode in ("min+max", "min"):
                    q.min[r] = low
                if mode in ("min+max", "max"):
                    q.max[r] = low + draw(st.integers(0, 6 if unit else 10)) * UNIT
                left[(name, r)] = q.min.get(r, 0)
        for name, q in qnodes.items():
            if not q.children:
                q.namespaces = [f"ns-{name}-{j}" for j in range(draw(st.integers(1, 2)))]
    namespaces = [ns for q in (qnodes or {}).values() for ns in q.namespaces]
    outside = draw(st.integers(0, 2)) if qnodes else draw(st.integers(1, 3))
    namespaces += [f"out-{j}" for j in range(outside)]
    return Config(qnodes, nodes, namespaces, unit)


# ---------------------------------------------------------------------------
# Invariant checks, computed from the pods alone
# ---------------------------------------------------------------------------
def _add(target: dict, req: dict, sign: int = 1) -> None:
    for r, a in req.items():
        target[r] = target.get(r, 0) + sign * a


def _nz(resources: dict) -> dict:
    return {r: a for r, a in resources.items() if a}


def _total(pods) -> dict:
    out: dict = {}
    for p in pods:
        _add(out, p.requests)
    return out


def booked(p) -> bool:
    """Counted in quota ``used``: running (not terminating) or nominated."""
    return p.phase is Phase.RUNNING or p.nominated


def waiting(p) -> bool:
    return p.phase is Phase.PENDING and p.node is None


def quota_usage(cfg: Config, pods, include=lambda p: True) -> dict:
    out = {name: {} for name in (cfg.qnodes or {})}
    for p in pods:
        if include(p):
            for name in cfg.path(p.namespace):
                _add(out[name], p.requests)
    return out


def room(eng: Engine, include) -> dict:
    """Per node: allocatable minus what the pods selected by ``include`` (bound there) request."""
    out = {}
    for name, n in eng.cluster.nodes.items():
        out[name] = {r: n.allocatable.get(r, 0) for r in set(n.allocatable) | {CPU, GPU}}
    for p in eng.pods.values():
        if p.node is not None and p.phase in (Phase.RUNNING, Phase.TERMINATING, Phase.PENDING) and include(p):
            _add(out[p.node], p.requests, -1)
    return out


def units_of(pods) -> list[list]:
    """Pods grouped as the engine deals in them: a gang's together (in the order first met), others alone."""
    out, gangs = [], {}
    for p in pods:
        if p.gang is None:
            out.append([p])
        elif p.gang.uid in gangs:
            gangs[p.gang.uid].append(p)
        else:
            gangs[p.gang.uid] = [p]
            out.append(gangs[p.gang.uid])
    return out


def check_quota(cfg: Config, eng: Engine) -> None:
    """Invariant 1, invariant 9 (non-preemptible within min) and the guarantees in force."""
    for p in eng.pods.values():
        want = cfg.leaf_of(p.namespace) or f"namespace/{p.namespace}"
        assert p.leaf.name == want, f"pod {p.name} on quota leaf {p.leaf.name}, expected {want}"
    if not cfg.qnodes:
        return
    pods = list(eng.pods.values())
    book = quota_usage(cfg, pods, booked)
    phys = quota_usage(cfg, pods, lambda p: p.phase in (Phase.RUNNING, Phase.TERMINATING))
    nonpre = quota_usage(cfg, pods, lambda p: booked(p) and not p.preemptible)
    mins = cfg.expected_min()
    for name, q in cfg.qnodes.items():
        qn = eng.quota.nodes[name]
        assert _nz(qn.used) == _nz(book[name]), f"{name}: engine used {qn.used} != running+nominated {book[name]}"
        assert qn.min == mins[name], f"{name}: min in force {qn.min}, expected {mins[name]}"
        assert qn.managed == q.managed, f"{name}: manages {qn.managed}, expected {q.managed}"
        for r, cap in q.max.items():
            assert book[name].get(r, 0) <= cap, f"{name}: {r} running+nominated {book[name].get(r, 0)} > max {cap}"
            assert phys[name].get(r, 0) <= cap, f"{name}: {r} running+terminating {phys[name].get(r, 0)} > max {cap}"
        for r in q.managed:
            assert nonpre[name].get(r, 0) <= mins[name].get(r, 0), (
                f"{name}: non-preemptible pods use {nonpre[name].get(r, 0)} {r} > min {mins[name].get(r, 0)}")


def check_cluster(eng: Engine) -> None:
    """Invariant 2: within allocatable now (running + terminating) and once evictions complete (+ nominated)."""
    now = room(eng, lambda p: p.phase is not Phase.PENDING)
    later = room(eng, lambda p: p.phase is not Phase.TERMINATING)
    free = room(eng, lambda p: True)
    for name, n in eng.cluster.nodes.items():
        for r in now[name]:
            assert now[name][r] >= 0, f"node {name}: running+terminating {r} over allocatable by {-now[name][r]}"
            assert later[name][r] >= 0, f"node {name}: running+nominated {r} over allocatable by {-later[name][r]}"
        for r in n.allocatable:
            assert n.free[r] == free[name][r], f"node {name}: free {r} is {n.free[r]}, expected {free[name][r]}"


def check_nominations(eng: Engine) -> None:
    """Invariant 4: a nominated pod waits only for terminating pods its gang evicted; victims are preemptible."""
    for p in eng.pods.values():
        if p.phase is Phase.TERMINATING:
            assert p.preemptible, f"non-preemptible {p.name} is terminating"
        if p.nominated:
            for uid in p.waiting_for:
                v = eng.pods.get(uid)
                assert v is not None and v.phase is Phase.TERMINATING and v.preempted_by == p.uid, (
                    f"{p.name} waits for pod {uid}, which is {'gone' if v is None else v.phase}: it can never start")


def check_gangs(eng: Engine) -> None:
    """Invariant 10: no gang has pods waiting while others hold room (running, terminating or nominated)."""
    seen = set()
    for p in eng.pods.values():
        if p.gang is None or p.gang.uid in seen:
            continue
        seen.add(p.gang.uid)
        members = p.gang.members
        holding = [m.name for m in members if m.phase in (Phase.RUNNING, Phase.TERMINATING) or m.nominated]
        idle = [m.name for m in members if waiting(m)]
        assert not (holding and idle), f"gang {p.gang.name} partly running: {holding} hold room, {idle} wait"


def snapshot(eng: Engine) -> dict:
    """What a schedule() pass starts from: uid -> (phase, node), and the queue in order."""
    return {"state": {uid: (p.phase, p.node) for uid, p in eng.pods.items()}, "queue": [p.uid for p in eng.pending]}


def placeable(request: dict, count: int, free: dict, extra: dict | None = None) -> bool:
    """Whether ``count`` pods of ``request`` get a node each, all at once, in ``free`` (+ ``extra``) per node."""
    slots = 0
    for name, have in free.items():
        more = (extra or {}).get(name, {})
        n = count
        for r, a in request.items():
            if a > 0:
                left = have.get(r, 0) + more.get(r, 0)
                n = min(n, left // a if left > 0 else 0)
        slots += n
    return slots >= count


def fits(cfg: Config, unit, used_q: dict, free: dict, victims=(), leaving_q: dict | None = None) -> bool:
    """Whether ``unit`` (a pod's, or a waiting gang's pods) fits every quota max on its path and gets a node
    for each pod in ``free`` once ``victims`` are gone. ``leaving_q``: usage of terminating pods, which
    counts against max for a unit that starts at once."""
    p, total = unit[0], _total(unit)
    freed_q = quota_usage(cfg, victims)
    for name in cfg.path(p.namespace):
        for r, cap in cfg.qnodes[name].max.items():
            need = total.get(r, 0)
            held = used_q[name].get(r, 0) - freed_q[name].get(r, 0) + (leaving_q[name].get(r, 0) if leaving_q else 0)
            if need and held + need > cap:
                return False
    freed_n: dict = {}
    for v in victims:
        _add(freed_n.setdefault(v.node, {}), v.requests)
    return placeable(p.requests, len(unit), free, freed_n)


def own_leaf(cfg: Config, p, v) -> bool:
    vpath, path = cfg.path(v.namespace), cfg.path(p.namespace)
    return v.namespace == p.namespace or bool(vpath and path and vpath[0] == path[0])


def plan_rules(cfg: Config, unit, victims: list[list], used_q: dict, contested: set) -> list[str] | None:
    """The rule allowing each victim unit of a plan, in the order taken (DESIGN.md "Preemption", rules 1 and
    2, revised 2026-12-01), or None with the first one the rules refuse. ``used_q``: usage before the plan."""
    p, req = unit[0], _nz(_total(unit))
    mins, path = cfg.expected_min(), cfg.path(p.namespace)
    after = {n: dict(u) for n, u in used_q.items()}
    for v in victims:
        for name in cfg.path(v[0].namespace):
            _add(after[name], _total(v), -1)
    before = {n: dict(u) for n, u in used_q.items()}
    rules = []
    for v in victims:
        first, total = v[0], _total(v)
        vpath = cfg.path(first.namespace)
        rule = None
        if own_leaf(cfg, p, first):
            rule = "priority" if first.priority < p.priority else None
        else:
            lca = next((n for n in vpath if n in path), None)  # None: the virtual top (or "outside")
            below = vpath[: vpath.index(lca)] if lca is not None else vpath
            mine = path[: path.index(lca)] if lca is not None else path
            reclaim = bool(mine) and all(
                [r for r in req if r in cfg.qnodes[n].managed]
                and all(after[n].get(r, 0) + a <= mins[n].get(r, 0)
                        for r, a in req.items() if r in cfg.qnodes[n].managed)
                for n in mine)
            managed_contested = [(n, r) for n in below for r in contested
                                 if total.get(r) and r in cfg.qnodes[n].managed]
            if reclaim and all(before[n].get(r, 0) > mins[n].get(r, 0) for n, r in managed_contested):
                rule = "reclaim"
            elif first.priority < p.priority and all(after[n].get(r, 0) >= mins[n].get(r, 0)
                                                     for n, r in managed_contested):
                rule = "priority"
        if rule is None:
            return None
        rules.append(rule)
        for name in vpath:
            _add(before[name], total, -1)
    return rules


class _Replay:
    """One schedule() pass replayed decision by decision, from the state it started from.

    ``used_q``: quota usage of running + nominated pods; ``leaving_q``: of terminating
    pods; ``np_q``: the non-preemptible part of ``used_q``. Per node, ``now``: room
    with terminating pods still there (what a pod starting at once needs) and
    ``later``: room once every terminating pod is gone (what a nomination may count on).
    """

    def __init__(self, cfg: Config, eng: Engine, state: dict):
        self.cfg = cfg
        self.used_q = {name: {} for name in (cfg.qnodes or {})}
        self.leaving_q = {name: {} for name in (cfg.qnodes or {})}
        self.np_q = {name: {} for name in (cfg.qnodes or {})}
        self.now, self.later, self.running = {}, {}, {}
        for name, n in eng.cluster.nodes.items():
            self.now[name] = {r: n.allocatable.get(r, 0) for r in set(n.allocatable) | {CPU, GPU}}
            self.later[name] = dict(self.now[name])
            self.running[name] = dict(self.now[name])  # minus running and terminating pods only
        for uid, (phase, where) in state.items():
            p = eng.pods.get(uid)
            if p is None or where is None or phase not in (Phase.RUNNING, Phase.TERMINATING, Phase.PENDING):
                continue
            if phase is Phase.TERMINATING:
                self.charge(p, self.leaving_q)
            else:
                self.charge(p, self.used_q)
                _add(self.later[where], p.requests, -1)
            if phase is not Phase.PENDING:
                _add(self.running[where], p.requests, -1)
            _add(self.now[where], p.requests, -1)

    def charge(self, p, usage: dict, sign: int = 1) -> None:
        for name in self.cfg.path(p.namespace):
            _add(usage[name], p.requests, sign)
            if usage is self.used_q and not p.preemptible:
                _add(self.np_q[name], p.requests, sign)

    def np_within_min(self, unit, mins: dict) -> bool:
        """Rule 4: a non-preemptible unit stays within min on its path, for the resources each node manages."""
        p, total = unit[0], _total(unit)
        return all(self.np_q[n].get(r, 0) + a <= mins[n].get(r, 0)
                   for n in self.cfg.path(p.namespace) for r, a in total.items() if r in self.cfg.qnodes[n].managed)

    def ready(self, unit) -> bool:
        """Whether nominated ``unit`` may start: victims gone, node room really free, every max kept."""
        if any(p.waiting_for for p in unit):
            return False
        need: dict = {}
        for p in unit:
            _add(need.setdefault(p.node, {}), p.requests)
        if any(self.running[n].get(r, 0) < a for n, req in need.items() for r, a in req.items()):
            return False
        total = _total(unit)
        return all(self.used_q[n].get(r, 0) + self.leaving_q[n].get(r, 0) <= cap
                   for n in self.cfg.path(unit[0].namespace) for r, cap in self.cfg.qnodes[n].max.items()
                   if total.get(r, 0))

    def contested(self, unit) -> set:
        """What ``unit`` is short of: resources at a quota max on its path, or that no node has enough of now."""
        p, req, total = unit[0], unit[0].requests, _total(unit)
        out = {r for n in self.cfg.path(p.namespace) for r, cap in self.cfg.qnodes[n].max.items()
               if total.get(r, 0) and self.used_q[n].get(r, 0) + total[r] > cap}
        if not placeable(req, len(unit), self.now):
            out |= {r for r, a in req.items() if max(free.get(r, 0) for free in self.now.values()) < a} or set(req)
        return out


def check_schedule(cfg: Config, eng: Engine, before: dict, d) -> None:
    """Replay one schedule() pass and check invariants 1-4, 9 and 10 at each of its decisions."""
    state, pods = before["state"], eng.pods
    rp = _Replay(cfg, eng, state)
    mins = cfg.expected_min()
    nominees = sorted((pods[uid] for uid, (ph, where) in state.items()
                       if ph is Phase.PENDING and where is not None and uid in pods), key=lambda p: p.sort_key())
    admitted = [p.uid for p in d.admitted]
    nominated = {p.uid for p in d.nominated}
    by_preemptor: dict = {}
    for e in d.evictions:
        by_preemptor.setdefault(e.preemptor.uid, []).append(e.victim)
    leads = {p.uid for p in d.nominated if p.gang is None or p is min(
        (m for m in d.nominated if m.gang is p.gang), key=lambda m: m.uid)}
    assert set(by_preemptor) == leads, "every nominated pod (a gang: its first) has victims, every eviction a nominee"
    victims_all = [v.uid for vs in by_preemptor.values() for v in vs]
    assert len(victims_all) == len(set(victims_all)), "a pod was evicted twice in one pass"
    for v in (pods[uid] for uid in victims_all):
        if v.gang is not None:  # a gang goes whole (invariant 10)
            running_then = {m.uid for m in v.gang.members if state.get(m.uid, (None,))[0] is Phase.RUNNING}
            assert running_then <= set(victims_all), f"gang {v.gang.name} evicted in part"

    # Nominated pods whose victims are gone start first (invariant 4), in queue order, when the room is free.
    expected = []
    for unit in units_of(nominees):
        if rp.ready(unit):
            expected += [p.uid for p in unit]
            for p in unit:
                _add(rp.running[p.node], p.requests, -1)
    nominee_uids = {p.uid for p in nominees}
    assert sorted(uid for uid in admitted if uid in nominee_uids) == sorted(expected), (
        f"nominated pods whose victims are gone and whose room and quota are free: {expected}; "
        f"started: {[uid for uid in admitted if uid in nominee_uids]}")
    started = set(expected)
    queue_admitted = [uid for uid in admitted if uid not in nominee_uids]
    assert set(queue_admitted) | nominated <= set(before["queue"]), "only queued pods are admitted or nominated"

    done = set()
    for uid in before["queue"]:
        p = pods.get(uid)
        if uid in done or (uid not in queue_admitted and uid not in nominated):
            continue
        unit = [p] if p.gang is None else [m for m in p.gang.members if m.uid in before["queue"]]
        done.update(m.uid for m in unit)
        if uid in queue_admitted:
            assert {m.uid for m in unit} <= set(queue_admitted), f"gang {p.gang and p.gang.name} admitted in part"
            # Started at once: quota (terminating pods count), room on its nodes now, rule 4.
            for m in unit:
                assert m.phase is Phase.RUNNING or m.admitted_at is not None, f"admitted {m.name} is {m.phase}"
            per_node: dict = {}
            for m in unit:
                _add(per_node.setdefault(m.node, {}), m.requests)
            assert all(rp.now[n].get(r, 0) >= a for n, req in per_node.items() for r, a in req.items()), (
                f"{p.name} admitted without room on its node(s)")
            assert fits(cfg, unit, rp.used_q, rp.now, leaving_q=rp.leaving_q), f"{p.name} admitted over a quota max"
            assert p.preemptible or rp.np_within_min(unit, mins), f"non-preemptible {p.name} started beyond min"
            started.update(m.uid for m in unit)
            for m in unit:
                _add(rp.running[m.node], m.requests, -1)
        else:
            assert {m.uid for m in unit} <= nominated, f"gang {p.gang and p.gang.name} nominated in part"
            victims = by_preemptor[uid]
            _check_plan(cfg, rp, unit, victims, state, started, mins)
            for v in victims:
                rp.charge(v, rp.used_q, -1)
                rp.charge(v, rp.leaving_q)
                _add(rp.later[v.node], v.requests)
        for m in unit:
            rp.charge(m, rp.used_q)
            _add(rp.now[m.node], m.requests, -1)
            _add(rp.later[m.node], m.requests, -1)


def _check_plan(cfg: Config, rp: _Replay, unit, victims, state, started, mins) -> None:
    p, used_q = unit[0], rp.used_q
    # Invariant 9: preemptionPolicy Never never evicts; non-preemptible pods are never victims (rule 4).
    assert p.can_preempt, f"{p.name} has preemptionPolicy Never but evicted {[v.name for v in victims]}"
    assert p.preemptible or rp.np_within_min(unit, mins), (
        f"non-preemptible {p.name} preempted {[v.name for v in victims]} to run beyond the min of its quota path")
    for v in victims:
        assert state[v.uid][0] is Phase.RUNNING or v.uid in started, f"victim {v.name} was not running"
        assert v.phase is Phase.TERMINATING and v.preempted_by == p.uid
        assert v.preemptible, f"non-preemptible {v.name} was evicted"
    # Invariant 3: each victim (a gang: as one) allowed by rule 1 or 2, in the order taken.
    contested = rp.contested(unit)
    plan = units_of(victims)
    if plan_rules(cfg, unit, plan, used_q, contested) is None:
        k = next(k for k in range(1, len(plan) + 1)
                 if plan_rules(cfg, unit, plan[:k], used_q, contested) is None or k == len(plan))
        v = plan[k - 1][0]
        raise AssertionError(
            f"{p.name} evicted {v.name} ({v.priority_class}), which the rules do not allow "
            f"(plan {[u[0].name for u in plan]}, contested {sorted(contested)})")
    # Invariant 4: the plan makes room on the chosen nodes, is needed, and is minimal.
    later = rp.later
    lead_waits = {v.uid for v in victims}
    assert all(m.node is not None for m in unit) and p.waiting_for == lead_waits
    per_node: dict = {}
    for m in unit:
        _add(per_node.setdefault(m.node, {}), m.requests)
    freed: dict = {}
    for v in victims:
        _add(freed.setdefault(v.node, {}), v.requests)
    assert all(later[n].get(r, 0) + freed.get(n, {}).get(r, 0) >= a for n, req in per_node.items()
               for r, a in req.items()), f"{p.name}: its victims do not make room on its nodes"
    assert fits(cfg, unit, used_q, later, victims), f"{p.name}: its victims do not make room"
    assert not fits(cfg, unit, used_q, later), f"{p.name} evicted {[v.name for v in victims]} though it fits without"
    for u in plan:
        rest = [w for w in plan if w is not u]
        spare_ok = fits(cfg, unit, used_q, later, [v for w in rest for v in w]) and \
            plan_rules(cfg, unit, rest, used_q, contested) is not None
        assert not spare_ok, (
            f"{p.name}: {u[0].name} need not be evicted ({[w[0].name for w in plan]} is not minimal)")


def np_fits_min(cfg: Config, eng: Engine, unit) -> bool:
    """Whether a non-preemptible unit would stay within min on its path (rule 4), given the pods now."""
    p = unit[0]
    if p.preemptible or not cfg.qnodes:
        return True
    nonpre = quota_usage(cfg, eng.pods.values(), lambda q: booked(q) and not q.preemptible and q not in unit)
    mins, total = cfg.expected_min(), _total(unit)
    return all(nonpre[n].get(r, 0) + a <= mins[n].get(r, 0)
               for n in cfg.path(p.namespace) for r, a in total.items() if r in cfg.qnodes[n].managed)


EXHAUSTIVE = 10  # invariant 7 tries every set of at most this many candidate units (2**10 sets)


def allowed_plan(cfg: Config, eng: Engine, unit, used_q: dict, free: dict) -> list | None:
    """A set of victims the rules allow that makes room for waiting ``unit``; None if none found.

    Sound: every set returned is allowed by DESIGN rules 1, 2 and 4 (``plan_rules``,
    the contested resources taken as all the unit requests: stricter than the
    engine), so an engine that settles while one exists missed a preemption ("if
    no set makes room, evict nothing" -- otherwise evict). Only running units
    that free something ``unit`` asks for can matter (for its quota, a node, or
    rule 1 on its side). At most ``EXHAUSTIVE`` of them: every set, smallest
    first, each in two orders (rule 1's source check depends on it: candidate
    order, and smallest first so the one taking a side to its min comes last);
    complete, as the engine's greedy order is not (a victim taken first may use
    up what its side may give, barring the one that alone would do). More:
    greedily, lowest priority first, then most recently admitted, in rounds
    until a round adds none (a victim of its own leaf may open rule 1).
    """
    contested = set(_nz(_total(unit)))
    running = sorted((v for v in eng.pods.values() if v.phase is Phase.RUNNING and v.preemptible and not v.occupying),
                     key=lambda v: (v.priority, -v.admitted_at, -v.uid))
    candidates = []
    for u in units_of(running):
        u = [m for m in (u[0].gang.members if u[0].gang else u) if m.phase is Phase.RUNNING and m.preemptible]
        if any(_total(u).get(r, 0) for r in contested):
            candidates.append(u)
    taken: list = []
    progress = True
    while progress:
        progress = False
        for u in candidates:
            if any(u is t for t in taken):
                continue
            if plan_rules(cfg, unit, taken + [u], used_q, contested) is None:
                continue
            taken.append(u)
            progress = True
            victims = [v for t in taken for v in t]
            if fits(cfg, unit, used_q, free, victims):
                return victims
    if len(candidates) <= EXHAUSTIVE:
        return _every_set(cfg, unit, candidates, used_q, free, contested)
    return None


def _every_set(cfg: Config, unit, candidates: list, used_q: dict, free: dict, contested: set) -> list | None:
    """The first set of ``candidates`` (fewest first) that makes room for ``unit`` and the rules allow."""
    # A victim the rules refuse alone is refused in every set (rule 2 and rule 1's source side only get
    # stricter with more victims), unless others could open rule 1 for it: victims on the preemptor's
    # side below the root (any in the tree, for a victim outside it), and never in its own leaf.
    p, mine = unit[0], cfg.path(unit[0].namespace)
    outside = any(not cfg.path(u[0].namespace) for u in candidates)
    reach = set(mine if outside else mine[:-1])
    opens = any(reach & set(cfg.path(u[0].namespace)) for u in candidates)
    candidates = [u for u in candidates if plan_rules(cfg, unit, [u], used_q, contested) is not None
                  or (opens and not own_leaf(cfg, p, u[0]))]
    if not fits(cfg, unit, used_q, free, [v for u in candidates for v in u]):
        return None  # room only grows with more victims: none of the sets makes room
    # What the quota nodes on its path are short of, and what each candidate gives back there: a cheap
    # first test of each set (``fits`` decides).
    total, path = _total(unit), cfg.path(unit[0].namespace)
    short = {(n, r): used_q[n].get(r, 0) + total[r] - cap for n in path for r, cap in cfg.qnodes[n].max.items()
             if total.get(r) and used_q[n].get(r, 0) + total[r] > cap}
    gives = []
    for u in candidates:
        freed = quota_usage(cfg, u)
        gives.append({key: freed[key[0]].get(key[1], 0) for key in short})
    index = {id(u): i for i, u in enumerate(candidates)}
    for size in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, size):
            if any(sum(gives[index[id(u)]][key] for u in chosen) < need for key, need in short.items()):
                continue
            victims = [v for u in chosen for v in u]
            if not fits(cfg, unit, used_q, free, victims):
                continue
            by_size = sorted(chosen, key=lambda u: sorted(_total(u).items()))
            if any(plan_rules(cfg, unit, list(order), used_q, contested) is not None for order in (chosen, by_size)):
                return victims
    return None


def check_guarantee(cfg: Config, eng: Engine, unit, used_q: dict, free: dict) -> None:
    """Invariant 5: the guarantee, for one waiting pod ``p`` (not a gang) on a leaf of the tree.

    Asserted when (the caveats): ``p`` may preempt (and, non-preemptible, stays
    within ``min``); every node of its path below the root manages a resource it
    asks for and stays within ``min`` of each such resource with it admitted; a
    cluster node has room for it now (pods are atomic: room on no node is not a
    quota matter); and it is short of one resource ``r`` at the root only. Then
    the other subtrees may not hold, above their ``min`` of ``r``, at least its
    shortfall: each gives back at least ``min(excess, what its children give)``
    (the victim that takes a subtree to or below ``min`` is allowed), a leaf its
    excess (its non-preemptible pods are within ``min``), a node that does not
    manage ``r`` what its children give, a leaf that does not manage it all its
    preemptible pods of ``r``.
    """
    p = unit[0]
    path = cfg.path(p.namespace)
    if len(unit) > 1 or not path or not p.can_preempt or not np_fits_min(cfg, eng, unit):
        return
    mins, req = cfg.expected_min(), _nz(p.requests)
    for n in path[:-1]:
        managed = [r for r in req if r in cfg.qnodes[n].managed]
        if not managed or any(used_q[n].get(r, 0) + req[r] > mins[n].get(r, 0) for r in managed):
            return
    if not placeable(req, 1, free):
        return
    root = cfg.qnodes[path[-1]]
    short = {r: used_q[root.name].get(r, 0) + a - root.max[r] for r, a in req.items()
             if r in root.max and used_q[root.name].get(r, 0) + a > root.max[r]}
    if len(short) != 1:
        return
    (res, shortfall), = short.items()
    preemptible = quota_usage(cfg, eng.pods.values(), lambda q: q.phase is Phase.RUNNING and q.preemptible)

    def gives(name: str) -> int:
        q = cfg.qnodes[name]
        below = sum(gives(c) for c in q.children) if q.children else preemptible[name].get(res, 0)
        if res not in q.managed:
            return below
        excess = max(used_q[name].get(res, 0) - mins[name].get(res, 0), 0)
        return excess if not q.children else min(excess, below)

    others = sum(gives(c) for n in path for c in cfg.qnodes[n].children if c not in path)
    assert others < shortfall, (
        f"guarantee: pending {p.name} ({p.requests}) stays within min below the root and is short of "
        f"{shortfall} {res} at the root, while other subtrees give back {others} above their min")


def check_own_leaf(cfg: Config, eng: Engine, unit, used_q: dict, free: dict) -> None:
    """Invariant 6: no waiting pod (or gang) while lower-priority pods of its own leaf together free its size:
    on its quota path, and on one node (each pod of a gang on one), once all of them are gone."""
    p = unit[0]
    if not p.can_preempt or not np_fits_min(cfg, eng, unit):
        return
    own = [v for v in eng.pods.values() if v.phase is Phase.RUNNING and v.preemptible and not v.occupying
           and own_leaf(cfg, p, v) and v.priority < p.priority]
    own = [v for u in units_of(own) for v in (
        [m for m in u[0].gang.members if m.phase is Phase.RUNNING] if u[0].gang else u)]
    if own and fits(cfg, unit, used_q, free, own):
        raise AssertionError(f"pending {p.name} ({p.priority_class}, {p.requests} x{len(unit)}) would fit by "
                             f"evicting lower-priority pods of its own leaf {[v.name for v in own]}")


def check_settled(cfg: Config, eng: Engine) -> None:
    """Invariants 5, 6 and 7 on a settled engine (no nominated or terminating pods)."""
    pods = list(eng.pods.values())
    assert not any(p.nominated or p.phase is Phase.TERMINATING for p in pods), "settled with evictions in flight"
    used_q = quota_usage(cfg, pods, booked)
    free = room(eng, lambda p: True)
    mins = cfg.expected_min()
    for unit in units_of([p for p in sorted(pods, key=lambda p: p.uid) if waiting(p)]):
        p = unit[0]
        check_own_leaf(cfg, eng, unit, used_q, free)
        if not p.can_preempt or not np_fits_min(cfg, eng, unit):
            continue
        # Invariant 7 (and reclaim in general): if the rules allow a set of victims that makes room,
        # the engine must not settle without evicting one.
        plan = allowed_plan(cfg, eng, unit, used_q, free)
        assert plan is None, (
            f"pending {p.name} ({p.priority_class}, {p.requests} x{len(unit)}) would fit by evicting "
            f"{[(v.name, v.priority_class) for v in plan]}, which the rules allow, but the engine settled")
        if cfg.qnodes:
            check_guarantee(cfg, eng, unit, used_q, free)
        # Invariant 5, simple form: a leaf below its guarantee gets it back (unit pods: no fragmentation).
        leaf = cfg.leaf_of(p.namespace)
        if cfg.unit and leaf is not None and len(unit) == 1:
            m = mins[leaf].get(CPU, 0)
            assert used_q[leaf].get(CPU, 0) + p.requests[CPU] > m, (
                f"leaf {leaf} uses {used_q[leaf].get(CPU, 0)} cpu of its min {m} and {p.name} is still pending")


def settle_checked(eng: Engine, now: float, on_schedule=None, rounds: int = 60) -> list:
    """Schedule and complete every terminating pod until nothing changes; returns the decisions.

    Invariant 4, no eviction that admits nothing: every pod that evicted others runs by the end.
    """
    out = []
    for _ in range(rounds):
        before = snapshot(eng)
        d = eng.schedule(now)
        if on_schedule is not None:
            on_schedule(before, d)
        out.append(d)
        leaving = sorted(p.uid for p in eng.pods.values() if p.phase is Phase.TERMINATING)
        for uid in leaving:
            eng.complete_eviction(uid, now)
        if not d and not leaving:
            preemptors = {e.preemptor.uid: e.preemptor for d in out for e in d.evictions}
            for p in preemptors.values():
                assert p.uid not in eng.pods or p.admitted_at is not None, (
                    f"{p.name} evicted {[e.victim.name for d in out for e in d.evictions if e.preemptor is p]} "
                    f"and never ran")
            return out
    raise AssertionError(f"the engine did not settle in {rounds} rounds")
# ---------------------------------------------------------------------------
# The state machine
# ---------------------------------------------------------------------------
def _pick(pods: list, i: int):
    return sorted(pods, key=lambda p: p.uid)[i % len(pods)]


def _decisions(d) -> tuple:
    return ("schedule", [p.uid for p in d.admitted], [(p.uid, p.node) for p in d.nominated],
            [(e.victim.uid, e.preemptor.uid) for e in d.evictions])


_ACTS = {  # what -> (phase of the pod it picks, engine call)
    "complete": (Phase.TERMINATING, "complete"),
    "finish": (Phase.RUNNING, "finish"),
    "fail": (Phase.RUNNING, "fail"),
    "delete": (Phase.RUNNING, "delete"),
    "delete-pending": (Phase.PENDING, "delete"),  # cancelled while waiting, or while nominated
    "delete-terminating": (Phase.TERMINATING, "delete"),  # its owner deletes it during its grace period
    "finish-terminating": (Phase.TERMINATING, "finish"),  # a job that completes during its grace period
}


class EngineMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.cfg = self.eng = None
        self.now = 0.0
        self.ops: list = []  # the operations, replayable (invariant 7)
        self.trace: list = []  # what the engine decided
        self.in_op = False

    @initialize(cfg=configs())
    def setup(self, cfg):
        self.cfg, self.eng = cfg, build_engine(cfg)

    # -- operations ---------------------------------------------------------
    @rule(batch=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 11), st.integers(0, 4),
                                   st.sampled_from([LOW, LOW, HIGH, CRIT]), st.integers(0, 9), st.integers(0, 7)),
                         min_size=1, max_size=6))
    def submit(self, batch):
        """Pods (now and then a gang of 2-3) of random namespace, size and priority; now and then
        preemptionPolicy Never or non-preemptible."""
        cfg = self.cfg
        for ns, size, gpu, pc, flags, gang in batch:
            namespace = cfg.namespaces[ns % len(cfg.namespaces)]
            never = flags == 0
            # Unit mode (invariant 5) keeps non-preemptible pods in the tree, where rule 4 bounds them.
            preemptible = flags != 1 or (cfg.unit and cfg.leaf_of(namespace) is None)
            if cfg.unit:
                cpu, g = UNIT, 0
            else:
                cpu = [1, 1, 1, 2, 2, 3, 4, 4, 5, 6, 8, 0][size] * UNIT  # 1-8 cpus, mostly small
                g = [0, 0, 1, 1, 2][gpu] * UNIT if any(GPU in a for _, a in cfg.nodes) else 0
                cpu = cpu or (0 if g else UNIT)
            n = [0, 0, 0, 0, 0, 0, 2, 3][gang]
            self._run(("submit", f"{namespace}/p{len(self.ops)}", cpu, g, pc, never, preemptible, self._tick(), n))

    @rule()
    def schedule(self):
        self._run(("schedule", self._tick()))

    @rule(what=st.sampled_from(sorted(a for a in _ACTS if hasattr(Engine, _ACTS[a][1]) or a == "complete")),
          i=st.integers(0, 20))
    def act_on_a_pod(self, what, i):
        """Complete an eviction; a pod finishes, fails or is deleted (pending, running or terminating)."""
        phase, call = _ACTS[what]
        pods = [p for p in self.eng.pods.values() if p.phase is phase]
        if pods:
            self._run((call, _pick(pods, i).uid, self._tick()))

    @rule()
    def settle(self):
        self._run(("settle", self._tick()))
        check_settled(self.cfg, self.eng)

    def _tick(self) -> float:
        self.now += 1.0
        return self.now

    def _run(self, op) -> None:
        self.ops.append(op)
        self.in_op = True  # an op that raised leaves the trace incomplete: no replay then
        self._apply(self.eng, op, self.trace, check=True)
        self.in_op = False

    def _apply(self, eng: Engine, op, trace: list, check: bool) -> None:
        kind, cfg = op[0], self.cfg
        checker = (lambda before, d: check_schedule(cfg, eng, before, d)) if check else None
        if kind == "submit":
            _, ref, cpu, g, pc, never, preemptible, now, n = op
            ps = submit_pods(eng, pod(ref, cpu, g, pc, never, preemptible, n), now)
            trace.append(("submit", [(p.uid, p.phase) for p in ps]))
        elif kind == "schedule":
            before = snapshot(eng)
            d = eng.schedule(op[1])
            trace.append(_decisions(d))
            if checker:
                checker(before, d)
        elif kind == "complete":
            started = eng.complete_eviction(op[1], op[2])
            trace.append(("complete", op[1], [p.uid for p in started]))
            assert all(p.phase is Phase.RUNNING and not p.waiting_for for p in started)
        elif kind in ("finish", "fail"):
            getattr(eng, kind)(op[1], op[2])
            trace.append(op)
        elif kind == "delete":
            eng.delete(op[1])
            trace.append(op)
        elif kind == "settle":
            trace.append(("settle", [_decisions(d) for d in settle_checked(eng, op[1], checker)]))

    # -- invariants ---------------------------------------------------------
    @invariant()
    def quota_holds(self):
        if self.eng is not None:
            check_quota(self.cfg, self.eng)

    @invariant()
    def cluster_holds(self):
        if self.eng is not None:
            check_cluster(self.eng)

    @invariant()
    def nominations_hold(self):
        if self.eng is not None:
            check_nominations(self.eng)

    @invariant()
    def gangs_hold(self):
        if self.eng is not None:
            check_gangs(self.eng)

    def teardown(self):
        # Invariant 7: the same operations on a fresh engine give the same decisions.
        if self.eng is None or self.in_op:
            return
        again: list = []
        eng = build_engine(self.cfg)
        for op in self.ops:
            self._apply(eng, op, again, check=False)
        assert again == self.trace, "the same operations gave different decisions"


settings.register_profile(
    "engine-ci", max_examples=600, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile("engine-deep", settings.get_profile("engine-ci"), max_examples=5000)
_profile = settings.get_profile(os.environ.get("ENGINE_PROPERTIES_PROFILE", "engine-ci"))
TestEngineMachine = EngineMachine.TestCase
TestEngineMachine.settings = settings(
    _profile, max_examples=int(os.environ.get("ENGINE_PROPERTIES_EXAMPLES", _profile.max_examples)))


# ---------------------------------------------------------------------------
# The checks can fail: engines broken on purpose (patched in the test only) are caught
# ---------------------------------------------------------------------------
TWO_TEAMS = Config(
    {"root": QSpec("root", {CPU: 4 * UNIT}, {CPU: 4 * UNIT}, None, ["a", "b"]),
     "a": QSpec("a", {CPU: 2 * UNIT}, {CPU: 4 * UNIT}, "root", [], ["team-a"]),
     "b": QSpec("b", {CPU: 2 * UNIT}, {CPU: 4 * UNIT}, "root", [], ["team-b"])},
    [("n1", {CPU: 4 * UNIT})], ["team-a", "team-b", "out-0"])


def _fill_a(cfg: Config) -> Engine:
    """Team a borrows the whole cluster with four 1-cpu pods."""
    eng = build_engine(cfg)
    for i in range(4):
        submit(eng, pod(f"team-a/a{i}", UNIT), i)
    assert len(eng.schedule(4).admitted) == 4
    return eng


def test_checks_pass_on_a_plain_reclaim():
    eng = _fill_a(TWO_TEAMS)
    submit(eng, pod("team-b/b0", 2 * UNIT), 5)
    decisions = settle_checked(eng, 5, lambda before, d: check_schedule(TWO_TEAMS, eng, before, d))
    assert sum(len(d.evictions) for d in decisions) == 2
    check_quota(TWO_TEAMS, eng), check_cluster(eng), check_nominations(eng), check_settled(TWO_TEAMS, eng)


def test_a_victim_too_many_is_caught(monkeypatch):
    import hub_ext.scheduler.engine as engine_module

    real = engine_module.find_victims

    def one_more(quota, cluster, p):
        plan = real(quota, cluster, p)
        if isinstance(plan, engine_module.Plan):
            extra = next(q for q in sorted(quota.nodes["a"].candidates, key=lambda q: q.uid) if q not in plan.victims)
            plan.victims.append(extra)
            plan.kinds[extra.uid] = "reclaim"
        return plan

    monkeypatch.setattr(engine_module, "find_victims", one_more)
    eng = _fill_a(TWO_TEAMS)
    submit(eng, pod("team-b/b0", UNIT), 5)
    before = snapshot(eng)
    d = eng.schedule(5)
    with pytest.raises(AssertionError, match="need not be evicted"):
        check_schedule(TWO_TEAMS, eng, before, d)


def test_evicting_below_the_victims_min_is_caught(monkeypatch):
    from hub_ext.scheduler.preemption.policy import PreemptionContext

    from hub_ext.scheduler.preemption.ordering import CandidatePicker

    monkeypatch.setattr(PreemptionContext, "keeps_min", lambda self, unit, lca, taken=False: True)
    monkeypatch.setattr(PreemptionContext, "valid", lambda self, units: ["priority"] * len(units))
    # the picker also skips subtrees at their guarantee: break that too, or nothing is wrong
    monkeypatch.setattr(CandidatePicker, "share", lambda self, node: 1.0)
    eng = build_engine(TWO_TEAMS)
    for ref in ("team-b/b0", "team-b/b1", "team-a/a0", "team-a/a1"):  # both teams at their min
        submit(eng, pod(ref, UNIT), 1)
    eng.schedule(1)
    submit(eng, pod("team-b/crit", UNIT, pc=CRIT), 2)  # may evict a pod of its own leaf, not of team a
    before = snapshot(eng)
    d = eng.schedule(2)
    assert [e.victim.name for e in d.evictions] == ["a1"]  # the newest low-priority pod, team a's min or not
    with pytest.raises(AssertionError, match="which the rules do not allow"):
        check_schedule(TWO_TEAMS, eng, before, d)


def test_a_missed_preemption_is_caught(monkeypatch):
    import hub_ext.scheduler.engine as engine_module

    monkeypatch.setattr(engine_module, "find_victims", lambda quota, cluster, p: None)  # never finds a plan
    eng = _fill_a(TWO_TEAMS)
    submit(eng, pod("team-b/b0", UNIT), 5)
    settle_checked(eng, 5)
    with pytest.raises(AssertionError, match="would fit by evicting"):
        check_settled(TWO_TEAMS, eng)


# Root at its max 6; a (min 1) runs a/l (low, 2 cpu) and a/h (high, 4); c (no min) asks for 4 at critical.
BARRED = Config(
    {"root": QSpec("root", {CPU: 6 * UNIT}, {CPU: 6 * UNIT}, None, ["a", "c"]),
     "a": QSpec("a", {CPU: UNIT}, {CPU: 6 * UNIT}, "root", [], ["a"]),
     "c": QSpec("c", {}, {CPU: 6 * UNIT}, "root", [], ["c"])},
    [("n1", {CPU: 8 * UNIT})], ["a", "c"])


def _barred() -> tuple:
    eng = build_engine(BARRED)
    submit(eng, pod("a/l", 2 * UNIT, pc=LOW), 1)
    submit(eng, pod("a/h", 4 * UNIT, pc=HIGH), 2)
    assert len(eng.schedule(2).admitted) == 2
    return eng, submit(eng, pod("c/p", 4 * UNIT, pc=CRIT), 3)


def test_a_victim_barred_by_an_earlier_one_is_caught(monkeypatch):
    """Invariant 7 tries every set: the greedy order takes a/l, then may not take a/h (a would go to 0 of its
    min 1), though a/h alone frees the 4 and keeps a at 2. A search that stops there (no phase D) is caught."""
    import hub_ext.scheduler.preemption.retry as retry

    monkeypatch.setattr(retry, "MAX_RETRIES", 0)
    eng, p = _barred()
    settle_checked(eng, 3)
    assert p.phase is Phase.PENDING
    missed = r"pending p .* would fit by evicting \[\('h', 'high-priority-research'\)\]"
    with pytest.raises(AssertionError, match=missed):
        check_settled(BARRED, eng)


def test_regression_a_victim_taken_first_does_not_bar_the_one_that_suffices():
    eng, p = _barred()
    d = eng.schedule(3)
    assert [e.victim.name for e in d.evictions] == ["h"] and p.nominated
    settle_checked(eng, 4, lambda before, d: check_schedule(BARRED, eng, before, d))
    check_settled(BARRED, eng)
    assert p.phase is Phase.RUNNING


def test_broken_bookkeeping_is_caught():
    eng = _fill_a(TWO_TEAMS)
    eng.quota.nodes["a"].used[CPU] -= UNIT  # as if a pod had been forgotten
    with pytest.raises(AssertionError, match="engine used"):
        check_quota(TWO_TEAMS, eng)


def test_a_quota_over_max_is_caught():
    eng = _fill_a(TWO_TEAMS)
    eng.pods[1].requests = {CPU: 2 * UNIT}  # as if a pod were bigger than the engine counted
    with pytest.raises(AssertionError):
        check_quota(TWO_TEAMS, eng)


# ---------------------------------------------------------------------------
# Regressions: engine bugs the properties found (in 90f1b0a), as minimal cases
# ---------------------------------------------------------------------------
LEAF_ONLY = Config({"root": QSpec("root", {CPU: 0}, {CPU: 4 * UNIT}, None, [], ["team"])},
                   [("n0", {CPU: 2 * UNIT}), ("n1", {CPU: 4 * UNIT})], ["team"])


def test_regression_nonpreemptible_pod_stopped_by_max_does_not_preempt_past_min():
    """Rule 4: "A workload marked non-preemptible is admitted only within min".

    The tree guarantees nothing (min 0); a 4-cpu pod fills max 4. A 1-cpu
    non-preemptible critical pod met the quota max first, so the engine never
    asked the min question: it preempted the 4-cpu pod and was nominated with
    nothing guaranteed. It must wait (quota-min) and evict nobody.
    """
    eng = build_engine(LEAF_ONLY)
    submit(eng, pod("team/big", 4 * UNIT, pc=HIGH), 1)
    eng.schedule(1)
    np_pod = submit(eng, pod("team/np", UNIT, pc=CRIT, preemptible=False), 2)
    d = eng.schedule(2)
    assert d.evictions == [] and np_pod.reason.code == "quota-min"


def test_regression_quota_given_back_by_victims_is_not_reused_during_their_grace_period():
    """Invariant 1: no quota node above max, counting running and terminating pods.

    root (max 4 cpu) runs one 4-cpu pod. A critical 1-cpu pod preempts it and is
    nominated on n0; in the same pass a 1-cpu pod of the same leaf was admitted
    at once into the quota the victim gave back, while the victim still ran its
    grace period: root physically ran 5 cpu against max 4.
    """
    eng = build_engine(LEAF_ONLY)
    big = submit(eng, pod("team/big", 4 * UNIT, pc=HIGH), 1)
    eng.schedule(1)
    other = submit(eng, pod("team/other", UNIT, pc=HIGH), 2)
    crit = submit(eng, pod("team/crit", UNIT, pc=CRIT), 3)
    eng.schedule(3)
    assert big.phase is Phase.TERMINATING and crit.nominated
    check_quota(LEAF_ONLY, eng)
    eng.complete_eviction(big.uid, 4)
    eng.schedule(4)
    assert crit.phase is Phase.RUNNING and other.phase is Phase.RUNNING


@pytest.mark.parametrize("gone", ["delete", "finish"])
def test_regression_victim_gone_during_grace_does_not_strand_its_preemptor(gone):
    """Invariant 4: once its victims are gone, the preemptor runs.

    A victim deleted by its owner (``Engine.delete``: "deleted by its owner, or
    gone") or finishing during its grace period was released, but its preemptor
    kept waiting for it: nominated forever, holding its quota and node room.
    """
    eng = engine(None, {"n1": {"cpu": "2"}})
    low = submit(eng, pod("x/low", 2 * UNIT, pc=LOW), 1)
    eng.schedule(1)
    crit = submit(eng, pod("y/crit", 2 * UNIT, pc=CRIT), 2)
    eng.schedule(2)
    assert low.phase is Phase.TERMINATING and crit.nominated
    getattr(eng, gone)(low.uid, *([] if gone == "delete" else [3]))
    eng.schedule(4)
    assert crit.phase is Phase.RUNNING


def test_regression_quota_short_pod_keeps_the_victims_it_needs_for_node_room():
    """Rules 2 and 3: evict the smallest set that makes room; nothing only if no set does.

    Leaf l (max 2 cpu) runs w (high, 1 cpu); namespace o outside the tree runs o
    (low, 1 cpu); one 2-cpu node. A critical 2-cpu pod of l needs both gone:
    w for l's max, o for room on the node; both have lower priority and o's usage
    is all borrowed. The search's quota phase passed over o (it frees no quota of
    L) and dropped it for good, so the node phase found no room: nothing was
    evicted and the pod waited forever.
    """
    cfg = Config({"root": QSpec("root", {}, {}, None, ["l"]),
                  "l": QSpec("l", {CPU: 0}, {CPU: 2 * UNIT}, "root", [], ["a"])},
                 [("n1", {CPU: 2 * UNIT})], ["a", "o"])
    eng = build_engine(cfg)
    submit(eng, pod("o/o", UNIT, pc=LOW), 1)
    eng.schedule(1)
    submit(eng, pod("a/w", UNIT, pc=HIGH), 2)
    eng.schedule(2)
    p = submit(eng, pod("a/p", 2 * UNIT, pc=CRIT), 3)
    d = eng.schedule(3)
    assert sorted(e.victim.name for e in d.evictions) == ["o", "w"] and p.nominated


def test_regression_parked_pod_is_retried_when_a_leaf_starts_borrowing():
    """Rule 2: a pod may evict lower-priority pods of any leaf that is borrowing.

    Leaf X (min 2 cpu) runs x1, x2 (low, 1 cpu each) on n1, at its min, so a
    critical pod p (outside the tree; 2 cpu + 1 gpu, so only n1 can hold it) may
    not evict them and is parked. Then a critical pod h of X starts on n2: X
    borrows 2 cpu, and evicting x1 and x2 keeps X at its min. h has p's
    priority, so parking did not count it as a new victim and p was never looked
    at again (until something unrelated woke the queue).
    """
    cfg = Config({"root": QSpec("root", {CPU: 2 * UNIT}, {}, None, ["x"]),
                  "x": QSpec("x", {CPU: 2 * UNIT}, {}, "root", [], ["x"])},
                 [("n1", {CPU: 2 * UNIT, GPU: UNIT}), ("n2", {CPU: 2 * UNIT})], ["x", "o"])
    eng = build_engine(cfg)
    submit(eng, pod("x/x1", UNIT, pc=LOW), 1)
    submit(eng, pod("x/x2", UNIT, pc=LOW), 1)
    eng.schedule(1)
    p = submit(eng, pod("o/p", 2 * UNIT, UNIT, pc=CRIT), 2)
    eng.schedule(2)
    h = submit(eng, pod("x/h", 2 * UNIT, pc=CRIT), 3)
    eng.schedule(3)
    assert h.phase is Phase.RUNNING
    eng.schedule(4)
    assert p.nominated


def test_own_evictions_do_not_open_reclaim():
    """Rule 1 (revised 2026-12-01): "Lower-priority workloads of its own leaf that it evicts in the same
    decision count: they may be what brings its side within min". Found by the properties in b777080.

    Leaf t (min 3, max 4 cpu) runs t1, t2, t3 (low, 1 cpu); namespace o, outside
    the tree, runs oh (high, 1 cpu) next to t1 on n1; n2 and n3 each hold a t pod
    and a non-preemptible pod of o. A high-priority 2-cpu pod p of t needs a
    whole node: only n1 can be emptied, which takes oh, of p's priority, so only
    by reclaim. Evicting t1 and t2 (lower priority, p's own leaf) and oh leaves t
    at 1 + 2 = 3 cpu, within its min of 3, and root under its max: a plan the
    rules allow. The engine judged rule 1 on t's usage before any eviction
    (3 + 2 > 3), never found it, and p waited for good.
    """
    cfg = Config({"root": QSpec("root", {CPU: 3 * UNIT}, {CPU: 4 * UNIT}, None, [], ["t"])},
                 [("n1", {CPU: 2 * UNIT}), ("n2", {CPU: 2 * UNIT}), ("n3", {CPU: 2 * UNIT})], ["t", "o"])
    eng = build_engine(cfg)
    for i, (ref, pc, preemptible) in enumerate([("t/t1", LOW, True), ("o/oh", HIGH, True), ("t/t2", LOW, True),
                                                ("o/f1", LOW, False), ("t/t3", LOW, True), ("o/f2", LOW, False)]):
        submit(eng, pod(ref, UNIT, pc=pc, preemptible=preemptible), i)
        eng.schedule(i)  # best fit fills n1, then n2, then n3
    assert [eng.pods[uid].node for uid in sorted(eng.pods)] == ["n1", "n1", "n2", "n2", "n3", "n3"]
    p = submit(eng, pod("t/p", 2 * UNIT, pc=HIGH), 10)
    evictions = [e.victim.name for d in settle_checked(eng, 10) for e in d.evictions]
    assert p.phase is Phase.RUNNING and "oh" in evictions and len(evictions) == 3


# ---------------------------------------------------------------------------
# Issue 9's properties can fail too: engines broken on purpose are caught
# ---------------------------------------------------------------------------
HALVES = Config(
    {"root": QSpec("root", {CPU: 20 * UNIT}, {CPU: 20 * UNIT}, None, ["a", "b"]),
     "a": QSpec("a", {CPU: 10 * UNIT}, {CPU: 20 * UNIT}, "root", [], ["a"]),
     "b": QSpec("b", {CPU: 10 * UNIT}, {CPU: 20 * UNIT}, "root", [], ["b"])},
    [("n1", {CPU: 40 * UNIT})], ["a", "b"])


def _large_borrower(monkeypatch) -> Engine:
    """Issue 9's first example, on an engine that never preempts."""
    import hub_ext.scheduler.engine as engine_module

    monkeypatch.setattr(engine_module, "find_victims", lambda quota, cluster, p: None)
    eng = build_engine(HALVES)
    for i, (ref, cpu) in enumerate((("b/big", 15), ("a/first", 5), ("a/second", 5))):
        submit(eng, pod(ref, cpu * UNIT), i)
        settle_checked(eng, i)
    return eng


def test_a_broken_guarantee_is_caught(monkeypatch):
    eng = _large_borrower(monkeypatch)
    pods = list(eng.pods.values())
    used_q, free = quota_usage(HALVES, pods, booked), room(eng, lambda p: True)
    second = next(p for p in pods if p.name == "second")
    with pytest.raises(AssertionError, match="guarantee: pending second .* short of 5000 cpu at the root, while "
                                             "other subtrees give back 5000"):
        check_guarantee(HALVES, eng, [second], used_q, free)


def test_a_pod_waiting_behind_its_own_leaf_lower_priority_pods_is_caught(monkeypatch):
    import hub_ext.scheduler.engine as engine_module

    monkeypatch.setattr(engine_module, "find_victims", lambda quota, cluster, p: None)
    eng = build_engine(HALVES)
    submit(eng, pod("a/low1", 15 * UNIT, pc=LOW), 0)
    submit(eng, pod("a/low2", 5 * UNIT, pc=LOW), 0)
    settle_checked(eng, 0)
    submit(eng, pod("a/crit", 4 * UNIT, pc=CRIT), 1)
    settle_checked(eng, 1)
    with pytest.raises(AssertionError, match=r"pending crit .* lower-priority pods of its own leaf \['low1', 'low2'\]"):
        check_settled(HALVES, eng)


def test_a_gang_partly_running_is_caught():
    eng = build_engine(HALVES)
    gang = submit_pods(eng, pod("a/g", UNIT, gang=3), 0)
    check_gangs(eng)
    gang[0].phase = Phase.RUNNING  # as if one pod had been started alone
    with pytest.raises(AssertionError, match="gang a/g partly running"):
        check_gangs(eng)


def test_an_eviction_that_admits_nothing_is_caught(monkeypatch):
    import hub_ext.scheduler.engine as engine_module

    real = engine_module.Engine._start_ready
    monkeypatch.setattr(engine_module.Engine, "_start_ready", lambda self, now: [])  # nominees never start
    eng = build_engine(HALVES)
    submit(eng, pod("b/big", 15 * UNIT), 0)
    submit(eng, pod("a/first", 5 * UNIT), 0)
    settle_checked(eng, 0)
    submit(eng, pod("a/second", 5 * UNIT), 1)
    with pytest.raises(AssertionError, match=r"second evicted \['big'\] and never ran"):
        settle_checked(eng, 1)
    monkeypatch.setattr(engine_module.Engine, "_start_ready", real)


def test_issue_9_first_example_checked():
    """The large borrower: checked by every invariant, decision by decision."""
    eng = build_engine(HALVES)
    check = lambda before, d: check_schedule(HALVES, eng, before, d)  # noqa: E731
    for i, (ref, cpu) in enumerate((("b/big", 15), ("a/first", 5), ("a/second", 5))):
        submit(eng, pod(ref, cpu * UNIT), i)
        settle_checked(eng, i, check)
    assert sorted(p.name for p in eng.pods.values() if p.phase is Phase.RUNNING) == ["first", "second"]
    submit(eng, pod("b/again", 15 * UNIT), 5)  # no ping-pong: it may not reclaim back
    assert not any(d.evictions for d in settle_checked(eng, 5, check))
    check_quota(HALVES, eng), check_cluster(eng), check_settled(HALVES, eng)
