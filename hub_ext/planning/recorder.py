"""Records a timeline while the simulator runs: an engine that notes every pod's life as it decides.

``RecordingEngine`` is the scheduler's ``Engine`` with each public call that
changes a pod's life noted (submitted, admitted, evicted, gone) at the time the
caller gives; calls that take no time (``delete``) happen at the last time
seen, which in the simulator is the step's time. Decisions are the engine's
own: recording never changes them.
"""

from __future__ import annotations

from ..scheduler.engine import Engine
from ..scheduler.model import Phase, Pod
from .timeline import Eviction, Guarantees, Run, Timeline, Workload, merge_stretches


def team_of(pod: Pod) -> str:
    """The quota-tree leaf the pod's namespace hangs on; the namespace where no leaf holds it."""
    leaf = pod.leaf
    return pod.namespace if leaf is None or leaf.virtual else leaf.name


def workload_key(pod: Pod) -> str:
    return f"{pod.owner[0] if pod.owner else 'Pod'} {pod.namespace}/{pod.owner[1] if pod.owner else pod.name}"


class _Life:
    __slots__ = ("pod", "workload", "created", "admitted", "gone")

    def __init__(self, pod: Pod, workload: Workload, created: float):
        self.pod, self.workload, self.created = pod, workload, created
        self.admitted: float | None = None
        self.gone: float | None = None


class RecordingEngine(Engine):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock = 0.0
        self._lives: dict[int, _Life] = {}
        self._workloads: dict[str, Workload] = {}
        self._evictions: list[Eviction] = []
        self._capacity: list = []
        self._guarantees: list[Guarantees] = []
        self._had_tree = False

    # -- what the cluster and the tree are ---------------------------------
    def _tick(self, now: float) -> None:
        if now > self.clock:
            self.clock = now

    def _note_capacity(self) -> None:
        entry = (self.clock, dict(self.cluster.capacity))
        if self._capacity and self._capacity[-1][0] == self.clock:
            self._capacity[-1] = entry
        else:
            self._capacity.append(entry)
        self._note_guarantees()  # guarantees are rescaled to the capacity

    def _note_guarantees(self) -> None:
        quota = self.quota
        mins, managed = {}, {}
        if quota.tree is not None:
            self._had_tree = True
            for name, node in quota.nodes.items():
                if node.is_leaf:
                    mins[name] = dict(node.min)
                    managed[name] = frozenset(node.min) | frozenset(node.max)
        entry = Guarantees(self.clock, mins, managed)
        if self._guarantees and self._guarantees[-1].at == self.clock:
            self._guarantees[-1] = entry
        else:
            self._guarantees.append(entry)

    def add_node(self, name, allocatable, labels=None) -> None:
        super().add_node(name, allocatable, labels)
        self._note_capacity()

    def update_node(self, name, allocatable, labels=None, *, schedulable=True):
        out = super().update_node(name, allocatable, labels, schedulable=schedulable)
        self._note_capacity()
        return out

    def remove_node(self, name, now):
        self._tick(now)
        out = super().remove_node(name, now)
        self._note_capacity()
        return out

    def set_tree(self, tree) -> None:
        super().set_tree(tree)
        self._note_guarantees()
        for life in self._lives.values():
            if life.gone is None and life.admitted is None:
                life.workload.team = team_of(life.pod)  # not started yet: it waits in its new leaf

    # -- pods -----------------------------------------------------------------
    def _born(self, pods: list[Pod], now: float) -> None:
        self._tick(now)
        for pod in pods:
            key = workload_key(pod)
            slot = key if pod.owner else f"{key}#{pod.uid}"  # each bare pod is a workload of its own
            workload = self._workloads.get(slot)
            if workload is None:
                workload = self._workloads[slot] = Workload(key, pod.namespace, team_of(pod), now,
                                                            requests=dict(pod.requests))
            self._lives[pod.uid] = _Life(pod, workload, now)

    def submit(self, namespace, name, spec, now, **kwargs) -> Pod:
        pod = super().submit(namespace, name, spec, now, **kwargs)
        self._born([pod], now)
        return pod

    def submit_gang(self, namespace, names, spec, now, **kwargs) -> list[Pod]:
        pods = super().submit_gang(namespace, names, spec, now, **kwargs)
        self._born(pods, now)
        return pods

    def _started(self, pods: list[Pod], now: float) -> None:
        for pod in pods:
            life = self._lives.get(pod.uid)
            if life is not None and life.admitted is None:
                life.admitted = now
                if not life.workload.requests:
                    life.workload.requests = dict(pod.requests)

    def _gone(self, uid: int, now: float) -> None:
        life = self._lives.get(uid)
        if life is not None and life.gone is None:
            life.gone = now

    def schedule(self, now: float):
        self._tick(now)
        decisions = super().schedule(now)
        self._started(decisions.admitted, now)
        for ev in decisions.evictions:
            victim, preemptor = self._lives.get(ev.victim.uid), self._lives.get(ev.preemptor.uid)
            self._evictions.append(Eviction(
                now, victim.workload.key if victim else workload_key(ev.victim), team_of(ev.victim),
                preemptor.workload.key if preemptor else workload_key(ev.preemptor), team_of(ev.preemptor)))
        return decisions

    def complete_eviction(self, uid: int, now: float) -> list[Pod]:
        self._tick(now)
        started = super().complete_eviction(uid, now)
        if uid in self.pods and self.pods[uid].phase is Phase.EVICTED:
            self._gone(uid, now)
        self._started(started, now)
        return started

    def finish(self, uid: int, now: float) -> Pod:
        self._tick(now)
        pod = super().finish(uid, now)
        self._gone(uid, now)
        return pod

    def fail(self, uid: int, now: float, reason=None) -> Pod:
        self._tick(now)
        pod = super().fail(uid, now, reason)
        self._gone(uid, now)
        return pod

    def delete(self, uid: int) -> Pod | None:
        pod = super().delete(uid)
        if pod is not None:
            self._gone(uid, self.clock)
        return pod

    # -- the timeline ---------------------------------------------------------
    def timeline(self, start: float = 0.0, end: float | None = None) -> Timeline:
        """What was recorded, as a ``Timeline`` from ``start`` to ``end`` (default: the last time seen)."""
        end = self.clock if end is None else end
        waits: dict[int, list] = {}
        for workload in self._workloads.values():
            workload.runs = []
        for life in self._lives.values():
            workload = life.workload
            ran = life.admitted is not None
            wait_end = life.admitted if ran else life.gone
            waits.setdefault(id(workload), []).append([life.created, wait_end])
            if ran:
                workload.runs.append(Run(life.admitted, life.gone, dict(life.pod.requests)))
        out = Timeline(start, end, evictions=list(self._evictions), capacity=list(self._capacity),
                       guarantees=list(self._guarantees), tree=self._had_tree)
        for workload in self._workloads.values():
            workload.waits = merge_stretches(waits.get(id(workload), []))
            workload.runs.sort(key=lambda r: r.start)
            out.workloads.append(workload)
        return out
