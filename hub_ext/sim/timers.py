"""When the simulated clock must next stop: a running pod's end (its duration) or a victim's grace deadline.

Two heaps of ``(time, uid, pod)``, filled as pods start and as victims are
chosen; an entry whose pod has since moved on (evicted, deleted, ended) is
dropped when it comes up, so a lookup costs O(log n) instead of a pass over
every pod.
"""

from __future__ import annotations

import heapq

from ..scheduler.model import Phase, Pod


class Timers:
    def __init__(self):
        self._ends: list = []  # running pods with a duration: (admitted_at + duration, uid, pod)
        self._deadlines: list = []  # terminating victims: (grace_deadline, uid, pod)

    def started(self, pods) -> None:
        for pod in pods:
            if pod.duration is not None and pod.phase is Phase.RUNNING:
                heapq.heappush(self._ends, (pod.admitted_at + pod.duration, pod.uid, pod))

    def evicted(self, pods) -> None:
        for pod in pods:
            if pod.phase is Phase.TERMINATING:
                heapq.heappush(self._deadlines, (pod.grace_deadline, pod.uid, pod))

    @staticmethod
    def _live(entry, pods: dict) -> bool:
        at, uid, pod = entry
        if pods.get(uid) is not pod:
            return False
        if pod.phase is Phase.TERMINATING:
            return pod.grace_deadline == at
        return pod.phase is Phase.RUNNING and pod.duration is not None and pod.admitted_at + pod.duration == at

    def _head(self, heap: list, pods: dict) -> float | None:
        while heap and not self._live(heap[0], pods):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def next(self, pods: dict, evictions_only: bool) -> float | None:
        """The earliest deadline (and with ``evictions_only`` False, the earliest end) of ``pods``."""
        times = [self._head(self._deadlines, pods)]
        if not evictions_only:
            times.append(self._head(self._ends, pods))
        return min((t for t in times if t is not None), default=None)

    def due(self, pods: dict, now: float) -> list[Pod]:
        """The pods whose deadline or end is at or before ``now``, in creation order (taken off the heaps)."""
        out = {}
        for heap in (self._deadlines, self._ends):
            while heap and heap[0][0] <= now:
                entry = heapq.heappop(heap)
                if self._live(entry, pods):
                    out[entry[1]] = entry[2]
        return [out[uid] for uid in sorted(out)]
