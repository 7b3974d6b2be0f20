"""Runtime records the engine keeps: pods with their phase, placement and the reason they wait."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..quota.pods import PodSpec
from ..quota.quantity import ResourceList, format_list


class Phase(str, enum.Enum):
    PENDING = "Pending"  # queued, or nominated and waiting for its victims to leave
    RUNNING = "Running"
    TERMINATING = "Terminating"  # evicted, inside its grace period; still on its node
    EVICTED = "Evicted"
    REJECTED = "Rejected"  # refused at submission (ResourceQuota, LimitRange, unknown class)
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    def __str__(self) -> str:
        return self.value


# Machine-readable reason codes (DESIGN.md "Explanations").
QUOTA_MAX = "quota-max"
QUOTA_MIN = "quota-min"  # non-preemptible workloads only run within guarantees
CLUSTER_CAPACITY = "cluster-capacity"
RESOURCE_QUOTA = "resource-quota"
LIMIT_RANGE = "limit-range"
INVALID = "invalid"
WAITING_FOR_EVICTION = "waiting-for-eviction"
PREEMPTED = "preempted"
RECLAIMED = "reclaimed"
# Can never start as things are (above a quota max on its path, or above what any node has): kept out
# of queue positions until a change of the tree or the nodes makes it admissible (Kueue's "inadmissible").
INADMISSIBLE = "inadmissible"
# Datasets (issue 20): work naming a dataset its namespace may not use is refused; work whose dataset's
# claim is not Bound there waits outside the queue (not admitted, not counted) until it is.
DATASET_NOT_ALLOWED = "dataset-not-allowed"
DATASET_NOT_READY = "dataset-not-ready"


@dataclass(frozen=True)
class Reason:
    """Why a pod waits, was refused or was evicted; ``message`` is the sentence people read."""

    code: str
    message: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"reason": self.code, "message": self.message, **({"details": self.details} if self.details else {})}


@dataclass(eq=False)
class Gang:
    """Pods admitted all together or not at all, and evicted all together (a distributed training job).

    Declared with ``Engine.submit_gang``; every member has the same spec, namespace
    and priority. ``members`` lists the pods still known to the engine, in
    submission order; the first one still waiting leads it through the queue.
    """

    uid: int
    name: str  # what messages call it: the owner ("Job/train"), else the first pod's name
    members: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict:
        return {"name": self.name, "size": self.size}


@dataclass(eq=False, slots=True)
class Pod:
    uid: int
    namespace: str
    name: str
    spec: PodSpec  # after LimitRange defaults
    requests: ResourceList
    limits: ResourceList
    priority: int
    priority_class: str | None
    created: float
    owner: tuple[str, str] | None = None  # (kind, name) of the controlling workload
    can_preempt: bool = True  # False for preemptionPolicy: Never
    preemptible: bool = True  # False: never a victim, admitted only within min
    occupying: bool = False  # made by others on the cluster: counted where it runs, never decided on
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    duration: float | None = None  # simulated run time
    phase: Phase = Phase.PENDING
    node: str | None = None  # bound (Running/Terminating) or nominated node
    leaf: object = None  # the runtime quota node (QNode) the namespace hangs on
    admitted_at: float | None = None
    reason: Reason | None = None
    quota_usage: dict = field(default_factory=dict)  # per ResourceQuota name: what it counts
    waiting_for: set = field(default_factory=set)  # victims a nominated pod waits on (uids)
    preempted_by: int | None = None
    evicted_at: float | None = None
    grace_deadline: float | None = None
    finished_at: float | None = None
    gang: Gang | None = None  # admitted and evicted with the other members
    inadmissible: bool = False  # waiting, but can never start as things are: holds no queue position
    placed: bool = False  # the cluster said it is on ``node`` (kube-scheduler bound it there)

    @property
    def nominated(self) -> bool:
        return self.phase is Phase.PENDING and self.node is not None

    @property
    def owner_ref(self) -> str | None:
        return None if self.owner is None else f"{self.owner[0]}/{self.owner[1]}"

    def sort_key(self):
        """Queue order: higher priority first, then older, then submission order."""
        return (-self.priority, self.created, self.uid)

    def summary(self) -> dict:
        out = {
            "namespace": self.namespace,
            "name": self.name,
            "owner": self.owner_ref,
            "priorityClassName": self.priority_class,
            "priority": self.priority,
            "phase": self.phase.value,
            "node": self.node,
            "requests": format_list(self.requests),
            "reason": self.reason.code if self.reason else None,
            "message": self.reason.message if self.reason else None,
        }
        if self.reason and self.reason.details:
            out["details"] = self.reason.details
        if self.gang is not None:
            out["gang"] = self.gang.to_dict()
        return out
