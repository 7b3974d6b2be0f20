"""The order victims are taken in (DESIGN.md "Preemption", rule 3): one picker, criteria in this order.

0. Only pods the rules allow (see ``policy``), not yet taken or refused.
1. Reclaim victims (other subtrees, under an ancestor through which rule 1
   lets the preemptor reclaim) before priority victims (its own leaf, or
   borrowing leaves: rule 2), so borrowed room goes back before a team loses
   its own work (Kueue's order). The search asks for reclaim victims first
   and again after every victim taken on the preemptor's side, since those
   can open rule 1.
2. Lowest priority first (the search asks for one priority level at a time).
3. Among equals, from the sibling subtree most over its share, level by level
   down the tree: share = max over the contested resources of
   (used - min) / cluster capacity, counting victims already taken, so two
   equally over-borrowed siblings give one pod each (the seed's "one from
   a.1, one from a.2"). Namespaces outside the tree are one group, ordered
   among themselves by criteria 2 and 4 only: without a tree this is
   kube-scheduler's order, lowest priority first whatever the namespace.
4. Then the most recently admitted pod; the uid breaks remaining ties.

A gang is offered through its members; the search takes it whole.

Each tree node keeps, for the length of one search, a heap of its children by
share; a child's entry is refreshed lazily when victims taken below it change
its share, so one pick costs O(depth x log children), not O(children). A child
on the victims' side whose share is not above zero is dropped: no pod below it
that would help may be taken (rule 1 needs its side above ``min``, rule 2
keeps it at or above).
"""

from __future__ import annotations

import heapq
import itertools

from .policy import RECLAIM

_FIRST = float("-inf")


def victim_key(pod):
    """Criteria 2 and 4 for pods of one leaf or one node: lowest priority, then most recently admitted, then uid."""
    return (pod.priority, -pod.admitted_at, -pod.uid)


class CandidatePicker:
    def __init__(self, ctx):
        self.ctx = ctx
        self.taken: set[int] = set()  # taken or passed over: never offered again
        self.refused: dict[str, set[int]] = {}  # per mode: the rules said no
        self._gone: dict = {}  # (mode, QNode) -> {priority: pods no longer offered}
        self._heaps: dict = {}
        self._seq = itertools.count()
        # Shares are over the contested resources, each scaled by the cluster's capacity.
        self._scale = [(r, 1.0 / max(ctx.capacity.get(r, 0), 1)) for r in sorted(ctx.contested or ctx.request)]

    def exclude(self, pods) -> None:
        """Never offer ``pods`` again, in any mode (taken as victims, or passed over)."""
        for pod in pods:
            if pod.uid in self.taken:
                continue
            self.taken.add(pod.uid)
            for mode in (RECLAIM, "priority"):
                if pod.uid not in self.refused.get(mode, ()):
                    self._count_gone(mode, pod)

    def refuse(self, pods, mode: str) -> None:
        """The rules refuse ``pods`` in ``mode`` (rule 1 may still allow them later, rule 2 may not)."""
        refused = self.refused.setdefault(mode, set())
        for pod in pods:
            if pod.uid in self.taken or pod.uid in refused:
                continue
            refused.add(pod.uid)
            self._count_gone(mode, pod)

    def _count_gone(self, mode: str, pod) -> None:
        for node in pod.leaf.path:
            counts = self._gone.setdefault((mode, node), {})
            counts[pod.priority] = counts.get(pod.priority, 0) + 1

    def next(self, priority: int, mode: str):
        """The next candidate of ``priority`` in ``mode`` (RECLAIM or PRIORITY), or None."""
        return self._best(self.ctx.top, priority, None, mode)

    def _left(self, node, priority: int, mode: str) -> int:
        gone = self._gone.get((mode, node))
        return node.prio_count.get(priority, 0) - (gone.get(priority, 0) if gone else 0)

    def share(self, node) -> float:
        """max over contested resources of (used - min) / capacity, victims taken so far counted out."""
        freed = self.ctx.removed.get(node)
        used, low = node.used, node.min
        best = None
        for res, scale in self._scale:
            value = (used.get(res, 0) - (freed.get(res, 0) if freed else 0) - low.get(res, 0)) * scale
            if best is None or value > best:
                best = value
        return 0.0 if best is None else best

    def _best(self, node, priority: int, lca, mode: str):
        ctx = self.ctx
        if node.candidates is not None:  # a leaf, or the namespaces outside the tree together
            if mode == RECLAIM and node is ctx.leaf:
                return None  # its own leaf gives priority victims only
            taken, refused = self.taken, self.refused.get(mode, ())
            cands = node.candidates
            for pod in cands.islice(cands.bisect_key_left((priority, _FIRST, _FIRST))):
                if pod.priority != priority:
                    return None
                if pod.uid not in taken and pod.uid not in refused:
                    return pod
            return None
        key = (node, priority, mode, ctx.version if mode == RECLAIM else 0)
        heap = self._heaps.get(key)
        if heap is None:
            heap = self._heaps[key] = self._build(node, priority, lca, mode)
        while heap:
            # Refresh the top until it is current, then take every child tied with it.
            neg, _, child, child_lca = heap[0]
            if self._left(child, priority, mode) <= 0:
                heapq.heappop(heap)
                continue
            share = self.share(child)
            if share <= 0 and child_lca is not None:
                heapq.heappop(heap)  # at or below its guarantee now: nothing more to take there
                continue
            if -neg != share:
                heapq.heapreplace(heap, (-share, next(self._seq), child, child_lca))
                continue
            tied = [heapq.heappop(heap)]
            while heap and heap[0][0] == neg:
                entry = heapq.heappop(heap)
                if self._left(entry[2], priority, mode) > 0:
                    if self.share(entry[2]) == share:
                        tied.append(entry)
                    else:
                        heapq.heappush(heap, (-self.share(entry[2]), next(self._seq), entry[2], entry[3]))
            found = []
            for entry in tied:
                pod = self._best(entry[2], priority, entry[3], mode)
                if pod is not None:
                    found.append(pod)
                    heapq.heappush(heap, entry)  # a child that offered a pod stays; others are exhausted
            if found:
                return max(found, key=lambda p: (p.admitted_at, p.uid))
        return None

    def _build(self, node, priority: int, lca, mode: str) -> list:
        ctx = self.ctx
        heap = []
        for child in node.children:
            if self._left(child, priority, mode) <= 0:
                continue
            child_lca = lca if lca is not None else (None if child in ctx.path_set else node)
            if mode == RECLAIM and child_lca is not None and not ctx.reclaim_ok(child_lca):
                continue  # rule 1 does not reach below this ancestor (yet)
            share = self.share(child)
            if share <= 0 and child_lca is not None:
                # On the victims' side and not above its guarantee in any contested resource:
                # every pod there that would help is protected by rules 1 and 2.
                continue
            heap.append((-share, next(self._seq), child, child_lca))
        heapq.heapify(heap)
        return heap
