"""The waiting queue, and which waiting pods a change could help.

A pod (a gang's lead, for the whole gang) that could neither start nor preempt
is *parked*: the scheduling pass no longer looks at it until something it
depends on changes. What it depends on is recorded when it is parked, so a
change wakes only the pods it could help (as Kueue requeues inadmissible
workloads per cohort, not all of them):

- *Blockers*, what stopped it from starting: a quota node at ``max`` of a
  resource (``("max", node, resource, need)``), the guarantee that bounds
  non-preemptible pods (``("np", node, resource, need)``), or no cluster node
  with room (``("fit", request, selector, count)``). Pods with the same
  blocker wait in one bucket, in queue order. Room given back below that
  quota node, or on a cluster node where one such pod would fit, marks the
  bucket *dirty*; the next pass streams its pods, in queue order, merged with
  the awake ones, for as long as the blocker stays clear (the first pod that
  takes the room ends the stream, so a large backlog costs a few looks, not
  one per pod).
- *Victim watches*, for a pod that may preempt: a pod admitted below the node
  it watches (the lowest quota node it was short at; the top when it needed
  room on a cluster node) may be a new victim, or make its subtree use enough
  above its guarantee that pods there may be taken now: the watcher wakes if
  pods of a lower priority than its own run anywhere, or whatever their
  priority when it may reclaim.
- *Side watches*, for a pod that may preempt but whose own side is above its
  guarantee: usage dropping at the lowest such node may let rule 1 reclaim.
- For a pod whose search found victims but not enough for a quota node it is
  short at, the blocker ``("short", node, resource, level)``: usage there
  dropping to ``level`` lets those victims do. For one that found none to make
  room on a node, *host watches*: room given back on any node that could hold
  it (with victims there, less than its whole request may do).

Anything else (a new tree, a node joining, a quota removed) wakes every pod.
"""

from __future__ import annotations

import heapq
import itertools

from sortedcontainers import SortedKeyList, SortedList

from .model import Pod

_FIRST = (float("-inf"),)


class _Record:
    __slots__ = ("pod", "buckets", "watch", "reclaim", "side", "host")

    def __init__(self, pod):
        self.pod = pod
        self.buckets: list = []
        self.watch = None  # QNode whose admissions may bring victims
        self.reclaim = False  # may reclaim: any admission there is of interest, not only lower priorities
        self.side = None  # QNode whose usage must drop before rule 1 may open
        self.host = None  # (request, selector): room given back on a node that could hold it


