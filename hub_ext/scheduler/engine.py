"""The scheduler engine: state in, decisions out. Pure and synchronous; time is a parameter.

Drivers (the simulator, the local and Kubernetes backends, the service) tell
the engine what happened (a pod submitted, a victim gone, a pod finished) and
call ``schedule(now)`` for decisions: pods to start, pods to evict. Every
driver runs this same code, so a decision seen in ``tenancy simulate`` is the
decision a cluster gets.

Gangs. ``submit_gang`` creates pods that are admitted all together or not at
all: quota for their total on every node of their path, a cluster node for
every one of them at once, their namespace's ResourceQuota judged for all of
them at submission (all queued, or all Rejected with one reason). A waiting
gang holds no room and does not block the pods behind it; its reason and its
queue position (one for the gang) speak of the gang. Running, it is one
victim of its whole size: evicting it evicts every running member. All of a
gang's pods appear in the same ``Decisions`` (``admitted``, ``nominated``,
``evictions``) of one ``schedule()`` call, or in one ``complete_eviction()``
return value when they start once their victims are gone.

Inadmissible work (Kueue's term). A pod or gang that can never start as
things are (its total above the ``max`` of a quota node on its path, or one
pod above what any cluster node has) waits with the reason ``inadmissible``,
holds no queue position and is not looked at again until the tree or the
nodes change (``set_tree``, ``add_node``); then it rejoins the queue in its
old place (its creation time) if it fits now.

Why one file of about 800 lines: it is one algorithm with its state (the queue,
the pass, admission, eviction and its completion, gangs) that every driver calls;
each rule it applies lives in a small module of its own (``preemption``,
``ordering``, ``quota``, ``cluster``, ``owners``, ...) and only this file puts them
together, as Kueue's ``preemption.go`` does for its rules.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from dataclasses import dataclass, field

from ..quota.limitrange import LimitRange
from ..quota.pods import PodSpec
from ..quota.priorityclass import PriorityClass, PriorityClasses
from ..quota.quantity import ResourceList, add_into
from ..quota.resourcequota import ResourceQuota, usage_of
from ..quota.tree import ElasticQuotaTree
from .backlog import Backlog
from .cluster import Cluster
from .explain import capacity_reason, eviction_reason, inadmissible_reason, quota_reason, waiting_reason
from .model import QUOTA_MAX, QUOTA_MIN, Gang, Phase, Pod, Reason
from .placement import place
from .preemption import Plan, find_victims
from .preemption.policy import RECLAIM
from .queue import Queue
from .quota_state import QuotaState
from .submission import Refused, apply_limits, charge_gang_quotas, charge_quotas, resolve_priority
from .units import Unit, waiting_unit


@dataclass
class Eviction:
    victim: Pod
    preemptor: Pod  # for a gang, its lead (the first of its pods)
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
class NodeChange:
    """What ``Engine.remove_node`` did to the pods of a node that is gone."""

    lost: list[Pod] = field(default_factory=list)  # ours that ran there: queued again in their place
    stopped: list[Pod] = field(default_factory=list)  # members of their gangs that ran elsewhere: queued again, to stop
    requeued: list[Pod] = field(default_factory=list)  # every pod queued again (lost, stopped, nominated there)
    evicted: list[Pod] = field(default_factory=list)  # victims that were terminating there: gone
    started: list[Pod] = field(default_factory=list)  # nominees that start now their victims are gone


@dataclass
class Decisions:
    """What one ``schedule()`` call decided. A gang's pods are all in the same list of the same call."""

    admitted: list[Pod] = field(default_factory=list)  # started now (bound to ``pod.node``)
    nominated: list[Pod] = field(default_factory=list)  # will start when their victims are gone
    evictions: list[Eviction] = field(default_factory=list)  # victims now terminating (a gang: every member)
    waited: list[Pod] = field(default_factory=list)  # looked at, still waiting: their reason may be new

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
        # Namespaces where a ResourceQuota's usage went down or a quota changed since the owner last
        # looked (it empties the set): pods refused there may fit now.
        self.quota_freed: set[str] = set()
        self.pods: dict[int, Pod] = {}
        self.pending = Queue(key=Pod.sort_key)  # every waiting pod (not nominated), in queue order
        self._positions: tuple | None = None  # (queue version, positions) as last worked out
        self._place_keys: tuple | None = None  # (queue version, keys of the places, by leaf): for dry runs
        self._ahead: Engine | None = None  # a dry run's copy: the engine whose queue is ahead of its own pods
        self.backlog = Backlog(self.cluster)  # the waiting pods (gang leads) worth a look, and what wakes the rest
        self.grace_overrides: dict[str, float] = {}  # PriorityClass name -> grace seconds
        # The longest grace a borrower reclaimed by another team gets (None: its own, however long):
        # its own gracePeriodSeconds must not hold another team's guarantee for as long as it likes.
        self.max_reclaim_grace: float | None = None
        self._uids = itertools.count(1)
        self._gang_ids = itertools.count(1)
        self._nominated: set[int] = set()

    # -- configuration ------------------------------------------------------
    def add_node(self, name: str, allocatable: ResourceList, labels=None) -> None:
        if name in self.cluster.nodes:
            raise ValueError(f"node {name} already exists")
        self.cluster.add_node(name, allocatable, labels)
        self.quota.rescale(self.cluster.capacity)
        self.backlog.wake_all()

    def update_node(self, name: str, allocatable: ResourceList, labels=None, *, schedulable: bool = True) -> list[Pod]:
        """A node changed on the cluster: resized (``allocatable``), relabelled, cordoned or not Ready
        (``schedulable=False``). Its pods stay where they run; an unschedulable node takes no new pod
        and its room leaves the cluster's capacity (guarantees are rescaled). Pods nominated there wait
        no longer: they are queued again in their place (a gang whole); returns those."""
        node = self.cluster.nodes.get(name)
        if node is None:
            raise ValueError(f"no node {name}")
        requeued = []
        if not schedulable and node.schedulable:
            requeued = self._requeue_all([p for p in node.residents.values() if p.nominated])
            self.cluster.set_schedulable(name, False)
        self.cluster.resize(name, allocatable, labels)
        if schedulable:
            self.cluster.set_schedulable(name, True)
        self.quota.rescale(self.cluster.capacity)
        self.backlog.wake_all()
        return requeued

    def remove_node(self, name: str, now: float) -> "NodeChange":
        """A node is gone (deleted from the cluster), and with it what ran there.

        Victims terminating there are gone (their evictions complete; nominees waiting only for
        them start: ``started``). Pods of ours that ran there are lost (``lost``) and queued again
        in their old place, not failed; a gang goes back whole, so its members that ran elsewhere
        must be stopped there (``stopped``). Pods nominated there are queued again too. Pods others
        made stay counted in their namespace, on no node of ours. Capacity shrinks at once.
        """
        out = NodeChange()
        node = self.cluster.nodes.get(name)
        if node is None:
            return out
        out.requeued += self._requeue_all([p for p in node.residents.values() if p.nominated])
        for pod in [p for p in node.residents.values() if p.phase is Phase.TERMINATING]:
            out.evicted.append(pod)
            out.started += self.complete_eviction(pod.uid, now)
        for pod in [p for p in node.residents.values() if p.occupying]:
            self.cluster.unbind(pod)
            pod.node = None
        out.lost = [p for p in node.residents.values() if p.phase is Phase.RUNNING]
        running = {p.uid for p in out.lost}
        for pod in out.lost:
            if pod.gang is not None:
                running |= {m.uid for m in pod.gang.members if m.phase is Phase.RUNNING}
        requeued = self._requeue_all(out.lost)
        lost = {p.uid for p in out.lost}
        out.stopped = [p for p in requeued if p.uid in running and p.uid not in lost]
        out.requeued += requeued
        out.started = [p for p in out.started if p.phase is Phase.RUNNING]
        self.cluster.remove_node(name)
        self.quota.rescale(self.cluster.capacity)
        self.backlog.wake_all()
        return out

    def requeue(self, uid: int) -> list[Pod]:
        """A running pod was lost (its node went, it was deleted under us, its kubelet gave up on
        it): it goes back to the queue in its old place (its creation time), not failed. A gang
        goes back whole. Returns every pod queued again (for a gang, the members that ran elsewhere
        too: the caller stops those)."""
        pod = self.pods.get(uid)
        if pod is None or pod.phase is not Phase.RUNNING or pod.occupying:
            return []
        return self._requeue_all([pod])

    def placed(self, uid: int, node_name: str) -> list[Pod]:
        """The cluster says a running pod of ours is on ``node_name`` (where kube-scheduler bound it):
        count it there. Returns the pods now counted on another node (none: nothing moved).

        kube-scheduler places our admitted pods as it likes, so two of them may land swapped: ours
        counted on A is bound to B while one counted on B, not bound yet, will go to A. Moving only the
        first would count B over full and A with room it does not have (the next pod of the queue was
        admitted into it: one more running than the cluster holds). So a pod of ours counted on B that
        the cluster has not placed yet moves to A in its stead, until the cluster says where it is.
        """
        pod = self.pods.get(uid)
        node = self.cluster.nodes.get(node_name)
        if pod is None or node is None or pod.phase is not Phase.RUNNING or pod.occupying:
            return []
        if pod.node == node_name:
            pod.placed = True
            return []
        cluster = self.cluster
        old = cluster.nodes.get(pod.node) if pod.node else None
        moved = [pod]
        if old is not None:
            cluster.unbind(pod)
            if not node.has_room(pod.requests):
                stand_in = next((q for q in node.residents.values()
                                 if q.phase is Phase.RUNNING and not q.placed and not q.occupying
                                 and old.has_room(q.requests)), None)
                if stand_in is not None:
                    cluster.unbind(stand_in)
                    cluster.bind(old, stand_in)
                    stand_in.node = old.name
                    moved.append(stand_in)
        cluster.bind(node, pod)
        pod.node, pod.placed = node_name, True
        if old is not None:
            self.backlog.node_released(old)
        return moved

    def _requeue_all(self, pods: list[Pod]) -> list[Pod]:
        """Put these running or nominated pods (a gang: all its active members) back in the queue in
        their old place; everything they held is released first. Returns the pods queued again."""
        out, seen = [], set()
        for pod in pods:
            members = [pod] if pod.gang is None else [m for m in pod.gang.members
                                                      if m.phase in (Phase.RUNNING, Phase.PENDING)]
            if pod.uid in seen or not (pod.phase is Phase.RUNNING or pod.nominated):
                continue
            seen |= {m.uid for m in members}
            for member in members:
                if member.phase is Phase.RUNNING or member.nominated:
                    self._release(member)
                else:
                    self.pending.discard(member)
                    self.backlog.remove(member)
                member.phase, member.node, member.admitted_at, member.waiting_for = Phase.PENDING, None, None, set()
            self._admit_submission(members)
            out += members
        return out

    def set_tree(self, tree: ElasticQuotaTree | None) -> None:
        """Replace the quota tree; usage is recounted from the pods."""
        self.quota = QuotaState(tree)
        self.pending.changed()  # the leaves the positions are counted in
        for pod in self.pods.values():
            pod.leaf = self.quota.leaf_for(pod.namespace)
            if pod.phase is Phase.RUNNING or pod.nominated:
                self.quota.charge(pod)
            if pod.phase is Phase.RUNNING and not pod.occupying:
                self.quota.index_victim(pod)
            if pod.phase is Phase.TERMINATING:
                self.quota.leave(pod)
        self.quota.rescale(self.cluster.capacity)
        self.backlog.wake_all()

    def replica(self, tree: ElasticQuotaTree | None, *, queue: bool = False) -> "Engine":
        """A new engine with this one's nodes, classes, quotas, limits and pods, under ``tree``.

        Running pods are adopted where they run, terminating ones are gone; this engine
        is not touched. With ``queue``, waiting ones (nominated too) are queued in their
        order: what a tree change would start from (``preview_tree``).

        Without it (a dry run of a submission), the waiting pods are left out and
        nominated ones run where they are nominated (their victims are gone): each
        waiting pod was looked at by the last pass and is parked until what blocks it
        changes, which a submission behind it does not change, so the copy decides on
        the submission as the next pass would, and its queue positions count the places
        here that are ahead of it. Copying 10,000 waiting pods, and a pass over them,
        held the service's event loop for a second per dry run.
        """
        out = Engine(tree, PriorityClasses(self.classes.by_name.values()))
        out.grace_overrides, out.max_reclaim_grace = dict(self.grace_overrides), self.max_reclaim_grace
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
        if queue:
            copied = [p for p in self.pods.values() if p.phase in (Phase.PENDING, Phase.RUNNING) and not p.occupying]
        else:
            copied = [p for p in self.pods.values()
                      if (p.phase is Phase.RUNNING and not p.occupying) or p.uid in self._nominated]
        copied_gangs = set()
        for pod in sorted(copied, key=Pod.sort_key):
            if pod.gang is not None:
                if pod.gang.uid in copied_gangs:
                    continue
                copied_gangs.add(pod.gang.uid)
                members = [p for p in pod.gang.members if p.phase in (Phase.PENDING, Phase.RUNNING)
                           and (queue or p.phase is Phase.RUNNING or p.uid in self._nominated)]
                copies = out.submit_gang(pod.namespace, [p.name for p in members], pod.spec, pod.created,
                                         owner=pod.owner, labels=pod.labels, annotations=pod.annotations,
                                         preemptible=pod.preemptible, duration=pod.duration, name=pod.gang.name)
            else:
                members = [pod]
                copies = [out.submit(pod.namespace, pod.name, pod.spec, pod.created, owner=pod.owner,
                                     labels=pod.labels, annotations=pod.annotations, preemptible=pod.preemptible,
                                     duration=pod.duration)]
            for original, copy in zip(members, copies):
                if original.phase is Phase.RUNNING:
                    out.adopt(copy, original.node, original.admitted_at)
                elif not queue:  # nominated: its victims are gone here
                    out.adopt(copy, original.node, original.created)
        for pod in self.pods.values():  # after ours: they take their room whatever is left (as here)
            if pod.occupying and pod.phase is Phase.RUNNING:
                out.occupy(pod.namespace, pod.name, pod.spec, pod.node, pod.admitted_at, owner=pod.owner, labels=pod.labels)
        if not queue:
            # The pods left out still count in their namespaces' ResourceQuotas, as on a cluster; those
            # terminating do not (they are gone in the copy).
            out.rq_used = {k: dict(v) for k, v in self.rq_used.items()}
            for pod in self.pods.values():
                if pod.phase is Phase.TERMINATING:
                    for qname, need in pod.quota_usage.items():
                        if (pod.namespace, qname) in out.rq_used:
                            add_into(out.rq_used[(pod.namespace, qname)], need, -1)
            out._ahead = self
        return out

    def apply_priority_class(self, pc: PriorityClass) -> None:
        self.classes.apply(pc)

    def apply_resource_quota(self, rq: ResourceQuota) -> None:
        self.resource_quotas.setdefault(rq.namespace, {})[rq.name] = rq
        self.rq_used[(rq.namespace, rq.name)] = {}
        self.quota_freed.add(rq.namespace)
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
        self.quota_freed.add(namespace)
        for pod in self.pods.values():
            if pod.namespace == namespace:
                pod.quota_usage.pop(name, None)
        self.backlog.wake_all()

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
        pod = self._new_pod(namespace, name, spec, now if created is None else created, owner, labels,
                            annotations, preemptible, duration)
        self._admit_submission([pod])
        return pod

    def submit_gang(
        self, namespace: str, names: list[str], spec: PodSpec, now: float, *, owner=None, labels=None,
        annotations=None, preemptible: bool = True, duration: float | None = None, created: float | None = None,
        name: str | None = None,
    ) -> list[Pod]:
        """Create one gang: a pod of ``spec`` per name, admitted all together or not at all, evicted together.

        Checked as ``submit`` checks one pod, the namespace's ResourceQuotas for all
        of them together: all are queued, or all Rejected with the same reason.
        ``name`` is what messages call the gang (default: the owner, ``"Job/train"``).
        A gang of one pod is just that pod.
        """
        if not names:
            raise ValueError("a gang needs at least one pod")
        at = now if created is None else created
        pods = [self._new_pod(namespace, n, spec, at, owner, labels, annotations, preemptible, duration)
                for n in names]
        if len(pods) > 1:
            gang = Gang(next(self._gang_ids), name or (f"{owner[0]}/{owner[1]}" if owner else names[0]), pods)
            for pod in pods:
                pod.gang = gang
        self._admit_submission(pods)
        return pods

    def _new_pod(self, namespace, name, spec, created, owner, labels, annotations, preemptible, duration) -> Pod:
        pod = Pod(
            uid=next(self._uids), namespace=namespace, name=name, spec=spec, requests={}, limits={},
            priority=0, priority_class=spec.priority_class_name, created=created, owner=owner,
            labels=dict(labels or {}), annotations=dict(annotations or {}), preemptible=preemptible,
            duration=duration, leaf=self.quota.leaf_for(namespace),
        )
        self.pods[pod.uid] = pod
        return pod

    def adopt(self, pod: Pod, node_name: str, admitted_at: float) -> bool:
        """Put a queued pod straight back on ``node_name`` as Running (state rebuilt after a restart).

        No decision is made: the pod was admitted before. False (and the pod
        stays queued) when the node is gone or no longer has room for it. A gang's
        members are adopted one by one; adopt every member that ran, and stop the
        rest, or the gang is left partly running.
        """
        node = self.cluster.nodes.get(node_name)
        if pod.phase is not Phase.PENDING or pod.nominated or node is None or not node.has_room(pod.requests):
            return False
        self.pending.remove(pod)
        self.backlog.remove(pod)
        self.cluster.bind(node, pod)
        self.quota.charge(pod)
        pod.phase, pod.node, pod.admitted_at, pod.reason = Phase.RUNNING, node.name, admitted_at, None
        pod.placed = False  # where it was counted: the cluster says again where it is
        self.quota.index_victim(pod)
        if pod.gang is not None:
            self._requeue_gang(pod.gang)
        self._admitted(pod)
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
        self._admitted(pod)  # it uses its leaf's guarantee: more of the leaf may now be borrowed
        return pod

    def resubmit(self, pod: Pod, now: float) -> bool:
        """Try a Rejected pod again (a controller asking once more); True when it is queued now.

        A gang is tried again whole (its members were rejected together).
        """
        if pod.phase is not Phase.REJECTED:
            return False
        pods = [pod] if pod.gang is None else [p for p in pod.gang.members if p.phase is Phase.REJECTED]
        for p in pods:
            p.created = now
        return self._admit_submission(pods)

    def _admit_submission(self, pods: list[Pod]) -> bool:
        """Check a pod, or a gang's pods together, as the API server would; queue them or reject them all."""
        first = pods[0]
        ident = first.name
        quotas = self.resource_quotas.get(first.namespace, {})
        try:
            pc, value, can_preempt = resolve_priority(first.spec, self.classes, ident)
            spec = apply_limits(first.spec, self.limit_ranges.get(first.namespace, {}).values(), ident)
            requests, limits = spec.requests(), spec.limits()
            pc_name = pc.name if pc else None
            used = {name: self.rq_used.get((first.namespace, name), {}) for name in quotas}
            if first.gang is None:
                charges = charge_quotas(spec, requests, limits, pc_name, quotas.values(), used, ident)
            else:
                charges = charge_gang_quotas(spec, requests, limits, pc_name, quotas.values(), used, len(pods),
                                             first.gang.name, ident)
        except Refused as refused:
            for pod in pods:
                pod.phase, pod.reason = Phase.REJECTED, refused.reason
            return False
        for pod in pods:
            pod.spec, pod.requests, pod.limits = spec, {r: a for r, a in requests.items() if a}, limits
            pod.priority, pod.priority_class, pod.can_preempt = value, pc_name, can_preempt
            pod.quota_usage = dict(charges)
            for qname, need in charges.items():
                add_into(self.rq_used.setdefault((pod.namespace, qname), {}), need)
            pod.phase, pod.reason = Phase.PENDING, None
            self.pending.add(pod)
        self.backlog.add(first)  # a gang waits in the queue through its first pod
        return True

    def delete(self, uid: int) -> Pod | None:
        """Forget a pod (deleted by its owner, or gone); everything it held is released.

        A gang member deleted leaves the gang: a waiting gang is smaller now.
        """
        pod = self.pods.pop(uid, None)
        if pod is not None:
            self._release(pod)
            if pod.gang is not None:
                pod.gang.members.remove(pod)
                self._requeue_gang(pod.gang)
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
        """A terminating victim is gone; returns the nominated pods that start now (a gang's all together)."""
        victim = self.pods[uid]
        if victim.phase is not Phase.TERMINATING:
            return []
        self._release(victim)
        victim.phase, victim.finished_at = Phase.EVICTED, now
        return self._start_ready(now)

    def needless_evictions(self) -> list[tuple[list[Pod], Pod | None]]:
        """Evictions whose reason went away, as ``(victims, preemptor)``: the preemptor is gone
        (cancelled, queued again: ``None``), or it fits now with its victims staying (another pod's
        end freed the room). Only terminating pods are looked at (few, on the nodes with any)."""
        out, seen = [], set()
        for name in list(self.cluster.leaving_nodes):
            for pod in list(self.cluster.nodes[name].residents.values()):
                if pod.phase is not Phase.TERMINATING or pod.uid in seen:
                    continue
                preemptor = self.pods.get(pod.preempted_by) if pod.preempted_by is not None else None
                if preemptor is None or not preemptor.nominated or pod.uid not in preemptor.waiting_for:
                    victims = [pod] if pod.gang is None else \
                        [m for m in pod.gang.members if m.phase is Phase.TERMINATING]
                    seen |= {v.uid for v in victims}
                    out.append((victims, None))
                    continue
                victims = [self.pods[u] for u in preemptor.waiting_for if u in self.pods]
                seen |= {v.uid for v in victims}
                if self._fits_beside(preemptor):
                    out.append((victims, preemptor))
        return out

    def _fits_beside(self, preemptor: Pod) -> bool:
        """Whether a nominated pod (a gang: all its nominated pods) fits with its victims running on:
        every node it is nominated on has room for all it holds, and its quota path stays within max."""
        members = [preemptor] if preemptor.gang is None else \
            [p for p in preemptor.gang.members if p.uid in self._nominated]
        for p in members:
            node = self.cluster.nodes.get(p.node)
            if node is None or any(node.free.get(r, 0) < 0 for r in p.requests):
                return False
        return self.quota.over_max(preemptor.leaf, Unit(members).total, reserved=True) is None

    def withdraw_eviction(self, victims: list[Pod], preemptor: Pod | None, now: float) -> list[Pod]:
        """Take back the eviction of ``victims`` (from ``needless_evictions``): they run on as before
        it, and their preemptor, if any, starts now beside them. Returns the pods started."""
        for victim in victims:
            if victim.phase is not Phase.TERMINATING:
                continue
            self.quota.leave(victim, -1)
            self.quota.charge(victim)
            self.quota.index_victim(victim)
            self.cluster.stay(victim)
            victim.phase, victim.reason = Phase.RUNNING, None
            victim.preempted_by = victim.evicted_at = victim.grace_deadline = None
        started = []
        if preemptor is not None and preemptor.uid in self._nominated:
            members = [preemptor] if preemptor.gang is None else \
                [p for p in preemptor.gang.members if p.uid in self._nominated]
            for p in members:
                self._nominated.discard(p.uid)
                self.cluster.start(p)
                p.phase, p.admitted_at, p.reason, p.waiting_for = Phase.RUNNING, now, None, set()
                self.quota.index_victim(p)
                started.append(p)
            for p in members:
                self._admitted(p)
        for victim in victims:
            self._admitted(victim)  # it uses its room again: preemptors parked may take it now
        return started

    def _start_ready(self, now: float) -> list[Pod]:
        """Start every nominated pod (a gang: all its nominated pods) whose victims are gone and room is free."""
        started = []
        for pod in sorted((self.pods[uid] for uid in self._nominated), key=Pod.sort_key):
            if pod.uid not in self._nominated:
                continue  # started with its gang
            members = [pod] if pod.gang is None else [p for p in pod.gang.members if p.uid in self._nominated]
            if any(p.waiting_for for p in members):
                continue
            per_node: dict[str, ResourceList] = {}
            for p in members:
                add_into(per_node.setdefault(p.node, {}), p.requests)
            if not all(self.cluster.can_start(self.cluster.nodes[name], need) for name, need in per_node.items()):
                continue
            if self.quota.over_max(pod.leaf, Unit(members).total, reserved=True) is not None:
                continue
            for p in members:
                self._nominated.discard(p.uid)
                self.cluster.start(p)
                p.phase, p.admitted_at, p.reason = Phase.RUNNING, now, None
                self.quota.index_victim(p)
                started.append(p)
            for p in members:
                self._admitted(p)
        return started

    def _requeue_gang(self, gang: Gang) -> None:
        """The gang's waiting members changed: its first waiting pod leads it through the queue again."""
        waiting = [p for p in gang.members if p.phase is Phase.PENDING and p.node is None]
        for p in waiting[1:]:
            self.backlog.remove(p)
        if waiting:
            self.backlog.add(waiting[0])

    def _release(self, pod: Pod) -> None:
        """Give back everything ``pod`` holds, whatever its phase, and wake the waiting pods that may use it."""
        phase = pod.phase
        backlog = self.backlog
        if phase is Phase.PENDING:
            if pod.nominated:
                self._nominated.discard(pod.uid)
                self.quota.charge(pod, -1)
                node = self.cluster.nodes[pod.node]
                self.cluster.unbind(pod, nominated=True)
                for victim_uid in pod.waiting_for:
                    victim = self.pods.get(victim_uid)
                    if victim is not None:
                        victim.preempted_by = None
                pod.node, pod.waiting_for = None, set()
                backlog.quota_released(pod.leaf, pod.requests, used=True, total=True,
                                       nonpreemptible=not pod.preemptible)
                backlog.node_released(node)
            else:
                self.pending.discard(pod)
                backlog.remove(pod)
        elif phase is Phase.RUNNING:
            self.quota.charge(pod, -1)
            if not pod.occupying:
                self.quota.index_victim(pod, -1)
            backlog.quota_released(pod.leaf, pod.requests, used=True, total=True, nonpreemptible=not pod.preemptible)
            if pod.node is not None:  # an occupying pod may run on a node that is not ours
                node = self.cluster.nodes[pod.node]
                self.cluster.unbind(pod)
                backlog.node_released(node)
        elif phase is Phase.TERMINATING:
            self.quota.leave(pod, -1)
            node = self.cluster.nodes[pod.node]
            self.cluster.unbind(pod, terminating=True)
            preemptor = self.pods.get(pod.preempted_by)
            if preemptor is not None:
                preemptor.waiting_for.discard(pod.uid)
            backlog.quota_released(pod.leaf, pod.requests, used=False, total=True, nonpreemptible=False)
            backlog.node_released(node)
        if phase in _COUNTED:
            for qname, need in pod.quota_usage.items():
                used = self.rq_used.get((pod.namespace, qname))
                if used is not None:
                    add_into(used, need, -1)
                    self.quota_freed.add(pod.namespace)
            pod.quota_usage = {}

    # -- decisions ----------------------------------------------------------
    def schedule(self, now: float) -> Decisions:
        """One pass over the queue in order; a pod (or gang) that cannot be admitted never blocks the ones behind it.

        Only the waiting pods worth a look are looked at (see ``backlog``): those
        submitted or woken since, and the parked ones whose blocker was released.
        """
        out = Decisions(admitted=self._start_ready(now))
        failed: dict = {}  # equivalent pods (or gangs) fail alike within one pass
        for pod in self.backlog.stream(self._cleared):
            self.backlog.remove(pod)
            if pod.phase is not Phase.PENDING or pod.node is not None:  # pragma: no cover - defensive
                continue
            unit = waiting_unit(pod)
            lead = unit.lead  # the same pod: a gang waits through its first waiting member
            never = self._never_fits(unit)
            for p in unit.pods:
                if p.inadmissible != (never is not None):
                    p.inadmissible = never is not None
                    self.pending.changed()
            if never is not None:
                for p in unit.pods:
                    p.reason = never
                out.waited.extend(unit.pods)
                self.backlog.park(lead, [])  # only a new tree or a new node (wake_all) can change this
                continue
            key = (lead.leaf, lead.priority, lead.can_preempt, lead.preemptible, tuple(lead.requests.items()),
                   tuple(lead.spec.node_selector.items()), unit.count)
            if key in failed:
                reason, parking = failed[key]
                for pod in unit.pods:
                    pod.reason = reason
                out.waited.extend(unit.pods)
                self.backlog.park(lead, *parking)
                continue
            reason, blockers = self._try_start(unit, now)
            if reason is None:
                out.admitted.extend(unit.pods)
                continue
            result = None
            if lead.can_preempt and reason.code != QUOTA_MIN:
                result = find_victims(self.quota, self.cluster, unit)
                if isinstance(result, Plan) and not lead.preemptible and \
                        self.quota.over_min_nonpreemptible(lead.leaf, unit.total):
                    result = None
            if isinstance(result, Plan):
                out.evictions.extend(self._nominate(unit, result, now))
                out.nominated.extend(unit.pods)
                failed.clear()
                continue
            for pod in unit.pods:
                pod.reason = reason
            out.waited.extend(unit.pods)
            parking = self._parking(unit, blockers, result)
            failed[key] = (reason, parking)
            self.backlog.park(lead, *parking)
        return out

    def _never_fits(self, unit: Unit) -> Reason | None:
        """Why ``unit`` can never start under this tree and these nodes (``inadmissible``), else None:
        its total above a ``max`` on its path, or one pod's request above every node's allocatable."""
        for node in unit.leaf.path:
            for res, amount in unit.total.items():
                cap = node.max.get(res)
                if cap is not None and amount > cap:
                    return inadmissible_reason(unit, node, res, cap, "quota")
        if not self.cluster.nodes:
            return None  # no nodes known yet (a backend still reading them): not a verdict
        for res, amount in unit.request.items():
            most = self.cluster.largest_allocatable(res)
            if amount > most:
                return inadmissible_reason(unit, None, res, most, "node")
        return None

    def _cleared(self, key) -> bool:
        """Whether a parked pod's blocker (see ``backlog``) no longer holds."""
        kind = key[0]
        if kind == "fit":
            return self.cluster.find_fit(dict(key[1]), dict(key[2])) is not None
        node, res, amount = key[1:]
        if kind == "max":
            cap = node.max.get(res)
            return cap is None or node.used.get(res, 0) + node.leaving.get(res, 0) + amount <= cap
        if kind == "short":  # the victims it found would cover what it is short of, once usage is this low
            return node.used.get(res, 0) <= amount
        return node.np_used.get(res, 0) + amount <= node.min.get(res, 0)  # "np"

    def _parking(self, unit: Unit, blockers: list, failure) -> tuple:
        """What wakes ``unit`` again (see ``backlog``): its blockers; for a preemptor whose search
        failed, also pods admitted where victims would help it, usage dropping where it was short (the
        victims it found may do then), room on a node that could hold it, its own side using less."""
        if failure is None:
            return (blockers,)
        blockers = list(blockers)
        if failure.stage == "waiting":
            # It counts on room others may take first: whoever starts there may be its victim then.
            return blockers, self.quota.top, True, None, None
        host = None
        if failure.stage == "node":
            watch = self.quota.top
            blockers.append(_fit_key(unit))
            host = (unit.request, unit.selector)  # room on a node that could hold it, with victims there
        else:
            watch = failure.deficit_node
            blockers.append(("short",) + failure.short)
        # Rule 1 reaches further up only once usage drops below the highest node of its side that is
        # above its min with it admitted (below that node, too): watch that node. Not its leaf alone,
        # nor nothing once rule 1 is open somewhere: it may be open below an ancestor whose other
        # subtrees have nothing to give (its leaf an only child) and shut above, where they have.
        side = None
        for node in unit.leaf.path[:-1]:  # up to the tree's root, below the virtual top
            managed = [r for r in unit.total if r in node.managed]
            if not managed:
                break  # rule 1 never reaches through a node that manages none of what it asks for
            if any(node.used.get(r, 0) + unit.total[r] > node.min.get(r, 0) for r in managed):
                side = node
        return blockers, watch, failure.reclaim_open, side, host

    def _admitted(self, pod: Pod) -> None:
        """``pod`` runs now: wake the parked preemptors it may give a victim to, or more of a victim: its
        subtree uses more, so pods below any node of its path may now be taken (down to the lowest
        priority running anywhere)."""
        priorities = self.quota.top.prio_count
        if priorities:
            self.backlog.admitted(pod, min(priorities))

    def _try_start(self, unit: Unit, now: float) -> tuple[Reason | None, list]:
        """Start ``unit`` now if it fits: (None, []); else (the reason, its blockers for ``backlog``)."""
        lead, total = unit.lead, unit.total
        if not lead.preemptible:
            hit = self.quota.over_min_nonpreemptible(lead.leaf, total)
            if hit is not None:
                return quota_reason(QUOTA_MIN, unit, *hit), [("np", hit[0], hit[1], total[hit[1]])]
        hit = self.quota.over_max(lead.leaf, total)
        if hit is not None:
            return quota_reason(QUOTA_MAX, unit, *hit), [("max", hit[0], hit[1], total[hit[1]])]
        if unit.count == 1:
            node = self.cluster.find_fit(lead.requests, unit.selector)
            placement = None if node is None else [node]
        else:
            placement = place(self.cluster, unit.request, unit.count, unit.selector)
            placement = placement if isinstance(placement, list) else None
        if placement is None:
            return capacity_reason(self.cluster, unit), [_fit_key(unit)]
        for pod, node in zip(unit.pods, placement):
            self.pending.remove(pod)
            self.cluster.bind(node, pod)
            self.quota.charge(pod)
            pod.phase, pod.node, pod.admitted_at, pod.reason = Phase.RUNNING, node.name, now, None
            pod.placed = False
            self.quota.index_victim(pod)
        for pod in unit.pods:
            self._admitted(pod)
        return None, []

    def _nominate(self, unit: Unit, plan: Plan, now: float) -> list[Eviction]:
        lead = unit.lead
        evictions = []
        for victim in plan.victims:
            self.quota.charge(victim, -1)
            self.quota.index_victim(victim, -1)
            self.quota.leave(victim)
            self.cluster.leave(victim)
            grace = self.grace_overrides.get(victim.priority_class, victim.spec.grace_seconds)
            if plan.kinds[victim.uid] == RECLAIM and self.max_reclaim_grace is not None:
                grace = min(grace, self.max_reclaim_grace)
            victim.phase, victim.preempted_by, victim.evicted_at = Phase.TERMINATING, lead.uid, now
            victim.grace_deadline = now + grace
            victim.reason = eviction_reason(victim, lead, plan.kinds[victim.uid] == RECLAIM, now, grace)
            evictions.append(Eviction(victim, lead, victim.grace_deadline))
            # Victims give back quota below the common ancestor now: rule 1 may open for others.
            self.backlog.quota_released(victim.leaf, victim.requests, used=True, total=False, nonpreemptible=False)
        reason = waiting_reason(unit, plan.victims, plan.placement)
        for pod, node in zip(unit.pods, plan.placement):
            self.pending.remove(pod)
            self.backlog.remove(pod)
            self.cluster.bind(node, pod, nominated=True)
            self.quota.charge(pod)
            pod.node, pod.waiting_for, pod.reason, pod.placed = node.name, set(), reason, False
            self._nominated.add(pod.uid)
        lead.waiting_for = {v.uid for v in plan.victims}
        self._admitted(lead)  # its room is booked on its path: pods there may now be taken by others
        return evictions

    # -- explanations ---------------------------------------------------------
    def positions(self) -> dict[int, tuple[int, int]]:
        """Queue position of every waiting pod: (in the whole queue, in its quota leaf), from 1.

        A gang takes one place: every member has the gang's position. Inadmissible pods
        have none. Worked out once per change of the queue (the answer is shared: do not
        change it). In a dry run's copy (``replica(..., queue=False)``) its own pods come
        after the places of the engine it was copied from that are ahead of them.
        """
        cached = self._positions
        if cached is not None and cached[0] == self.pending.version:
            return cached[1]
        out, per_leaf, gangs = {}, {}, {}
        ahead = self._ahead
        i = 0
        for pod in self._places():
            if pod.gang is not None and pod.gang.uid in gangs:
                out[pod.uid] = gangs[pod.gang.uid]
                continue
            i += 1
            n = per_leaf[pod.leaf] = per_leaf.get(pod.leaf, 0) + 1
            place = (i, n)
            if ahead is not None:
                before, before_in_leaf = ahead._places_before(pod)
                place = (i + before, n + before_in_leaf)
            out[pod.uid] = place
            if pod.gang is not None:
                gangs[pod.gang.uid] = place
        self._positions = (self.pending.version, out)
        return out

    def _places(self):
        # An inadmissible pod cannot start as things are: it holds no place (Kueue's inadmissible).
        return (pod for pod in self.pending if not pod.inadmissible)

    def _places_before(self, pod: Pod) -> tuple[int, int]:
        """How many places of this queue are ahead of ``pod`` (of a dry run's copy): in all, in its leaf."""
        cached = self._place_keys
        if cached is None or cached[0] != self.pending.version:
            keys, leaf_keys, gangs = [], {}, set()
            for p in self._places():
                if p.gang is not None:
                    if p.gang.uid in gangs:
                        continue
                    gangs.add(p.gang.uid)
                key = p.sort_key()[:2]  # (priority, created): a copy's pods have uids of their own
                keys.append(key)
                leaf_keys.setdefault(p.leaf.name, []).append(key)
            cached = self._place_keys = (self.pending.version, keys, leaf_keys)
        key = pod.sort_key()[:2]
        return bisect_right(cached[1], key), bisect_right(cached[2].get(pod.leaf.name, ()), key)


def _fit_key(unit: Unit) -> tuple:
    return ("fit", tuple(sorted(unit.request.items())), tuple(sorted(unit.selector.items())), unit.count)


_COUNTED = (Phase.PENDING, Phase.RUNNING, Phase.TERMINATING)
