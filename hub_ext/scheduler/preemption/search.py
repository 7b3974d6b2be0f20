"""Find the victims that make room for one pod, or decide that none can.

Greedy in the picker's order, then pruned: victims are taken one at a time
(only ones the rules allow and that help: they free a resource some quota node
on the pod's path is short of, or free room on a node the pod could use) until
every quota node on the path has room and some node fits the pod. Then each
victim, newest pick first, is given back if the pod still fits without it, so
no victim in the plan can be spared. If no set makes room, nobody is evicted.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ordering import CandidatePicker
from .policy import PreemptionContext

# Bound on candidates examined for one decision, so a hopeless search stays cheap.
MAX_CANDIDATES = 5000


@dataclass
class Plan:
    victims: list
    node: object  # cluster.Node the pod will run on


def find_victims(quota, cluster, pod) -> Plan | None:
    ctx = PreemptionContext(pod, cluster.capacity)
    request, selector = ctx.request, pod.spec.node_selector
    deficits = {}
    for node in ctx.path:
        for res, amount in request.items():
            cap = node.max.get(res)
            if cap is not None and node.used.get(res, 0) + amount > cap:
                deficits[(node, res)] = node.used.get(res, 0) + amount - cap
    fit = cluster.find_fit(request, selector)
    if not deficits and fit is not None:
        return None  # nothing to preempt for
    freed: dict[str, dict] = {}
    nodes = cluster.nodes

    def node_fit():
        if fit is not None:
            return fit
        for name, extra in freed.items():
            if nodes[name].fits(request, selector, extra):
                return nodes[name]
        return None

    def satisfied():
        return all(d <= 0 for d in deficits.values()) and node_fit() is not None

    def helps(victim) -> bool:
        for (node, res), short in deficits.items():
            if short > 0 and victim.requests.get(res, 0) and node in victim.leaf.path_set:
                return True
        if node_fit() is None:
            host = nodes.get(victim.node)
            return host is not None and all(host.allocatable.get(r, 0) >= a for r, a in request.items()) and all(
                host.labels.get(k) == v for k, v in (selector or {}).items()
            )
        return False

    def take(victim, sign):
        ctx.remove(victim, sign)
        for node in victim.leaf.path:
            for res, amount in victim.requests.items():
                if (node, res) in deficits:
                    deficits[(node, res)] -= sign * amount
        extra = freed.setdefault(victim.node, {})
        for res, amount in victim.requests.items():
            extra[res] = extra.get(res, 0) + sign * amount

    picker = CandidatePicker(ctx)
    chosen, examined = [], 0
    for priority in sorted(quota.top.prio_count):
        if priority >= pod.priority and not ctx.can_reclaim_somewhere():
            break
        while examined < MAX_CANDIDATES:
            victim = picker.next(priority, quota.top)
            if victim is None:
                break
            examined += 1
            picker.exclude(victim)
            if not ctx.victim_side_ok(victim) or not helps(victim):
                continue
            take(victim, 1)
            chosen.append(victim)
            if satisfied():
                return Plan(_prune(chosen, take, satisfied), node_fit())
    return None


def _prune(chosen, take, satisfied):
    kept = []
    for victim in reversed(chosen):
        take(victim, -1)
        if satisfied():
            continue
        take(victim, 1)
        kept.append(victim)
    kept.reverse()
    return kept
