"""The order victims are taken in: one picker, criteria in this order.

0. Only pods the rules allow (see ``policy``) and not yet taken or refused.
1. Lowest priority first (the search asks for one priority level at a time).
2. Among equals, from the sibling subtree most over its share, level by level
   down the tree: share = max over the requested resources of
   (used - min) / cluster capacity, counting victims already taken, so two
   equally over-borrowed siblings give one pod each (the seed's "one from
   a.1, one from a.2").
3. Then the most recently admitted pod; the uid breaks remaining ties.
"""

from __future__ import annotations

from collections import defaultdict

_FIRST = float("-inf")


class CandidatePicker:
    def __init__(self, ctx):
        self.ctx = ctx
        self.taken: set[int] = set()
        self._taken_count: dict = defaultdict(lambda: defaultdict(int))  # QNode -> priority -> n

    def exclude(self, pod) -> None:
        """Never offer ``pod`` again (taken as a victim, or refused)."""
        self.taken.add(pod.uid)
        for node in pod.leaf.path:
            self._taken_count[node][pod.priority] += 1

    def next(self, priority: int, top):
        """The next candidate of ``priority`` under ``top``, or None."""
        return self._best(top, priority, None)

    def _left(self, node, priority: int) -> int:
        return node.prio_count.get(priority, 0) - self._taken_count[node][priority]

    def share(self, node) -> float:
        ctx = self.ctx
        return max(
            ((ctx.used(node, r) - node.min.get(r, 0)) / max(ctx.capacity.get(r, 0), 1) for r in ctx.request),
            default=0.0,
        )

    def _best(self, node, priority: int, lca):
        ctx = self.ctx
        if node.candidates is not None:  # a leaf
            if priority >= ctx.pod.priority:
                if node is ctx.pod.leaf or not ctx.reclaim_ok(lca):
                    return None
            cands = node.candidates
            for pod in cands.islice(cands.bisect_key_left((priority, _FIRST, _FIRST))):
                if pod.priority != priority:
                    return None
                if pod.uid not in self.taken:
                    return pod
            return None
        scored = []
        for child in node.children:
            if self._left(child, priority) <= 0:
                continue
            child_lca = lca if lca is not None else (None if child in ctx.path_set else node)
            if priority >= ctx.pod.priority and child_lca is not None and not ctx.reclaim_ok(child_lca):
                continue
            scored.append((self.share(child), child, child_lca))
        scored.sort(key=lambda t: -t[0])
        i = 0
        while i < len(scored):
            j = i
            while j < len(scored) and scored[j][0] == scored[i][0]:
                j += 1
            found = [p for _, c, l in scored[i:j] if (p := self._best(c, priority, l)) is not None]
            if found:
                return max(found, key=lambda p: (p.admitted_at, p.uid))
            i = j
        return None
