"""What happened over a period, in one plain form that both the simulator and the service's history give.

A *workload* is what people submit (a Job, a Deployment, a bare Pod); its
*team* is the quota-tree leaf its namespace hung on when it was submitted (the
namespace itself where no leaf holds it). Per workload: its pods' requests, its
wait stretches (from submission, or from an eviction, until its pods run: a
workload waits while any of its pods waits) and its pods' run stretches (from
admission until the pod is gone: finished, evicted and gone, or deleted).
Evictions name the victim's and the preemptor's team. Capacity and each team's
``min`` are step functions of time.

Times are seconds on the period's clock; amounts are the engine's milli-units
(``quantity.ResourceList``). A stretch still open when the period ends has
``end = None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Run:
    start: float
    end: float | None
    requests: dict  # one pod's requests, milli-units


@dataclass
class Workload:
    key: str  # "Job ns/name", "Pod ns/name"
    namespace: str
    team: str
    submitted: float
    waits: list = field(default_factory=list)  # [start, end | None], merged, in time order
    runs: list[Run] = field(default_factory=list)
    requests: dict = field(default_factory=dict)  # one pod's requests (the first pod's), milli-units

    @property
    def started(self) -> bool:
        return bool(self.runs)


@dataclass(frozen=True)
class Eviction:
    at: float
    victim: str  # workload key
    victim_team: str
    preemptor: str | None
    preemptor_team: str | None


@dataclass(frozen=True)
class Guarantees:
    """From ``at`` on: each team's ``min`` in force, and the resources each team manages (min or max names
    them). Teams outside any tree are absent: they guarantee nothing, and all they use is borrowed."""

    at: float
    mins: dict  # team -> {resource: milli}
    managed: dict  # team -> frozenset of resources


@dataclass
class Timeline:
    start: float
    end: float
    workloads: list[Workload] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    capacity: list = field(default_factory=list)  # [(at, {resource: milli})], in time order
    guarantees: list[Guarantees] = field(default_factory=list)  # in time order
    tree: bool = False  # whether a quota tree was in force at any time

    def teams(self) -> list[str]:
        names = {w.team for w in self.workloads}
        for g in self.guarantees:
            names.update(g.mins)
        return sorted(names)


def merge_stretches(stretches: list) -> list:
    """Overlapping or touching [start, end | None] stretches as one each, in time order."""
    out: list = []
    for start, end in sorted(stretches, key=lambda s: s[0]):
        if out and (out[-1][1] is None or start <= out[-1][1]):
            if out[-1][1] is not None and (end is None or end > out[-1][1]):
                out[-1][1] = end
            continue
        out.append([start, end])
    return out
