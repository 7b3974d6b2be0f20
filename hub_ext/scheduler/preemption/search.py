"""Find the victims that make room for one pod or one gang, or decide that none can.

Two phases, then pruning; phases C and D (``retry``) search again when they fail:

A. Quota: victims are taken in the picker's order (see ``ordering``), only
   ones the rules allow (see ``policy``) and that free a resource some quota
   node on the preemptor's path is short of, until every node on the path has
   room for it (a gang: for all its pods).
B. Node: while no cluster node has room for the pod (for a gang: until each
   of its pods has a node, all at once), look at the nodes of the candidates
   phase A passed over, then of further candidates, in the same order, and on
   the first node where evicting allowed pods of that node (reclaim victims
   first, then lowest priority, most recent first) makes room for one more of
   its pods, take them. A node that failed is tried again once victims taken
   since on the preemptor's side open rule 1 somewhere new: pods there it
   refused may be reclaimed now (nothing else taken elsewhere can turn a
   failed node into one with room: a gang there was weighed whole when it
   failed). At most ``MAX_NODES`` tries fail before it gives up. When no node
   has room, lower-priority pods of its own leaf are taken until rule 1
   reaches one more ancestor, and phase B runs again, up to the top (rule 1
   open only below an ancestor where its leaf has no sibling gives nothing).
C. Node first: when phase B fails after phase A took victims, the search
   starts again from nothing with phase B, then phase A for what the quota is
   still short of. Phase A's victims free quota wherever they run; each one
   taken from a side uses up what that side may still give (rule 2 keeps it at
   its ``min``, rule 1 takes from it only while it is above), so the victims
   on the only nodes that can hold the preemptor may no longer be allowed,
   though they alone would free the quota too. The first order is rule 3's;
   this one runs only where it found nothing ("if no set makes room, evict
   nothing": otherwise evict).
D. Held back: when a search fails after one of its phases was refused a
   victim that would help (free what the quota is short of, or room on a node
   that could hold the preemptor) only because victims it took earlier use up
   what that victim's side may give (rule 2's ``min``, or rule 1's source
   above it), the search starts again with those earlier victims held back
   (never taken), so the refused one is allowed; a failing retry may hold back
   more, up to ``retry.MAX_RETRIES`` searches. Greedy in rule 3's order, a cheap
   victim taken first can bar the one that alone would do (a team at 6 of its
   min 1 gives its 2-cpu pod, then may not give its 4-cpu one, which alone
   frees the 4 needed); the first order decides wherever it finds a plan.

A running gang is one victim of its whole size: taking one of its pods takes
all of them (their room on other nodes counts too).

Then each victim, last taken first, is given back if the preemptor still fits
without it and every victim left is still allowed once it is spared (a victim
on the preemptor's side may be what lets rule 1 reclaim the others), so no
victim in the plan can be spared. If no set makes room, nobody is evicted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..placement import place, slots
from ..units import running_unit
from .ordering import CandidatePicker, victim_key
from .policy import PRIORITY, RECLAIM, PreemptionContext

# Bounds on one decision, so a hopeless search stays cheap.
MAX_CANDIDATES = 5000
MAX_NODES = 64
MAX_BLOCKED = 4  # refusals one search keeps for phase D (see ``retry``)


@dataclass
class Plan:
    victims: list  # pods, a gang's all together, in the order taken
    placement: list  # cluster.Node for each pod of the preemptor, in order
    kinds: dict  # victim uid -> the rule that allows it (policy.RECLAIM or policy.PRIORITY)

    @property
    def node(self):
        return self.placement[0]


@dataclass
class Failure:
    """Why no plan was found: ``stage`` "quota" (its quota nodes' deficits could not be covered), "node"
    (quota could be, room on the nodes not) or "waiting" (room is on its way: pods terminating will
    leave enough, unless others take it first). For "quota", ``short``: the lowest quota node still
    short, the resource, and the usage there at or below which the victims it found would do."""

    stage: str
    short: tuple | None = None  # (QNode, resource, usage level)
    reclaim_open: bool = False

    @property
    def deficit_node(self):
        return None if self.short is None else self.short[0]


class Search:
    def __init__(self, quota, cluster, preemptor, node_first: bool = False, held: tuple = ()):
        self.quota, self.cluster, self.unit = quota, cluster, preemptor
        self.node_first = node_first  # phase C: phase B before phase A
        self.held = held  # phase D: units never taken
        self.held_uids = {pod.uid for unit in held for pod in unit.pods}
        self.ctx = PreemptionContext(preemptor, cluster.capacity)
        self.request = {r: a for r, a in preemptor.request.items() if a > 0}  # one pod's
        self.count, self.selector = preemptor.count, preemptor.selector
        self.deficits = {}
        for node in self.ctx.path:
            for res, amount in self.ctx.request.items():
                cap = node.max.get(res)
                if cap is not None and node.used.get(res, 0) + amount > cap:
                    self.deficits[(node, res)] = node.used.get(res, 0) + amount - cap
        self.freed: dict[str, dict] = {}
        if self.count == 1:
            self.fit = cluster.find_fit(self.request, self.selector)
            fits_now = self.fit is not None
        else:
            self.fit = None
            fits_now = isinstance(place(cluster, self.request, self.count, self.selector), list)
        contested = {res for (_, res), short in self.deficits.items() if short > 0}
        if not fits_now:
            contested |= {r for r, a in self.request.items() if cluster.largest_free(r) < a} or set(self.request)
        self.ctx.contested = contested
        self.picker = CandidatePicker(self.ctx)
        self.picker.exclude([pod for unit in held for pod in unit.pods])
        self.priorities = sorted(quota.top.prio_count)
        self.chosen: list = []  # units, in the order taken
        self.passed_over: list = []  # allowed units phase A did not need
        self.offered: list = []  # units phase B looked at (node first: phase A looks at them again)
        self.quota_victims = 0  # how many units phase A took before phase B
        self.examined = 0
        self.failures = 0  # phase B's tries on a node that did not make room
        self.failure: Failure | None = None
        self.blocked: list = []  # phase D: (refused unit, the victims taken before on its side)

    # -- state of the plan ---------------------------------------------------
    def quota_short(self) -> bool:
        return any(d > 0 for d in self.deficits.values())

    def room(self, name: str) -> dict:
        """What will be free on node ``name`` beyond ``free``: its terminating pods and our victims there."""
        leaving = self.cluster.nodes[name].leaving
        freed = self.freed.get(name)
        if not freed:
            return leaving
        if not leaving:
            return freed
        return {r: leaving.get(r, 0) + freed.get(r, 0) for r in leaving.keys() | freed.keys()}

    def extra_nodes(self):
        return self.freed.keys() | self.cluster.leaving_nodes

    def placement(self):
        """A node for each pod of the preemptor once the victims so far are gone, else None."""
        if self.count == 1:
            if self.fit is not None:
                return [self.fit]
            nodes = self.cluster.nodes
            for name in sorted(self.extra_nodes()):
                if nodes[name].fits(self.request, self.selector, self.room(name)):
                    return [nodes[name]]
            return None
        extra = {name: self.room(name) for name in sorted(self.extra_nodes())}
        placed = place(self.cluster, self.request, self.count, self.selector, extra)
        return placed if isinstance(placed, list) else None

    def satisfied(self) -> bool:
        return not self.quota_short() and self.placement() is not None

    def take(self, unit, sign: int = 1) -> None:
        self.ctx.remove(unit, sign)
        total = unit.total
        for node in unit.leaf.path:
            for res, amount in total.items():
                if (node, res) in self.deficits:
                    self.deficits[(node, res)] -= sign * amount
        for pod in unit.pods:
            extra = self.freed.setdefault(pod.node, {})
            for res, amount in pod.requests.items():
                extra[res] = extra.get(res, 0) + sign * amount
        if sign > 0:
            self.chosen.append(unit)

    def helps_quota(self, unit) -> bool:
        return any(
            short > 0 and unit.total.get(res, 0) and node in unit.leaf.path_set
            for (node, res), short in self.deficits.items()
        )

    def could_host(self, node) -> bool:
        return all(node.allocatable.get(r, 0) >= a for r, a in self.request.items()) and all(
            node.labels.get(k) == v for k, v in (self.selector or {}).items()
        )

    def _on_host(self, unit) -> bool:
        nodes = self.cluster.nodes
        return any(pod.node in nodes and self.could_host(nodes[pod.node]) for pod in unit.pods)

    def _note_refusal(self, unit, on_host: bool = False) -> None:
        """Keep for phase D a refused ``unit`` that would help, when victims taken on its side are why."""
        if not self.chosen or len(self.blocked) >= MAX_BLOCKED or unit.leaf is self.ctx.leaf:
            return  # nothing taken yet, or its own leaf (priority alone decides there)
        if any(noted.lead.uid == unit.lead.uid for noted, _ in self.blocked):
            return  # phase B asks again once rule 1 opens: one retry per victim is enough
        ctx = self.ctx
        side = list(ctx.side_nodes(unit, ctx.lca(unit.leaf)))
        removed = ctx.removed
        if not any(any(removed.get(node, {}).values()) for node in side):
            return  # nothing taken on its side: the rules refuse it whatever this search took
        if not (on_host or self.helps_quota(unit) or self._on_host(unit)):
            return
        below = set(side)
        before = [u for u in self.chosen if below & u.leaf.path_set]
        if before:
            self.blocked.append((unit, before))

    # -- candidates ----------------------------------------------------------
    def _next(self):
        """The next allowed victim in the picker's order, with the rule that allows it, or None."""
        ctx, picker = self.ctx, self.picker
        for mode in (RECLAIM, PRIORITY):
            if mode == RECLAIM and not ctx.reclaim_open():
                continue
            for priority in self.priorities:
                if mode == PRIORITY and priority >= ctx.priority:
                    break
                while self.examined < MAX_CANDIDATES:
                    pod = picker.next(priority, mode)
                    if pod is None:
                        break
                    self.examined += 1
                    unit = running_unit(pod)
                    kind = ctx.kind(unit)
                    if kind is None:
                        self._note_refusal(unit)
                        # Rule 1 refusing one (its side is not above min) refuses it for good;
                        # rule 2 refusing one leaves rule 1 free to allow it once it opens.
                        picker.refuse(unit.pods, mode)
                        if mode == RECLAIM:
                            picker.refuse(unit.pods, PRIORITY)
                        continue
                    picker.exclude(unit.pods)
                    return unit
        return None

    def candidates(self):
        """Allowed victims in the picker's order, each offered once (asked anew each time: rule 1 may open)."""
        while True:
            unit = self._next()
            if unit is None:
                return
            yield unit

    # -- phases ------------------------------------------------------------
    def run(self):
        if not self.quota_short() and self.placement() is not None:
            # Room is on its way (pods terminating: quota ``max`` counts them until they are gone,
            # or their node room): wait for it rather than evict more.
            self.failure = Failure("waiting", None, self.ctx.reclaim_open())
            return None
        stream = self.candidates()
        if self.quota_short() and not self.node_first:
            if not self._cover_quota(stream):
                self._fail("quota")
                return None
            self.quota_victims = len(self.chosen)
        if self.placement() is None and not self._node_phase(stream):
            self._fail("node")
            return None
        if self.quota_short() and not self._cover_quota(self._not_taken(stream)):
            self._fail("quota")  # node first: its victims there, and all allowed after them, do not do
            return None
        self._prune()
        kinds = self.ctx.valid(self.chosen)
        if kinds is None:  # pragma: no cover - the search only takes allowed victims
            raise AssertionError("preemption plan breaks the rules")
        return Plan([pod for unit in self.chosen for pod in unit.pods], self.placement(),
                    {pod.uid: kind for unit, kind in zip(self.chosen, kinds) for pod in unit.pods})

    def _cover_quota(self, units) -> bool:
        """Phase A: take the units that free what a quota node on the path is short of, until none is."""
        for unit in units:
            if not self.helps_quota(unit):
                self.passed_over.append(unit)
                continue
            self.take(unit)
            if not self.quota_short():
                return True
        return False

    def _not_taken(self, stream):
        """The units phase B looked at and did not take, still allowed, then the rest of ``stream``."""
        chosen = {pod.uid for unit in self.chosen for pod in unit.pods}
        for unit in self.offered:
            if unit.lead.uid not in chosen and self.ctx.kind(unit) is not None:
                yield unit
        yield from stream

    def _fail(self, stage: str) -> None:
        short = None
        for node in self.ctx.path:
            res = next((r for (n, r), d in self.deficits.items() if n is node and d > 0), None)
            if res is not None:
                short = (node, res, node.used.get(res, 0) - self.deficits[(node, res)])
                break
        self.failure = Failure(stage, short, self.ctx.reclaim_open())

    def _node_phase(self, stream) -> bool:
        offered = self.offered

        def tap(units):
            for unit in units:
                offered.append(unit)
                yield unit

        if self._make_room(tap(itertools.chain(self.passed_over, stream))):
            return True
        # Rule 1 may still open, or reach further up: lower-priority pods of its own leaf, wherever they
        # run, may bring its side within min below one more ancestor, and the pods it could then
        # reclaim may be the ones that make room. Rule 1 open below an ancestor whose other subtrees
        # have nothing to give (its leaf an only child) does not make room: reach on up.
        while self._open_reclaim():
            if self._make_room(itertools.chain(list(offered), tap(self.candidates()))):
                return True
        return False

    def _open_reclaim(self) -> bool:
        """Take lower-priority pods of the preemptor's own leaf (in victim order) until rule 1 reaches an
        ancestor it did not reach before; False (nothing taken) when they cannot, or it reaches them all."""
        ctx, leaf = self.ctx, self.ctx.leaf
        reach = self._reclaim_reach()
        if all(reach) or leaf.candidates is None:
            return False
        chosen = {pod.uid for unit in self.chosen for pod in unit.pods}
        added, seen = [], set()
        for pod in leaf.candidates:
            if pod.priority >= ctx.priority:
                break
            if pod.uid in chosen or pod.uid in seen or pod.uid in self.held_uids:
                continue
            unit = running_unit(pod)
            seen.update(p.uid for p in unit.pods)
            self.take(unit)
            added.append(unit)
            if self._reclaim_reach() != reach:  # own pods leaving only widen it
                self.picker.exclude([p for u in added for p in u.pods])
                return True
        for unit in reversed(added):
            self.take(unit, -1)
            self.chosen.pop()
        return False

    def _make_room(self, stream) -> bool:
        """Phase B: room on the nodes for each pod, one more pod's room at a time."""
        failed: dict = {}  # node name -> (the unit tried first there, where rule 1 reached then)
        self.failures = 0
        chosen = {pod.uid for unit in self.chosen for pod in unit.pods}
        for unit in stream:
            for pod in unit.pods:
                host = self.cluster.nodes.get(pod.node)
                if host is None or host.name in failed or not self.could_host(host) or pod.uid in chosen:
                    continue
                if self._try_node(host, unit):
                    if self.placement() is not None or self._retry(failed):
                        return True
                    chosen = {p.uid for u in self.chosen for p in u.pods}
                    break  # room for one more pod: look on from the next candidate
                failed[host.name] = (unit, self._reclaim_reach())
                self.failures += 1
                if self.failures >= MAX_NODES:
                    return False
        return False

    def _reclaim_reach(self) -> tuple:
        """Through which ancestors rule 1 lets the preemptor reclaim, given the victims taken so far."""
        return tuple(self.ctx.reclaim_ok(node) for node in self.ctx.path[1:])

    def _retry(self, failed: dict) -> bool:
        """Try again the nodes that failed before the victims just taken opened rule 1 somewhere new
        (pods refused there may be reclaimed now); True once every pod of the preemptor has a node."""
        again = True
        while again and self.failures < MAX_NODES:
            again = False
            reach = self._reclaim_reach()
            for name, (first, before) in list(failed.items()):
                if all(b or not r for b, r in zip(before, reach)):
                    continue  # rule 1 reaches nowhere it did not when this node failed
                if self._try_node(self.cluster.nodes[name], first):
                    del failed[name]
                    if self.placement() is not None:
                        return True
                    again = True  # these victims may change the answer on others
                    break
                failed[name] = (first, reach)
                self.failures += 1
                if self.failures >= MAX_NODES:
                    break
        return False

    def _slots(self, host) -> int:
        return slots(host, self.request, self.selector, self.room(host.name), self.count)

    def _try_node(self, host, first) -> bool:
        """Evict allowed pods of ``host`` (``first`` first, unless taken since) until one more of the
        preemptor's pods fits there.

        The others in order: reclaim victims first, then lowest priority, most recent first; sorted
        again whenever a victim on the preemptor's side may have opened rule 1 for more of them.
        """
        want = self._slots(host) + 1
        ctx = self.ctx
        chosen = {pod.uid for unit in self.chosen for pod in unit.pods}
        first = [] if first.lead.uid in chosen else [first]  # tried again: it may have gone with its gang
        units, seen = [], {u.lead.uid for u in first}
        running = [p for p in host.residents.values()
                   if p.phase.value == "Running" and p.preemptible and not p.occupying and p.uid not in chosen
                   and p.uid not in self.held_uids]
        for p in sorted(running, key=victim_key):
            unit = running_unit(p)
            if unit.lead.uid not in seen:
                seen.add(unit.lead.uid)
                units.append(unit)
        added = []
        order = first + sorted(units, key=lambda u: ctx.kind(u) != RECLAIM)  # a stable sort keeps victim_key
        while order:
            version, rest = ctx.version, []
            for i, unit in enumerate(order):
                if ctx.kind(unit) is None:
                    self._note_refusal(unit, on_host=True)
                    rest.append(unit)
                    continue
                self.take(unit)
                added.append(unit)
                if self._slots(host) >= want:
                    self.picker.exclude([p for u in added for p in u.pods])
                    return True
                if ctx.version != version:
                    rest += order[i + 1:]
                    break
            else:
                break  # a whole round without opening rule 1: nothing more is allowed here
            order = sorted(rest, key=lambda u: (ctx.kind(u) != RECLAIM,) + victim_key(u.lead))
        for unit in reversed(added):
            self.take(unit, -1)
            self.chosen.pop()
        return False

    def _prune(self) -> None:
        """Give victims back, last taken first, while the preemptor still fits and the rest stay allowed;
        again until none can be spared (sparing one may let rule 2 allow a victim kept for rule 1)."""
        spared = True
        while spared:
            spared = False
            for unit in reversed(list(self.chosen)):
                index = self.chosen.index(unit)
                self.chosen.pop(index)
                self.take(unit, -1)
                if self.satisfied() and (not self.ctx.on_own_side(unit) or self.ctx.valid(self.chosen) is not None):
                    spared = True
                    continue
                self.take(unit, 1)
                self.chosen.pop()  # take() appended it; put it back where it was
                self.chosen.insert(index, unit)
