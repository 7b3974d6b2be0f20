"""What admission, preemption and parking deal in: one pod, or a whole gang (``model.Gang``).

A waiting unit is admitted whole (quota for its total, a node for every pod at
once) or not at all; a running unit is evicted whole, as one victim of its
total size. For a pod outside any gang the unit is just that pod.
"""

from __future__ import annotations

from ..quota.quantity import ResourceList
from .model import Phase, Pod


class Unit:
    __slots__ = ("pods", "lead", "leaf", "priority", "request", "total", "count", "selector")

    def __init__(self, pods: list[Pod]):
        lead = pods[0]
        self.pods = pods
        self.lead = lead  # the pod that stands for the unit: in the queue, as the preemptor of its victims
        self.leaf = lead.leaf
        self.priority = lead.priority
        self.request: ResourceList = lead.requests  # one pod's (a gang's pods share one spec)
        self.count = len(pods)
        if self.count == 1:
            self.total: ResourceList = lead.requests
        else:
            total: ResourceList = {}
            for pod in pods:
                for res, amount in pod.requests.items():
                    total[res] = total.get(res, 0) + amount
            self.total = total
        self.selector = lead.spec.node_selector

    @property
    def is_gang(self) -> bool:
        return self.lead.gang is not None

    def describe(self) -> str:
        gang = self.lead.gang
        return f"{self.lead.namespace}/{self.lead.name}" if gang is None else f"gang {gang.name}"


def waiting_unit(pod: Pod) -> Unit:
    """The unit ``pod`` waits in: its gang's waiting members (led by the first), or the pod alone."""
    if pod.gang is None:
        return Unit([pod])
    return Unit([p for p in pod.gang.members if p.phase is Phase.PENDING and p.node is None])


def running_unit(pod: Pod) -> Unit:
    """The victim ``pod`` belongs to: its gang's running preemptible members, or the pod alone."""
    if pod.gang is None:
        return Unit([pod])
    return Unit([p for p in pod.gang.members if p.phase is Phase.RUNNING and p.preemptible and not p.occupying])
