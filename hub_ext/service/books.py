"""The workloads' rows kept in step with the engine's pods: the one place a row's state is written from.

A workload is a row (``WorkloadRow``, with a ``PodRow`` per pod) and an owner in
the engine (a bare pod for a notebook, a Job of ``replicas`` pods for training).
``sync`` writes what the engine says of a workload's pods into its rows and ends
the workload when its pods say it is over; only what changed is written, so an
unchanged row costs the commit nothing.
"""

from __future__ import annotations

from ..quota.workloads import WorkloadSpec
from ..scheduler.model import Phase
from ..scheduler.owners import Owner
from .store import WorkloadRow
from .workloads import FINAL, NOTEBOOK, TRAINING, pod_template


class Books:
    """The row side of the controller's workloads (its ``rows``, ``owners`` and ``pod_rows``)."""

    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store = controller.engine, controller.store
        self.rows, self.owners, self.pod_rows = controller.rows, controller.owners, controller.pod_rows
        self.reasons: dict[int, object] = {}  # engine uid -> the pod's reason as last written to its row

    def make_owner(self, row: WorkloadRow) -> Owner:
        owner = owner_for(row.kind, row.namespace, row.name, row.spec)
        owner.succeeded = row.succeeded or 0
        self.owners[row.id] = owner
        self.rows[row.id] = row
        return owner

    def drop(self, wid: str) -> None:
        """Forget a workload in the engine and here (a submission that was not stored, a row set aside);
        the store keeps what it has."""
        owner = self.owners.pop(wid, None)
        for pod in owner.pods if owner else []:
            self.engine.delete(pod.uid)
            self.forget_pod(pod.uid)
        self.rows.pop(wid, None)

    def forget_pod(self, uid: int):
        """The pod ``uid`` has no row of ours any more (ended, evicted, dropped): its row, or None."""
        self.reasons.pop(uid, None)
        return self.pod_rows.pop(uid, None)

    def wid(self, pod) -> str | None:
        prow = self.pod_rows.get(pod.uid)
        return prow.workload_id if prow else None

    def sync_pod(self, pod) -> None:
        prow = self.pod_rows.get(pod.uid)
        if prow is None:
            return
        self.reasons[pod.uid] = pod.reason
        reason = pod.reason.to_dict() if pod.reason else None
        if pod.phase is Phase.PENDING and reason and (prow.reason or {}).get("reason") != reason["reason"]:
            # The reason history of the job's page: each new reason it waits for, once.
            self.store.record(self.c.clock(), "waiting", reason["message"], prow.workload_id, reason.get("details"))
        # Only what changed is written: an unchanged row stays clean and costs the commit nothing.
        for attr, value in (("phase", pod.phase.value), ("node", pod.node), ("admitted_at", pod.admitted_at),
                            ("finished_at", pod.finished_at), ("created", pod.created), ("reason", reason)):
            if getattr(prow, attr) != value:
                setattr(prow, attr, value)

    def sync(self, row: WorkloadRow, owner: Owner | None = None) -> None:
        owner = owner or self.owners.get(row.id)
        if owner is None:
            return
        for pod in owner.pods:
            self.sync_pod(pod)
        phases = [p.phase for p in owner.pods if p.uid in self.engine.pods]
        if row.kind == TRAINING and owner.succeeded >= (row.spec.get("replicas") or 1):
            row.state, row.finished = "Succeeded", row.finished or self.c.clock()
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
            for pod in owner.pods:  # done: the engine forgets them, the rows keep the history
                self.engine.delete(pod.uid)
                self.forget_pod(pod.uid)
        elif any(p is Phase.RUNNING for p in phases) or (
                row.id in self.c.evicting and any(p is Phase.TERMINATING for p in phases)):
            # A warned notebook runs still until its countdown ends; a pod deleted from outside is going.
            if row.state != "Running":
                row.state = "Running"
        elif row.kind == NOTEBOOK and phases and phases[0] is Phase.REJECTED:
            row.state, row.finished = "Rejected", self.c.clock()
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
            for pod in owner.pods:
                self.engine.delete(pod.uid)
        elif row.state not in FINAL and row.state != "Pending":
            row.state = "Pending"

    def finish_failed(self, row: WorkloadRow, now: float) -> None:
        """A workload failed (a pod's program did): its other pods stop, its rows keep the history."""
        owner = self.owners.pop(row.id, None)
        self.sync(row, owner)
        for pod in list(owner.pods if owner else []):
            prow = self.forget_pod(pod.uid)
            if pod.phase in (Phase.RUNNING, Phase.TERMINATING) and prow is not None:
                self.c._spawn(self.c.backend.stop(row, pod, prow))
            if prow is not None and pod.phase in (Phase.PENDING, Phase.RUNNING, Phase.TERMINATING, Phase.REJECTED):
                prow.phase, prow.finished_at = "Deleted", now
            self.engine.delete(pod.uid)  # finished pods too: the row keeps the history
        row.state, row.finished = "Failed", now
        self.rows.pop(row.id, None)


def owner_for(kind: str, namespace: str, name: str, spec: dict) -> Owner:
    """The owner of a workload's pods: a bare pod for a notebook, a Job of ``replicas`` pods for training."""
    template = pod_template(spec, spec["priorityClassName"], spec.get("gracePeriodSeconds"))
    k8s_kind = "Pod" if kind == NOTEBOOK else "Job"
    return Owner(WorkloadSpec(kind=k8s_kind, namespace=namespace, name=name, template=template,
                              pods=spec.get("replicas", 1),
                              completions=spec.get("replicas", 1) if k8s_kind == "Job" else None,
                              gang=bool(spec.get("gang"))))
