"""Who may evict whom (DESIGN.md "Preemption", rules 1, 2 and 4, revised 2026-12-01).

A preemptor ``p`` (a pod, or a whole gang judged for its total) may evict a
victim ``v`` (a pod, or a running gang as one victim of its whole size) when:

1. Reclaim, whatever ``v``'s priority: ``v`` is in another subtree, and below
   the lowest common ancestor (lca) of the two, every node on ``p``'s side is
   within its ``min`` once ``p`` is admitted (for the resources that node
   manages; a ``p`` needing none of them cannot reclaim through it). Victims
   taken in the same decision count, so lower-priority pods of ``p``'s own
   leaf that it evicts may be what brings its side within ``min``.
   On ``v``'s side, every node below the lca must still use more than its
   ``min`` of each contested resource ``v`` frees, counting the victims
   already taken: the victim that takes it to or below ``min`` is allowed
   (pods are atomic: a team whose one 15-cpu pod borrows 5 above its 10 must
   give it up, or the lender never gets its guarantee).
2. Priority: ``v`` has strictly lower priority and is in ``p``'s own leaf,
   or in another leaf whose side below the lca stays at or above ``min`` of
   each contested resource once every victim of the plan is gone (a borrower
   may not take a guarantee away).
4. Non-preemptible pods are never victims (they are not in the victim index).

"Contested" resources are those ``p`` is short of (a quota node on its path at
``max``, or no cluster node with enough). A victim also frees other resources,
but its side keeps its guarantee of those: the room stays free for it.
Judging every resource instead would let a tenant that borrows GPUs while
using exactly its guaranteed cpu keep the GPUs forever.

A plan is valid when each victim, taken in the plan's order, is allowed by
rule 1 (the preemptor's side judged once the whole plan is gone, the victim's
side as it was when the victim was taken) or by rule 2 (judged once the whole
plan is gone). The context records virtual removals; the engine's state is
never modified.
"""

from __future__ import annotations

RECLAIM = "reclaim"  # rule 1
PRIORITY = "priority"  # rule 2


class PreemptionContext:
    def __init__(self, preemptor, capacity):
        self.preemptor = preemptor  # units.Unit
        self.leaf = preemptor.leaf
        self.priority = preemptor.priority
        self.request = {r: a for r, a in preemptor.total.items() if a > 0}
        self.path = self.leaf.path
        self.path_set = self.leaf.path_set
        self.top = self.path[-1]
        self.capacity = capacity
        self.contested = set(self.request)  # narrowed by the search to what the preemptor is short of
        self.removed: dict = {}  # QNode -> resources virtually freed below it
        # Bumped whenever victims below a node of the preemptor's side change: rule 1 may open or close.
        self.version = 0
        self._reclaim: dict = {}

    # -- virtual removals ---------------------------------------------------
    def remove(self, unit, sign: int = 1) -> None:
        total = unit.total
        for node in unit.leaf.path:
            freed = self.removed.setdefault(node, {})
            for res, amount in total.items():
                freed[res] = freed.get(res, 0) + sign * amount
        if self.on_own_side(unit):
            self.version += 1

    def used(self, node, res: str) -> int:
        freed = self.removed.get(node)
        return node.used.get(res, 0) - (freed.get(res, 0) if freed else 0)

    # -- rule 1, the preemptor's side -----------------------------------------
    def lca(self, leaf):
        for node in leaf.path:
            if node in self.path_set:
                return node
        return None

    def reclaim_ok(self, lca) -> bool:
        """Every node on the preemptor's side strictly below ``lca`` within its min once it is admitted."""
        if lca is self.leaf:
            return False  # its own leaf: priority only
        cached = self._reclaim.get(lca)
        if cached is None or cached[0] != self.version:
            cached = self._reclaim[lca] = (self.version, self._within_min_below(lca))
        return cached[1]

    def _within_min_below(self, lca) -> bool:
        request = self.request
        for node in self.path:
            if node is lca:
                return True
            needed = [r for r in request if r in node.managed]
            if not needed:
                return False
            for res in needed:
                if self.used(node, res) + request[res] > node.min.get(res, 0):
                    return False
        return False

    def reclaim_open(self) -> bool:
        """Whether rule 1 allows victims anywhere now."""
        return any(self.reclaim_ok(node) for node in self.path[1:])

    # -- the victim's side ----------------------------------------------------
    def side_nodes(self, unit, lca):
        for node in unit.leaf.path:
            if node is lca:
                return
            yield node

    def source_ok(self, unit, lca, before=None) -> bool:
        """Rule 1, victim's side: every node below ``lca`` uses more than its min of each contested resource
        ``unit`` frees. ``before``: what victims taken earlier freed (default: all taken so far)."""
        total = unit.total
        for node in self.side_nodes(unit, lca):
            for res in self.contested:
                if total.get(res) and res in node.managed:
                    freed = (before.get(node) if before is not None else self.removed.get(node)) or {}
                    if node.used.get(res, 0) - freed.get(res, 0) <= node.min.get(res, 0):
                        return False
        return True

    def keeps_min(self, unit, lca, taken: bool = False) -> bool:
        """Rule 2, victim's side: no node below ``lca`` falls under its min of a contested resource ``unit``
        frees once it leaves too (``taken``: it is already counted as removed)."""
        total = unit.total
        for node in self.side_nodes(unit, lca):
            for res in self.contested:
                amount = total.get(res)
                if amount and res in node.managed:
                    if self.used(node, res) - (0 if taken else amount) < node.min.get(res, 0):
                        return False
        return True

    # -- the predicate --------------------------------------------------------
    def kind(self, unit) -> str | None:
        """RECLAIM or PRIORITY when the rules allow taking ``unit`` next, given the victims taken so far."""
        if unit.leaf is self.leaf:
            return PRIORITY if unit.priority < self.priority else None
        lca = self.lca(unit.leaf)
        if self.reclaim_ok(lca) and self.source_ok(unit, lca):
            return RECLAIM
        if unit.priority < self.priority and self.keeps_min(unit, lca):
            return PRIORITY
        return None

    def valid(self, units) -> list[str] | None:
        """The rule allowing each victim of the plan ``units`` (in the order taken, all of them removed
        now), or None when one of them is not allowed."""
        before: dict = {}
        kinds = []
        for unit in units:
            kind = None
            if unit.leaf is self.leaf:
                kind = PRIORITY if unit.priority < self.priority else None
            else:
                lca = self.lca(unit.leaf)
                if self.reclaim_ok(lca) and self.source_ok(unit, lca, before):
                    kind = RECLAIM
                elif unit.priority < self.priority and self.keeps_min(unit, lca, taken=True):
                    kind = PRIORITY
            if kind is None:
                return None
            kinds.append(kind)
            for node in unit.leaf.path:
                freed = before.setdefault(node, {})
                for res, amount in unit.total.items():
                    freed[res] = freed.get(res, 0) + amount
        return kinds

    def on_own_side(self, unit) -> bool:
        """Whether taking or sparing ``unit`` changes the preemptor's side (so rule 1's answer)."""
        return self.lca(unit.leaf) is not self.top
