"""What the cluster says about one training pod of ours, judged from its pod as the watch last saw it.

"Running" means what the cluster says: the pod's phase is Running (scheduled,
started). Otherwise it is waiting for kube-scheduler (with the scheduler's own
message from the ``PodScheduled`` condition) or for its node to start it. A pod
in a final phase has ended, and counts as ended at once, without waiting for
the Job controller to mark the Job. A pod that went with its node, was deleted
under us, or ended by a disruption (the ``DisruptionTarget`` condition: a taint,
pod garbage collection, the kubelet, kube-scheduler's own preemption) is *lost*:
its work is queued again, not failed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .api import Kind

# The Job controller's labels on its pods; these (unprefixed) names are set by every version
# (the batch.kubernetes.io/ ones only since 1.27).
JOB_NAME_LABEL = "job-name"
JOB_UID_LABEL = "controller-uid"
#: pod phases (``status.reason``) a kubelet or controller sets when a pod is lost, not failed by its program
LOST_REASONS = ("NodeLost", "Evicted", "Shutdown", "Terminated", "NodeShutdown", "UnexpectedAdmissionError")


@dataclass(eq=False)
class Followed:
    """One admitted training pod and the objects that carry it: our Job (or bare Pod), its pod."""

    uid: int  # the engine's pod
    kind: Kind
    namespace: str
    name: str  # our Job's (or Pod's) name: the engine pod's name
    k8s_uid: str | None = None  # our Job's (or Pod's) uid; None while it is being created
    pods: dict = field(default_factory=dict)  # pod uid -> the pod as the watch last saw it ("_deleted": gone)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    observed: tuple | None = None  # (phase, node, message) last reported

    def belongs(self, pod: dict) -> bool:
        """Whether ``pod`` is the pod of our current object (an older Job of the same name had others)."""
        meta = pod.get("metadata") or {}
        if self.k8s_uid is None:
            return True
        if self.kind.name == "Pod":
            return meta.get("uid") == self.k8s_uid
        labels = meta.get("labels") or {}
        owner = labels.get(JOB_UID_LABEL) or labels.get("batch.kubernetes.io/controller-uid")
        return owner == self.k8s_uid

    def current(self) -> dict | None:
        mine = [p for p in self.pods.values() if self.belongs(p)]
        return max(mine, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "") if mine else None


def key_of(pod: dict) -> tuple[str, str]:
    """(namespace, name of our object) for a pod of ours: its Job's name, or its own for a bare Pod."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return meta.get("namespace"), labels.get(JOB_NAME_LABEL) or labels.get("batch.kubernetes.io/job-name") \
        or meta.get("name")


def exit_code(obj: dict) -> int | None:
    """The exit code of an ended pod (None while it has not ended)."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase not in ("Succeeded", "Failed"):
        return None
    for cs in status.get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            code = int(terminated["exitCode"])
            if phase == "Failed" and code == 0:
                return 1
            return code
    return 0 if phase == "Succeeded" else 1


def disrupted(pod: dict) -> str | None:
    """Why a pod that ended was lost rather than failed by its program, or None."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return f"{cond.get('reason') or 'disrupted'}: {' '.join((cond.get('message') or '').split())}".rstrip(": ")
    if status.get("reason") in LOST_REASONS:
        return f"{status['reason']}: {' '.join((status.get('message') or '').split())}".rstrip(": ")
    return None


def waiting_message(pod: dict) -> str:
    """Why a pod that is not Running yet waits, in the cluster's words."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    if not node:
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                text = " ".join((cond.get("message") or cond.get("reason") or "").split())
                return f"waiting for kube-scheduler: {text}" if text else "waiting for kube-scheduler"
        return "waiting for kube-scheduler: not scheduled yet"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            why = " ".join(f"{waiting.get('reason') or ''} {waiting.get('message') or ''}".split())
            return f"placed on {node}, not started yet: {why}"
    return f"placed on {node}, waiting for its kubelet to start it"


def judge(f: Followed) -> tuple[str, object]:
    """The state of a followed pod: ``("nopod", None)``, ``("pending", (node, message))``,
    ``("running", node)``, ``("terminating", deletion time)``, ``("ended", exit code)`` or
    ``("lost", why)``."""
    pod = f.current()
    if pod is None:
        return "nopod", None
    code = exit_code(pod)
    meta = pod.get("metadata") or {}
    if code is not None:
        why = disrupted(pod)
        return ("lost", why) if why else ("ended", code)
    if pod.get("_deleted"):  # gone before it ended (the watch's DELETED, or missing from a new list)
        return "lost", f"its pod {meta.get('name')} was deleted"
    if meta.get("deletionTimestamp"):
        return "terminating", _epoch(meta["deletionTimestamp"])
    node = (pod.get("spec") or {}).get("nodeName")
    if (pod.get("status") or {}).get("phase") == "Running":
        return "running", node
    return "pending", (node, waiting_message(pod))


def _epoch(stamp: str) -> float:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except (TypeError, ValueError):
        return datetime.now(timezone.utc).timestamp()