class Backlog:
    def __init__(self, cluster):
        self.cluster = cluster
        # To look at in the next pass: a heap of (queue key, seq, pod); ``_awake`` holds the seq of each
        # pod's live entry (others are stale: the pod was looked at, parked or gone since).
        self._heap: list = []
        self._awake: dict[int, int] = {}
        self._seq = itertools.count()
        self._records: dict[int, _Record] = {}
        self._buckets: dict[tuple, SortedKeyList] = {}
        self._by_quota: dict[tuple, set] = {}  # (QNode, kind) -> bucket keys of that node
        self._fit_keys: set = set()
        self._dirty: set = set()
        self._watchers: dict = {}  # QNode -> SortedList of (-priority, uid)
        self._reclaimers: dict = {}  # QNode -> set of uids
        self._side: dict = {}  # QNode -> set of uids
        self._hosts: dict = {}  # uid -> (request, selector)

    def __len__(self) -> int:
        return len(self._awake) + len(self._records)

    @property
    def parked(self) -> int:
        return len(self._records)

    # -- entering and leaving ---------------------------------------------------
    def add(self, pod) -> None:
        """``pod`` is to be looked at in the next pass."""
        self.remove(pod)
        seq = next(self._seq)
        self._awake[pod.uid] = seq
        heapq.heappush(self._heap, (pod.sort_key(), seq, pod))

    def remove(self, pod) -> None:
        """``pod`` no longer waits here (started, nominated, gone, or looked at now)."""
        record = self._records.pop(pod.uid, None)
        if record is None:
            self._awake.pop(pod.uid, None)
            return
        for key in record.buckets:
            bucket = self._buckets[key]
            bucket.remove(pod)
            if not bucket:
                self._drop_bucket(key)
        if record.watch is not None:
            listening = self._watchers[record.watch]
            listening.remove((-pod.priority, pod.uid))
            if not listening:
                del self._watchers[record.watch]
            if record.reclaim:
                self._reclaimers[record.watch].discard(pod.uid)
        if record.side is not None:
            self._side[record.side].discard(pod.uid)
        if record.host is not None:
            del self._hosts[pod.uid]

    def park(self, pod, blockers, watch=None, reclaim: bool = False, side=None, host=None) -> None:
        """Look at ``pod`` again only when a blocker clears, a victim appears under ``watch``, usage
        drops at ``side`` or room is given back on a node that could ``host`` it."""
        self.remove(pod)
        record = _Record(pod)
        for key in dict.fromkeys(blockers):
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = SortedKeyList(key=Pod.sort_key)
                if key[0] == "fit":
                    self._fit_keys.add(key)
                else:
                    self._by_quota.setdefault((key[1], key[0]), set()).add(key)
            bucket.add(pod)
            record.buckets.append(key)
        if watch is not None:
            record.watch, record.reclaim = watch, reclaim
            self._watchers.setdefault(watch, SortedList()).add((-pod.priority, pod.uid))
            if reclaim:
                self._reclaimers.setdefault(watch, set()).add(pod.uid)
        if side is not None:
            record.side = side
            self._side.setdefault(side, set()).add(pod.uid)
        if host is not None:
            record.host = host
            self._hosts[pod.uid] = host
        self._records[pod.uid] = record

    def _drop_bucket(self, key) -> None:
        del self._buckets[key]
        self._dirty.discard(key)
        if key[0] == "fit":
            self._fit_keys.discard(key)
        else:
            keys = self._by_quota[(key[1], key[0])]
            keys.discard(key)
            if not keys:
                del self._by_quota[(key[1], key[0])]

    def _wake(self, uid: int) -> None:
        record = self._records.get(uid)
        if record is not None:
            self.add(record.pod)

    # -- changes ------------------------------------------------------------------
    def quota_released(self, leaf, requests, *, used: bool, total: bool, nonpreemptible: bool) -> None:
        """Usage given back on ``leaf``'s path: ``used`` dropped (a pod left or began to leave), ``total``
        (used + leaving, what ``max`` is checked against) dropped, of a ``nonpreemptible`` pod."""
        by_quota, side = self._by_quota, self._side
        for node in leaf.path:
            if total:
                self._dirty.update(by_quota.get((node, "max"), ()))
            if used:
                self._dirty.update(by_quota.get((node, "short"), ()))
            if nonpreemptible:
                self._dirty.update(by_quota.get((node, "np"), ()))
            if used and node in side:
                for uid in list(side[node]):
                    self._wake(uid)

    def node_released(self, node) -> None:
        """Room given back on cluster ``node``."""
        for key in self._fit_keys:
            if key not in self._dirty and node.fits(dict(key[1]), dict(key[2])):
                self._dirty.add(key)
        for uid, (request, selector) in list(self._hosts.items()):
            if all(node.allocatable.get(r, 0) >= a for r, a in request.items()) and \
                    all(node.labels.get(k) == v for k, v in (selector or {}).items()):
                self._wake(uid)

    def admitted(self, pod, lowest_priority: int) -> None:
        """``pod`` runs now: its subtree uses more, so it, or pods there, may be victims for watchers of a
        node of its path: those of a higher priority than ``lowest_priority`` (the lowest of the pods
        that may be victims), and any that may reclaim."""
        watchers, reclaimers = self._watchers, self._reclaimers
        if not watchers:
            return
        for node in pod.leaf.path:
            listening = watchers.get(node)
            if not listening:
                continue
            # Entries are (-priority, uid): those sorting before (-lowest,) have a higher priority.
            woken = [uid for _, uid in listening.irange(maximum=(-lowest_priority,), inclusive=(True, False))]
            woken += reclaimers.get(node, ())
            for uid in woken:
                self._wake(uid)

    def wake_all(self) -> None:
        for uid in list(self._records):
            self._wake(uid)

    # -- the pass -----------------------------------------------------------------
    def stream(self, cleared):
        """The pods to look at in this pass, in queue order: the awake ones, and the parked ones whose
        blocker was released and is still clear (``cleared(key)``), stopping a bucket at its first pod
        that finds it blocked again. The caller removes (and may park again) each pod it is given."""
        cursor = _FIRST
        heap, awake, later = self._heap, self._awake, []
        try:
            while True:
                best, best_key = None, None
                while heap:
                    k, seq, pod = heap[0]
                    if awake.get(pod.uid) != seq:
                        heapq.heappop(heap)  # stale
                    elif k <= cursor:
                        later.append(heapq.heappop(heap))  # woken behind the cursor: the next pass looks at it
                    else:
                        best, best_key = pod, k
                        break
                for key in list(self._dirty):
                    bucket = self._buckets.get(key)
                    if bucket is None or not cleared(key):
                        self._dirty.discard(key)
                        continue
                    at = bucket.bisect_key_right(cursor)
                    if at >= len(bucket):
                        self._dirty.discard(key)
                        continue
                    pod = bucket[at]
                    k = pod.sort_key()
                    if best_key is None or k < best_key:
                        best, best_key = pod, k
                if best is None:
                    self._dirty.clear()
                    return
                cursor = best_key
                yield best
        finally:
            for entry in later:
                heapq.heappush(heap, entry)
