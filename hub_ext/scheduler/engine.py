"""The scheduler engine: state in, decisions out. Pure and synchronous; time is a parameter.

Drivers (the simulator, the local and Kubernetes backends, the service) tell
the engine what happened (a pod submitted, a victim gone, a pod finished) and
call ``schedule(now)`` for decisions: pods to start, pods to evict. Every
driver runs this same code, so a decision seen in ``tenancy simulate`` is the
decision a cluster gets.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from sortedcontainers import SortedKeyList

from ..quota.limitrange import LimitRange
from ..quota.pods import PodSpec
from ..quota.priorityclass import PriorityClass, PriorityClasses
from ..quota.quantity import ResourceList, add_into, describe, format_milli
from ..quota.resourcequota import ResourceQuota, usage_of
from ..quota.tree import ElasticQuotaTree
from .cluster import Cluster
from .model import (
    CLUSTER_CAPACITY, PREEMPTED, QUOTA_MAX, QUOTA_MIN, RECLAIMED, WAITING_FOR_EVICTION, Phase, Pod, Reason,
)
from .preemption import find_victims
from .quota_state import QuotaState
from .submission import Refused, apply_limits, charge_quotas, resolve_priority


@dataclass
class Eviction:
    victim: Pod
    preemptor: Pod
    deadline: float

    def to_dict(self) -> dict:
        return {
            "namespace": self.victim.namespace,
            "name": self.victim.name,
            "owner": self.victim.owner_ref,
            "reason": self.victim.reason.code,
            "message": self.victim.reason.message,
            "preemptor": f"{self.preemptor.namespace}/{self.preemptor.name}",
        }


@dataclass
class Decisions:
    admitted: list[Pod] = field(default_factory=list)  # started now
    nominated: list[Pod] = field(default_factory=list)  # will start when their victims are gone
    evictions: list[Eviction] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.admitted or self.nominated or self.evictions)


class Engine:
    """One cluster's scheduling state: nodes, quota tree, namespaces' quotas and limits, pods."""

    def __init__(self, tree: ElasticQuotaTree | None = None, classes: PriorityClasses | None = None):
        self.cluster = Cluster()
        self.quota = QuotaState(tree)
        self.classes = classes or PriorityClasses()
        self.resource_quotas: dict[str, dict[str, ResourceQuota]] = {}
        self.limit_ranges: dict[str, dict[str, LimitRange]] = {}
        self.rq_used: dict[tuple[str, str], ResourceList] = {}
        self.pods: dict[int, Pod] = {}
        self.pending = SortedKeyList(key=Pod.sort_key)
        self.grace_overrides: dict[str, float] = {}  # PriorityClass name -> grace seconds
        self._uids = itertools.count(1)
        # Parking: a pod that could neither start nor preempt is not looked at again
        # until room is released or a pod it might evict is admitted.
        self._released = 0
        self._admitted_by_priority: dict[int, int] = {}
        self._parked: dict[int, tuple] = {}  # uid -> what must change before it is looked at again
        self._admitted_guaranteed = 0  # admissions into leaves with guarantees (they change who is borrowing)
        self._nominated: set[int] = set()

    # -- configuration ------------------------------------------------------
    def add_node(self, name: str, allocatable: ResourceList, labels=None) -> None:
        if name in self.cluster.nodes:
            raise ValueError(f"node {name} already exists")
        self.cluster.add_node(name, allocatable, labels)
        self.quota.rescale(self.cluster.capacity)
        self._released += 1

    def set_tree(self, tree: ElasticQuotaTree | None) -> None:
        """Replace the quota tree; usage is recounted from the pods."""
        self.quota = QuotaState(tree)
        for pod in self.pods.values():
            pod.leaf = self.quota.leaf_for(pod.namespace)
            if pod.phase is Phase.RUNNING or pod.nominated:
                self.quota.charge(pod)
            if pod.phase is Phase.RUNNING:
                self.quota.index_victim(pod)
            if pod.phase is Phase.TERMINATING:
                self.quota.leave(pod)
        self.quota.rescale(self.cluster.capacity)
        self._released += 1

    def replica(self, tree: ElasticQuotaTree | None) -> "Engine":
        """A new engine with this one's nodes, classes, quotas, limits and pods, under ``tree``.

        Running pods are adopted where they run, terminating ones are gone, waiting
        ones (nominated too) are queued in their order: what a tree change would
        start from. Used for dry runs; this engine is not touched.
        """
        out = Engine(tree, PriorityClasses(self.classes.by_name.values()))
        for node in self.cluster.nodes.values():
            alloc = dict(node.allocatable)
            if node.max_pods is not None:
                alloc["pods"] = node.max_pods * 1000
            out.add_node(node.name, alloc, node.labels)
        for rqs in self.resource_quotas.values():
            for rq in rqs.values():
                out.apply_resource_quota(rq)
        for lrs in self.limit_ranges.values():
            for lr in lrs.values():
                out.apply_limit_range(lr)
        for pod in sorted(self.pods.values(), key=Pod.sort_key):
            if pod.phase not in (Phase.PENDING, Phase.RUNNING) or pod.occupying:
                continue
            copy = out.submit(pod.namespace, pod.name, pod.spec, pod.created, owner=pod.owner, labels=pod.labels,
                              annotations=pod.annotations, preemptible=pod.preemptible, duration=pod.duration)
            if pod.phase is Phase.RUNNING:
                out.adopt(copy, pod.node, pod.admitted_at)
        for pod in self.pods.values():  # after ours: they take their room whatever is left (as here)
            if pod.occupying and pod.phase is Phase.RUNNING:
                out.occupy(pod.namespace, pod.name, pod.spec, pod.node, pod.admitted_at, owner=pod.owner, labels=pod.labels)
        return out

    def apply_priority_class(self, pc: PriorityClass) -> None:
        self.classes.apply(pc)

    def apply_resource_quota(self, rq: ResourceQuota) -> None:
        self.resource_quotas.setdefault(rq.namespace, {})[rq.name] = rq
        self.rq_used[(rq.namespace, rq.name)] = {}
        for pod in self.pods.values():
            if pod.namespace == rq.namespace and pod.phase in _COUNTED and rq.matches(pod.spec, pod.priority_class):
                self._count_in_quota(rq, pod)

    def _count_in_quota(self, rq: ResourceQuota, pod: Pod) -> None:
        """Charge what ``pod`` uses to ``rq`` (already admitted: no check)."""
        need = usage_of(pod.spec, pod.requests, pod.limits, rq.tracked())
        pod.quota_usage[rq.name] = need
        add_into(self.rq_used.setdefault((rq.namespace, rq.name), {}), need)

    def apply_limit_range(self, lr: LimitRange) -> None:
        self.limit_ranges.setdefault(lr.namespace, {})[lr.name] = lr

    def remove_resource_quota(self, namespace: str, name: str) -> None:
        """The ResourceQuota is gone: it no longer limits nor counts anything."""
        self.resource_quotas.get(namespace, {}).pop(name, None)
        self.rq_used.pop((namespace, name), None)
        for pod in self.pods.values():
            if pod.namespace == namespace:
                pod.quota_usage.pop(name, None)
        self._released += 1

    def remove_limit_range(self, namespace: str, name: str) -> None:
        self.limit_ranges.get(namespace, {}).pop(name, None)

    @property
    def warnings(self) -> list[str]:
        return self.quota.warnings

    # -- pods ---------------------------------------------------------------
    def submit(
        self, namespace: str, name: str, spec: PodSpec, now: float, *, owner=None, labels=None,
        annotations=None, preemptible: bool = True, duration: float | None = None, created: float | None = None,
    ) -> Pod:
        """Create a pod: checked as the API server would, then queued (or Rejected, with the reason).

        ``created`` (default ``now``) orders the queue; a restored pod keeps its place with it.
        """
        pod = Pod(
            uid=next(self._uids), namespace=namespace, name=name, spec=spec, requests={}, limits={},
            priority=0, priority_class=spec.priority_class_name, created=now if created is None else created,
            owner=owner,
            labels=dict(labels or {}), annotations=dict(annotations or {}), preemptible=preemptible,
            duration=duration, leaf=self.quota.leaf_for(namespace),
        )
        self.pods[pod.uid] = pod
        self._admit_submission(pod)
        return pod

    def adopt(self, pod: Pod, node_name: str, admitted_at: float) -> bool:
        """Put a queued pod straight back on ``node_name`` as Running (state rebuilt after a restart).

        No decision is made: the pod was admitted before. False (and the pod
        stays queued) when the node is gone or no longer has room for it.
        """
        node = self.cluster.nodes.get(node_name)
        if pod.phase is not Phase.PENDING or pod.nominated or node is None or not node.fits(pod.requests):
            return False
        self.pending.remove(pod)
        self.cluster.bind(node, pod)
        self.quota.charge(pod)
        pod.phase, pod.node, pod.admitted_at, pod.reason = Phase.RUNNING, node.name, admitted_at, None
        self.quota.index_victim(pod)
        self._count_admission(pod)
        return True

    def occupy(self, namespace: str, name: str, spec: PodSpec, node_name: str | None, now: float, *,
               owner=None, labels=None) -> Pod:
        """Count a pod that runs without a decision of ours (created on the cluster by other means).

        The cluster placed it already, so no check refuses it: it takes its room on
        ``node_name`` (when that node is one of ours), its namespace's quotas and its
        leaf's usage, as the API server stored it (LimitRange defaults applied). It is
        never a victim: we did not start it, so we do not stop it. ``delete`` forgets it.
        """
        try:
            pc, value, _ = resolve_priority(spec, self.classes, name)
        except Refused:  # a class we do not know: it still uses what it uses
            pc, value = None, 0
        pod = Pod(uid=next(self._uids), namespace=namespace, name=name, spec=spec, requests={}, limits={},
                  priority=value, priority_class=pc.name if pc else spec.priority_class_name, created=now,
                  owner=owner, labels=dict(labels or {}), preemptible=False, can_preempt=False, occupying=True,
                  leaf=self.quota.leaf_for(namespace))
        pod.requests = {r: a for r, a in spec.requests().items() if a}
        pod.limits = spec.limits()
        for rq in self.resource_quotas.get(namespace, {}).values():
            if rq.matches(spec, pod.priority_class):
                self._count_in_quota(rq, pod)
        self.pods[pod.uid] = pod
        node = self.cluster.nodes.get(node_name) if node_name else None
        if node is not None:
            self.cluster.bind(node, pod)
        self.quota.charge(pod)
        pod.phase, pod.node, pod.admitted_at = Phase.RUNNING, node.name if node else None, now
        return pod

    def resubmit(self, pod: Pod, now: float) -> bool:
        """Try a Rejected pod again (a controller asking once more); True when it is queued now."""
        if pod.phase is not Phase.REJECTED:
            return False
        pod.created = now
        return self._admit_submission(pod)

    def _admit_submission(self, pod: Pod) -> bool:
        ident = pod.name
        try:
            pc, value, can_preempt = resolve_priority(pod.spec, self.classes, ident)
            spec = apply_limits(pod.spec, self.limit_ranges.get(pod.namespace, {}).values(), ident)
            requests, limits = spec.requests(), spec.limits()
            pc_name = pc.name if pc else None
            charges = charge_quotas(
                spec, requests, limits, pc_name, self.resource_quotas.get(pod.namespace, {}).values(),
                {name: self.rq_used.get((pod.namespace, name), {}) for name in self.resource_quotas.get(pod.namespace, {})},
                ident,
            )
        except Refused as refused:
            pod.phase, pod.reason = Phase.REJECTED, refused.reason
            return False
        pod.spec, pod.requests, pod.limits = spec, {r: a for r, a in requests.items() if a}, limits
        pod.priority, pod.priority_class, pod.can_preempt = value, pc_name, can_preempt
        pod.quota_usage = charges
        for qname, need in charges.items():
            add_into(self.rq_used.setdefault((pod.namespace, qname), {}), need)
        pod.phase, pod.reason = Phase.PENDING, None
        self.pending.add(pod)
        return True

    def delete(self, uid: int) -> Pod | None:
        """Forget a pod (deleted by its owner, or gone); everything it held is released."""
        pod = self.pods.pop(uid, None)
        if pod is not None:
            self._release(pod)
        return pod

    def finish(self, uid: int, now: float) -> Pod:
        """A running (or terminating) pod completed successfully."""
        pod = self.pods[uid]
        self._release(pod)
        pod.phase, pod.finished_at, pod.reason = Phase.SUCCEEDED, now, None
        return pod

    def fail(self, uid: int, now: float, reason: Reason | None = None) -> Pod:
        """A running (or terminating) pod ended in failure."""
        pod = self.pods[uid]
        self._release(pod)
        pod.phase, pod.finished_at, pod.reason = Phase.FAILED, now, reason
        return pod

    def complete_eviction(self, uid: int, now: float) -> list[Pod]:
        """A terminating victim is gone; returns the nominated pods that start now."""
        victim = self.pods[uid]
        if victim.phase is not Phase.TERMINATING:
            return []
        self._release(victim)
        victim.phase, victim.finished_at = Phase.EVICTED, now
        return self._start_ready(now)

    def _start_ready(self, now: float) -> list[Pod]:
        """Start every nominated pod whose victims are gone, once the room is really free."""
        started = []
        for pod in sorted((self.pods[uid] for uid in self._nominated), key=Pod.sort_key):
            if pod.waiting_for:
                continue
            node = self.cluster.nodes[pod.node]
            if not self.cluster.can_start(node, pod.requests):
                continue
            if self.quota.over_max(pod.leaf, pod.requests, reserved=True) is not None:
                continue
            self._nominated.discard(pod.uid)
            self.cluster.start(pod)
            pod.phase, pod.admitted_at, pod.reason = Phase.RUNNING, now, None
            self.quota.index_victim(pod)
            started.append(pod)
        return started

    def _release(self, pod: Pod) -> None:
        """Give back everything ``pod`` holds, whatever its phase."""
        phase = pod.phase
        self._parked.pop(pod.uid, None)
        if phase in (Phase.RUNNING, Phase.TERMINATING) or pod.nominated:
            self._released += 1
        if phase is Phase.PENDING:
            if pod.nominated:
                self._nominated.discard(pod.uid)
                self.quota.charge(pod, -1)
                self.cluster.unbind(pod, nominated=True)
                for victim_uid in pod.waiting_for:
                    victim = self.pods.get(victim_uid)
                    if victim is not None:
                        victim.preempted_by = None
                pod.node, pod.waiting_for = None, set()
            else:
                self.pending.discard(pod)
        elif phase is Phase.RUNNING:
            self.quota.charge(pod, -1)
            self.quota.index_victim(pod, -1)
            if pod.node is not None:  # an occupying pod may run on a node that is not ours
                self.cluster.unbind(pod)
        elif phase is Phase.TERMINATING:
            self.quota.leave(pod, -1)
            self.cluster.unbind(pod, terminating=True)
            preemptor = self.pods.get(pod.preempted_by)
            if preemptor is not None:
                preemptor.waiting_for.discard(pod.uid)
        if phase in _COUNTED:
            for qname, need in pod.quota_usage.items():
                used = self.rq_used.get((pod.namespace, qname))
                if used is not None:
                    add_into(used, need, -1)
            pod.quota_usage = {}

    # -- decisions ----------------------------------------------------------
    def schedule(self, now: float) -> Decisions:
        """One pass over the queue in order; a pod that cannot be admitted never blocks the ones behind it."""
        out = Decisions(admitted=self._start_ready(now))
        failed: dict = {}  # equivalent pods fail alike within one pass
        parked = self._parked
        for pod in list(self.pending):
            mark = parked.get(pod.uid)
            if mark is not None and mark == self._park_mark(pod):
                continue
            key = (pod.leaf, pod.priority, pod.can_preempt, pod.preemptible,
                   tuple(pod.requests.items()), tuple(pod.spec.node_selector.items()))
            if key in failed:
                pod.reason = failed[key]
                parked[pod.uid] = self._park_mark(pod)
                continue
            reason = self._try_start(pod, now)
            if reason is None:
                parked.pop(pod.uid, None)
                self._count_admission(pod)
                out.admitted.append(pod)
                continue
            plan = find_victims(self.quota, self.cluster, pod) if pod.can_preempt and reason.code != QUOTA_MIN else None
            if plan is not None and not pod.preemptible and self.quota.over_min_nonpreemptible(pod.leaf, pod.requests):
                plan = None
            if plan is not None:
                parked.pop(pod.uid, None)
                out.evictions.extend(self._nominate(pod, plan, now))
                out.nominated.append(pod)
                failed.clear()
                continue
            pod.reason = failed[key] = reason
            parked[pod.uid] = self._park_mark(pod)
        return out

    def _count_admission(self, pod: Pod) -> None:
        self._admitted_by_priority[pod.priority] = self._admitted_by_priority.get(pod.priority, 0) + 1
        if any(node.min for node in pod.leaf.path):
            self._admitted_guaranteed += 1

    def _park_mark(self, pod: Pod) -> tuple:
        """What must change before ``pod`` is worth another look.

        Released room; for a pod that may preempt, also new candidate victims:
        admissions of lower priority, admissions that change who is borrowing
        (into leaves with guarantees), and for a pod that may reclaim (its leaf
        has guarantees), any admission at all.
        """
        if not pod.can_preempt:
            return (self._released,)
        counts = self._admitted_by_priority
        return (self._released, sum(n for prio, n in counts.items() if prio < pod.priority),
                self._admitted_guaranteed, sum(counts.values()) if pod.leaf.min else 0)

    def _try_start(self, pod: Pod, now: float) -> Reason | None:
        if not pod.preemptible:
            hit = self.quota.over_min_nonpreemptible(pod.leaf, pod.requests)
            if hit is not None:
                return self._quota_reason(QUOTA_MIN, pod, *hit)
        hit = self.quota.over_max(pod.leaf, pod.requests)
        if hit is not None:
            return self._quota_reason(QUOTA_MAX, pod, *hit)
        node = self.cluster.find_fit(pod.requests, pod.spec.node_selector)
        if node is None:
            return self._capacity_reason(pod)
        self.pending.remove(pod)
        self.cluster.bind(node, pod)
        self.quota.charge(pod)
        pod.phase, pod.node, pod.admitted_at, pod.reason = Phase.RUNNING, node.name, now, None
        self.quota.index_victim(pod)
        return None

    def _nominate(self, pod: Pod, plan, now: float) -> list[Eviction]:
        self._released += 1  # victims give back quota below the common ancestor
        evictions = []
        for victim in plan.victims:
            self.quota.charge(victim, -1)
            self.quota.index_victim(victim, -1)
            self.quota.leave(victim)
            self.cluster.leave(victim)
            reclaim = victim.priority >= pod.priority
            code = RECLAIMED if reclaim else PREEMPTED
            why = (
                f"its quota {victim.leaf.name} was borrowing and {pod.leaf.name} reclaimed its guarantee"
                if reclaim else f"lower priority ({victim.priority_class or victim.priority}) than "
                f"{pod.priority_class or pod.priority}"
            )
            grace = self.grace_overrides.get(victim.priority_class, victim.spec.grace_seconds)
            victim.phase, victim.preempted_by, victim.evicted_at = Phase.TERMINATING, pod.uid, now
            victim.grace_deadline = now + grace
            victim.reason = Reason(
                code, f"{'Reclaimed' if reclaim else 'Preempted'} by {pod.namespace}/{pod.name}: {why}",
                {"preemptor": f"{pod.namespace}/{pod.name}", "preemptorUid": pod.uid, "at": now, "gracePeriodSeconds": grace},
            )
            evictions.append(Eviction(victim, pod, victim.grace_deadline))
        self.pending.remove(pod)
        self.cluster.bind(plan.node, pod, nominated=True)
        self.quota.charge(pod)
        pod.node, pod.waiting_for = plan.node.name, {v.uid for v in plan.victims}
        self._nominated.add(pod.uid)
        names = ", ".join(f"{v.namespace}/{v.name}" for v in plan.victims)
        pod.reason = Reason(
            WAITING_FOR_EVICTION, f"waiting for {len(plan.victims)} evicted pod(s) to terminate: {names}",
            {"victims": [f"{v.namespace}/{v.name}" for v in plan.victims], "node": plan.node.name},
        )
        return evictions

    # -- explanations ---------------------------------------------------------
    def _quota_reason(self, code: str, pod: Pod, node, res: str) -> Reason:
        need = pod.requests[res]
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
        return Reason(code, text, {"node": node.name, "resource": res, "need": format_milli(res, need),
                                   "used": format_milli(res, used), "limit": format_milli(res, limit)})

    def _capacity_reason(self, pod: Pod) -> Reason:
        """Why no node takes the pod: the cluster lacks a resource, or no single node has enough of it."""
        cluster = self.cluster
        for kind, amount_of in (("cluster", cluster.total_free), ("node", cluster.largest_free)):
            for res, need in sorted(pod.requests.items()):
                free = max(amount_of(res), 0)
                if free >= need:
                    continue
                text = (f"the cluster has {format_milli(res, free)} {res} free, this pod needs {format_milli(res, need)}"
                        if kind == "cluster" else
                        f"no node has {format_milli(res, need)} {res} free (the most on one node is {format_milli(res, free)})")
                return Reason(CLUSTER_CAPACITY, text,
                              {"resource": res, "need": format_milli(res, need), "free": format_milli(res, free)})
        sel = pod.spec.node_selector
        text = f"no node has room for {describe(pod.requests)}" + (f" and matches {sel}" if sel else "")
        return Reason(CLUSTER_CAPACITY, text, {"need": describe(pod.requests)})

    def positions(self) -> dict[int, tuple[int, int]]:
        """Queue position of every waiting pod: (in the whole queue, in its quota leaf), from 1."""
        out, per_leaf = {}, {}
        for i, pod in enumerate(self.pending, 1):
            n = per_leaf[pod.leaf] = per_leaf.get(pod.leaf, 0) + 1
            out[pod.uid] = (i, n)
        return out


_COUNTED = (Phase.PENDING, Phase.RUNNING, Phase.TERMINATING)
