"""The order victims are taken in: one picker, criteria in this order.

0. Only pods the rules allow (see ``policy``) and not yet taken or refused.
1. Lowest priority first (the search asks for one priority level at a time).
2. Among equals, from the sibling subtree most over its share, level by level
   down the tree: share = max over the requested resources of
   (used - min) / cluster capacity, counting victims already taken, so two
   equally over-borrowed siblings give one pod each (the seed's "one from
   a.1, one from a.2").
3. Then the most recently admitted pod; the uid breaks remaining ties.

Each tree node keeps, for the length of one search, a heap of its children by
share; a child's entry is refreshed lazily when victims taken below it change
its share, so one pick costs O(depth x log children), not O(children). A child
on the victims' side whose share is not above zero is dropped: no pod below it
that would help may be taken (its side would fall below ``min``).
"""

from __future__ import annotations

import heapq
import itertools

_FIRST = float("-inf")


def victim_key(pod):
    """Criteria 1 and 3 for pods of one leaf: lowest priority, then most recently admitted, then uid."""
    return (pod.priority, -pod.admitted_at, -pod.uid)


class CandidatePicker:
    def __init__(self, ctx):
        self.ctx = ctx
        self.taken: set[int] = set()
        self._taken_count: dict = {}  # QNode -> {priority: n}
        self._heaps: dict = {}
        self._seq = itertools.count()
        # Shares are over the contested resources, each scaled by the cluster's capacity.
        self._scale = [(r, 1.0 / max(ctx.capacity.get(r, 0), 1)) for r in sorted(ctx.contested or ctx.request)]

    def exclude(self, pod) -> None:
        """Never offer ``pod`` again (taken as a victim, or refused)."""
        self.taken.add(pod.uid)
        for node in pod.leaf.path:
            counts = self._taken_count.setdefault(node, {})
            counts[pod.priority] = counts.get(pod.priority, 0) + 1

    def next(self, priority: int, top):
        """The next candidate of ``priority`` under ``top``, or None."""
        return self._best(top, priority, None)

    def _left(self, node, priority: int) -> int:
        taken = self._taken_count.get(node)
        return node.prio_count.get(priority, 0) - (taken.get(priority, 0) if taken else 0)

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

    def _best(self, node, priority: int, lca):
        ctx = self.ctx
        if node.candidates is not None:  # a leaf
            if priority >= ctx.pod.priority and (node is ctx.pod.leaf or not ctx.reclaim_ok(lca)):
                return None
            cands = node.candidates
            for pod in cands.islice(cands.bisect_key_left((priority, _FIRST, _FIRST))):
                if pod.priority != priority:
                    return None
                if pod.uid not in self.taken:
                    return pod
            return None
        heap = self._heaps.get((node, priority))
        if heap is None:
            heap = self._heaps[(node, priority)] = self._build(node, priority, lca)
        while heap:
            # Refresh the top until it is current, then take every child tied with it.
            neg, _, child, child_lca = heap[0]
            if self._left(child, priority) <= 0:
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
                if self._left(entry[2], priority) > 0:
                    if self.share(entry[2]) == share:
                        tied.append(entry)
                    else:
                        heapq.heappush(heap, (-self.share(entry[2]), next(self._seq), entry[2], entry[3]))
            found = []
            for entry in tied:
                pod = self._best(entry[2], priority, entry[3])
                if pod is not None:
                    found.append(pod)
                    heapq.heappush(heap, entry)  # a child that offered a pod stays; others are exhausted
            if found:
                return max(found, key=lambda p: (p.admitted_at, p.uid))
        return None

    def _build(self, node, priority: int, lca) -> list:
        ctx = self.ctx
        heap = []
        for child in node.children:
            if self._left(child, priority) <= 0:
                continue
            child_lca = lca if lca is not None else (None if child in ctx.path_set else node)
            if priority >= ctx.pod.priority and child_lca is not None and not ctx.reclaim_ok(child_lca):
                continue
            share = self.share(child)
            if share <= 0 and child_lca is not None:
                # On the victims' side and not above its guarantee in any contested resource:
                # every pod there that would help is protected by rule 1/2's "stays at or above min".
                continue
            heap.append((-share, next(self._seq), child, child_lca))
        heapq.heapify(heap)
        return heap
