"""Find the victims that make room for one pod, or decide that none can.

Two phases, then pruning:

A. Quota: victims are taken in the picker's order (see ``ordering``), only
   ones the rules allow (see ``policy``) and that free a resource some quota
   node on the pod's path is short of, until every node on the path has room.
B. Node: if no cluster node fits the pod yet, look at the nodes of the
   candidates phase A passed over, then of further candidates, in the same
   order, and on the first node where evicting allowed pods of that node
   (lowest priority, most recent first) makes room, take them. At most
   ``MAX_NODES`` nodes are examined.

Then each victim, last taken first, is given back if the pod still fits
without it, so no victim in the plan can be spared. If no set makes room,
nobody is evicted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .ordering import CandidatePicker, victim_key
from .policy import PreemptionContext

# Bounds on one decision, so a hopeless search stays cheap.
MAX_CANDIDATES = 5000
MAX_NODES = 64


@dataclass
class Plan:
    victims: list
    node: object  # cluster.Node the pod will run on


class _Search:
    def __init__(self, quota, cluster, pod):
        self.quota, self.cluster, self.pod = quota, cluster, pod
        self.ctx = PreemptionContext(pod, cluster.capacity)
        self.request, self.selector = self.ctx.request, pod.spec.node_selector
        self.deficits = {}
        for node in self.ctx.path:
            for res, amount in self.request.items():
                cap = node.max.get(res)
                if cap is not None and node.used.get(res, 0) + amount > cap:
                    self.deficits[(node, res)] = node.used.get(res, 0) + amount - cap
        self.fit = cluster.find_fit(self.request, self.selector)
        contested = {res for (_, res), short in self.deficits.items() if short > 0}
        if self.fit is None:
            contested |= {r for r, a in self.request.items() if cluster.largest_free(r) < a} or set(self.request)
        self.ctx.contested = contested
        self.freed: dict[str, dict] = {}
        self.picker = CandidatePicker(self.ctx)
        self.chosen: list = []
        self.passed_over: list = []  # allowed candidates phase A did not need

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

    def node_fit(self):
        if self.fit is not None:
            return self.fit
        nodes = self.cluster.nodes
        for name in self.freed.keys() | self.cluster.leaving_nodes:
            if nodes[name].fits(self.request, self.selector, self.room(name)):
                return nodes[name]
        return None

    def satisfied(self) -> bool:
        return not self.quota_short() and self.node_fit() is not None

    def take(self, victim, sign: int = 1) -> None:
        self.ctx.remove(victim, sign)
        for node in victim.leaf.path:
            for res, amount in victim.requests.items():
                if (node, res) in self.deficits:
                    self.deficits[(node, res)] -= sign * amount
        extra = self.freed.setdefault(victim.node, {})
        for res, amount in victim.requests.items():
            extra[res] = extra.get(res, 0) + sign * amount
        if sign > 0:
            self.chosen.append(victim)

    def helps_quota(self, victim) -> bool:
        return any(
            short > 0 and victim.requests.get(res, 0) and node in victim.leaf.path_set
            for (node, res), short in self.deficits.items()
        )

    def could_host(self, node) -> bool:
        return all(node.allocatable.get(r, 0) >= a for r, a in self.request.items()) and all(
            node.labels.get(k) == v for k, v in (self.selector or {}).items()
        )

    # -- phases ------------------------------------------------------------
    def candidates(self):
        """Allowed victims in the picker's order, each offered once."""
        examined = 0
        pod, quota, ctx = self.pod, self.quota, self.ctx
        for priority in sorted(quota.top.prio_count):
            if priority >= pod.priority and not ctx.can_reclaim_somewhere():
                return
            while examined < MAX_CANDIDATES:
                victim = self.picker.next(priority, quota.top)
                if victim is None:
                    break
                examined += 1
                self.picker.exclude(victim)
                if ctx.victim_side_ok(victim):
                    yield victim

    def run(self) -> Plan | None:
        if not self.deficits and self.fit is not None:
            return None  # nothing to preempt for
        if not self.quota_short() and self.node_fit() is not None:
            return None  # room is on its way (pods terminating); wait for it rather than evict more
        stream = self.candidates()
        if self.quota_short():
            for victim in stream:
                if not self.helps_quota(victim):
                    self.passed_over.append(victim)
                    continue
                self.take(victim)
                if not self.quota_short():
                    break
            if self.quota_short():
                return None
        if self.node_fit() is None and not self._make_room_on_a_node(itertools.chain(self.passed_over, stream)):
            return None
        self._prune()
        return Plan(self.chosen, self.node_fit())

    def _make_room_on_a_node(self, stream) -> bool:
        seen = set()
        for victim in stream:
            host = self.cluster.nodes.get(victim.node)
            if host is None or host.name in seen or not self.could_host(host):
                continue
            seen.add(host.name)
            if self._try_node(host, victim):
                return True
            if len(seen) >= MAX_NODES:
                return False
        return False

    def _try_node(self, host, first) -> bool:
        chosen = {v.uid for v in self.chosen}
        local = [first] + sorted(
            (p for p in host.residents.values()
             if p is not first and p.phase.value == "Running" and p.preemptible and p.uid not in chosen
             and self.ctx.eligible(p)),
            key=victim_key,
        )
        added = []
        for victim in local:
            if victim is not first and not self.ctx.eligible(victim):
                continue
            if victim is first and not self.ctx.victim_side_ok(victim):
                continue
            self.take(victim)
            added.append(victim)
            if host.fits(self.request, self.selector, self.room(host.name)):
                return True
        for victim in reversed(added):
            self.take(victim, -1)
            self.chosen.pop()
        return False

    def _prune(self) -> None:
        kept = []
        for victim in reversed(self.chosen):
            self.take(victim, -1)
            if self.satisfied():
                continue
            self.take(victim, 1)
            self.chosen.pop()
            kept.append(victim)
        kept.reverse()
        self.chosen = kept


def find_victims(quota, cluster, pod) -> Plan | None:
    return _Search(quota, cluster, pod).run()
