"""Who may evict whom (DESIGN.md "Preemption", rules 1, 2 and 4).

1. Reclaim: a pod may evict pods of another subtree, whatever their priority,
   when below the two subtrees' lowest common ancestor every node on its own
   side stays within ``min`` once it is admitted (for the resources that node
   manages; a pod needing none of them cannot reclaim through it), and every
   node on the victims' side stays at or above ``min`` once they leave.
2. Priority: a pod may evict strictly lower-priority pods of its own leaf or of
   any leaf whose usage is borrowed, never pushing the victims' side below ``min``.

"Below ``min``" is judged for the *contested* resources: those the pod is short
of (a quota node on its path at ``max``, or no cluster node with enough). A
victim also frees other resources, but its side keeps its guarantee of those:
the room stays free for it. Judging every resource instead would let a tenant
that borrows GPUs while using exactly its guaranteed cpu keep the GPUs forever.
4. Non-preemptible pods are never victims (they are not in the victim index).

The context records virtual removals; the engine's state is never modified.
"""

from __future__ import annotations


class PreemptionContext:
    def __init__(self, pod, capacity):
        self.pod = pod
        self.request = {r: a for r, a in pod.requests.items() if a > 0}
        self.path = pod.leaf.path
        self.path_set = pod.leaf.path_set
        self.capacity = capacity
        self.contested = set(self.request)  # narrowed by the search to what the pod is short of
        self.removed: dict = {}  # QNode -> resources virtually freed below it
        self._reclaim: dict = {}

    # -- virtual removals ---------------------------------------------------
    def remove(self, victim, sign: int = 1) -> None:
        for node in victim.leaf.path:
            freed = self.removed.setdefault(node, {})
            for res, amount in victim.requests.items():
                freed[res] = freed.get(res, 0) + sign * amount

    def used(self, node, res: str) -> int:
        freed = self.removed.get(node)
        return node.used.get(res, 0) - (freed.get(res, 0) if freed else 0)

    # -- rules --------------------------------------------------------------
    def lca(self, leaf):
        for node in leaf.path:
            if node in self.path_set:
                return node
        return None

    def reclaim_ok(self, lca) -> bool:
        """Rule 1, preemptor's side: every node strictly below ``lca`` stays within its min."""
        if lca is self.pod.leaf:
            return False  # same leaf: priority only
        cached = self._reclaim.get(lca)
        if cached is None:
            cached = self._within_min_below(lca)
            self._reclaim[lca] = cached
        return cached

    def _within_min_below(self, lca) -> bool:
        for node in self.path:
            if node is lca:
                return True
            needed = [r for r in self.request if r in node.managed]
            if not needed:
                return False
            for res in needed:
                if node.used.get(res, 0) + self.request[res] > node.min.get(res, 0):
                    return False
        return False

    def can_reclaim_somewhere(self) -> bool:
        return any(self.reclaim_ok(node) for node in self.path[1:])

    def victim_side_ok(self, victim, lca=None) -> bool:
        """Victims' side: no node strictly below ``lca`` drops under its min when ``victim`` leaves too."""
        lca = lca or self.lca(victim.leaf)
        requests = victim.requests
        for node in victim.leaf.path:
            if node is lca:
                return True
            for res in self.contested:
                amount = requests.get(res)
                if amount and res in node.managed and self.used(node, res) - amount < node.min.get(res, 0):
                    return False
        return True

    def eligible(self, victim) -> bool:
        lca = self.lca(victim.leaf)
        if not self.victim_side_ok(victim, lca):
            return False
        return victim.priority < self.pod.priority or self.reclaim_ok(lca)
