"""The sentences (and machine-readable details) that say why a pod or a gang waits or was evicted.

Every reason carries a code (``model``'s constants), a message people read and
details: the quota node, resource, need, used and limit. A gang's reasons
speak of the gang: how many pods of what size it needs at once, and how many
of them would fit.
"""

from __future__ import annotations

from ..quota.quantity import describe, format_milli
from .model import CLUSTER_CAPACITY, INADMISSIBLE, QUOTA_MAX, QUOTA_MIN, RECLAIMED, PREEMPTED, WAITING_FOR_EVICTION, Reason
from .placement import place


def _gang_prefix(unit) -> str:
    return f"gang {unit.lead.gang.name} needs {unit.count} pods of {describe(unit.request)} at once"


def quota_reason(code: str, unit, node, res: str) -> Reason:
    """``unit`` would take quota ``node`` over its ``max`` (QUOTA_MAX) or, non-preemptible, over its ``min``."""
    need = unit.total[res]
    if code == QUOTA_MAX:
        leaving = node.leaving.get(res, 0)
        used, limit = node.used.get(res, 0) + leaving, node.max[res]
        if need > limit:
            text = f"needs {format_milli(res, need)} {res}, more than quota {node.name}'s max of " \
                   f"{format_milli(res, limit)}: it can never start; ask for less"
        else:
            text = f"quota {node.name} is at its max for {res}: needs {format_milli(res, need)}, uses " \
                   f"{format_milli(res, used)} of {format_milli(res, limit)}" + \
                   (f" ({format_milli(res, leaving)} held by pods terminating)" if leaving else "")
    else:
        used, limit = node.np_used.get(res, 0), node.min.get(res, 0)
        text = f"non-preemptible pods only run within guarantees: quota {node.name} guarantees " \
               f"{format_milli(res, limit)} {res}, non-preemptible pods use {format_milli(res, used)}, " \
               f"this one needs {format_milli(res, need)}"
    details = {"node": node.name, "resource": res, "need": format_milli(res, need),
               "used": format_milli(res, used), "limit": format_milli(res, limit)}
    if unit.count > 1:
        one = unit.request.get(res, 0)
        fit = max(limit - used, 0) // one if one else unit.count
        text = f"{_gang_prefix(unit)}; {min(fit, unit.count)} would fit: {text}"
        details.update(gang=unit.lead.gang.name, pods=unit.count, fit=min(fit, unit.count))
    return Reason(code, text, details)


def capacity_reason(cluster, unit) -> Reason:
    """Why no node takes the pod: the cluster lacks a resource, or no single node has enough of it.

    For a gang: how many of its pods the nodes would hold at once.
    """
    if unit.count > 1:
        fit = place(cluster, unit.request, unit.count, unit.selector)
        fit = fit if isinstance(fit, int) else unit.count
        sel = unit.selector
        return Reason(CLUSTER_CAPACITY, f"{_gang_prefix(unit)}; {fit} would fit on the cluster's nodes"
                      + (f" matching {sel}" if sel else ""),
                      {"need": describe(unit.request), "gang": unit.lead.gang.name, "pods": unit.count, "fit": fit})
    request = unit.request
    for kind, amount_of in (("cluster", cluster.total_free), ("node", cluster.largest_free)):
        for res, need in sorted(request.items()):
            free = max(amount_of(res), 0)
            if free >= need:
                continue
            text = (f"the cluster has {format_milli(res, free)} {res} free, this pod needs {format_milli(res, need)}"
                    if kind == "cluster" else
                    f"no node has {format_milli(res, need)} {res} free (the most on one node is {format_milli(res, free)})")
            return Reason(CLUSTER_CAPACITY, text,
                          {"resource": res, "need": format_milli(res, need), "free": format_milli(res, free)})
    sel = unit.selector
    text = f"no node has room for {describe(request)}" + (f" and matches {sel}" if sel else "")
    return Reason(CLUSTER_CAPACITY, text, {"need": describe(request)})


def inadmissible_reason(unit, node, res: str, limit: int, what: str) -> Reason:
    """``unit`` can never start: it needs more of ``res`` than ``limit``, the ``max`` of quota ``node``
    (``what`` "quota") or the most any cluster node has (``what`` "node", ``node`` None)."""
    need = unit.total[res] if what == "quota" else unit.request[res]
    if what == "quota":
        text = (f"needs {format_milli(res, need)} {res}, more than quota {node.name}'s max of "
                f"{format_milli(res, limit)}: it cannot start unless that max is raised; ask for less")
        details = {"node": node.name, "resource": res, "need": format_milli(res, need),
                   "limit": format_milli(res, limit)}
    else:
        has = (f"more than any node of the cluster has ({format_milli(res, limit)} at most)" if limit
               else f"and no node of the cluster has any {res}")
        text = (f"needs {format_milli(res, need)} {res} on one node, {has}: it cannot start unless a node "
                "with more joins; ask for less")
        details = {"resource": res, "need": format_milli(res, need), "limit": format_milli(res, limit)}
    if unit.count > 1:
        text = f"{_gang_prefix(unit)}: {text}"
        details.update(gang=unit.lead.gang.name, pods=unit.count)
    return Reason(INADMISSIBLE, text, details)


def waiting_reason(unit, victims, placement) -> Reason:
    names = [f"{v.namespace}/{v.name}" for v in victims]
    text = f"waiting for {len(victims)} evicted pod(s) to terminate: {', '.join(names)}"
    if unit.count > 1:
        text = f"gang {unit.lead.gang.name} ({unit.count} pods) is {text}"
    return Reason(WAITING_FOR_EVICTION, text, {"victims": names, "node": placement[0].name})


def eviction_reason(victim, preemptor, reclaim: bool, now: float, grace: float) -> Reason:
    """Why ``victim`` is evicted: its quota was borrowing and ``preemptor``'s side reclaimed its
    guarantee (rule 1), or ``preemptor`` has a higher priority (rule 2)."""
    why = (
        f"its quota {victim.leaf.name} was borrowing and {preemptor.leaf.name} reclaimed its guarantee"
        if reclaim else f"lower priority ({victim.priority_class or victim.priority}) than "
        f"{preemptor.priority_class or preemptor.priority}"
    )
    who = f"{preemptor.namespace}/{preemptor.name}"
    if preemptor.gang is not None:
        who += f" (gang {preemptor.gang.name})"
    if victim.gang is not None:
        why += f"; the whole gang {victim.gang.name} goes"
    return Reason(
        RECLAIMED if reclaim else PREEMPTED, f"{'Reclaimed' if reclaim else 'Preempted'} by {who}: {why}",
        {"preemptor": f"{preemptor.namespace}/{preemptor.name}", "preemptorUid": preemptor.uid, "at": now,
         "gracePeriodSeconds": grace},
    )


__all__ = ["QUOTA_MAX", "QUOTA_MIN", "quota_reason", "inadmissible_reason", "capacity_reason", "waiting_reason", "eviction_reason"]
