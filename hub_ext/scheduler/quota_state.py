"""Usage accounting on the quota tree, and the guarantees in force.

The parsed tree (``quota.tree``) is configuration; this module keeps the
running numbers. Above the tree's root sits a virtual super-root (``top``);
beside the root, a virtual ``outside`` node holds a virtual leaf for each
namespace on no leaf, with no ``min`` and no ``max`` (it guarantees nothing,
so all its usage is borrowed). Without a tree every namespace is such a leaf,
and priority preemption works cluster-wide.

``used`` counts admitted pods that are not terminating, plus nominated ones
(their room is reserved); ``leaving`` counts terminating pods, whose room is
promised to the nominees but still taken until they are gone. A pod starts
only when ``used + leaving`` stays within every ``max`` on its path, so the
pods really running never exceed a ceiling, not even during grace periods.
Each leaf of the tree indexes its running, preemptible pods by (priority, most
recently admitted) for the victim search, ``outside`` does so for all the
namespaces outside the tree together (among them the namespace does not
matter, as with kube-scheduler), and every node counts those pods per priority
in its subtree.
"""

from __future__ import annotations

import math

from sortedcontainers import SortedKeyList

from ..quota.quantity import ResourceList, format_milli
from ..quota.tree import ElasticQuotaTree, QuotaNode


def _victim_order(pod):
    # Lowest priority first, then the most recently admitted.
    return (pod.priority, -pod.admitted_at, -pod.uid)


class QNode:
    __slots__ = (
        "name", "spec_min", "min", "max", "managed", "parent", "children", "path", "path_set",
        "used", "leaving", "np_used", "prio_count", "candidates", "virtual", "namespaces",
    )

    def __init__(self, name: str, spec_min: ResourceList, max_: ResourceList, parent: "QNode | None", virtual=False):
        self.name = name
        self.spec_min = dict(spec_min)  # as configured
        self.min = dict(spec_min)  # in force (scaled down when the cluster is too small)
        self.max = dict(max_)
        self.managed = set(spec_min) | set(max_)
        self.parent = parent
        self.children: list[QNode] = []
        self.used: ResourceList = {}
        self.leaving: ResourceList = {}
        self.np_used: ResourceList = {}  # non-preemptible part of used
        self.prio_count: dict[int, int] = {}
        self.candidates = None  # leaves: SortedKeyList of running preemptible pods
        self.virtual = virtual
        self.namespaces: list[str] = []
        self.path: tuple[QNode, ...] = (self,) if parent is None else (self,) + parent.path
        self.path_set = frozenset(self.path)
        if parent is not None:
            parent.children.append(self)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def __repr__(self) -> str:
        return f"QNode({self.name})"


class QuotaState:
    def __init__(self, tree: ElasticQuotaTree | None = None):
        self.tree = tree
        self.top = QNode("", {}, {}, None, virtual=True)
        self.outside = QNode("outside", {}, {}, self.top, virtual=True)
        self.outside.candidates = SortedKeyList(key=_victim_order)
        self.nodes: dict[str, QNode] = {}
        self.leaf_of: dict[str, QNode] = {}
        self.warnings: list[str] = []
        if tree is not None:
            self._build(tree.root, self.top)

    def _build(self, spec: QuotaNode, parent: QNode) -> None:
        stack = [(spec, parent)]
        while stack:
            spec, parent = stack.pop()
            node = QNode(spec.name, spec.min, spec.max, parent)
            self.nodes[spec.name] = node
            if spec.is_leaf:
                node.candidates = SortedKeyList(key=_victim_order)
                node.namespaces = list(spec.namespaces)
                for ns in spec.namespaces:
                    self.leaf_of[ns] = node
            stack.extend((child, node) for child in reversed(spec.children))

    def leaf_for(self, namespace: str) -> QNode:
        leaf = self.leaf_of.get(namespace)
        if leaf is None:
            leaf = QNode(f"namespace/{namespace}", {}, {}, self.outside, virtual=True)
            leaf.namespaces = [namespace]
            self.leaf_of[namespace] = leaf
        return leaf

    # -- guarantees in force ------------------------------------------------
    def rescale(self, capacity: ResourceList) -> list[str]:
        """Scale every ``min`` of a resource down in proportion when the cluster holds less than is guaranteed."""
        guaranteed: ResourceList = {}
        for node in self.nodes.values():
            for res, amount in node.spec_min.items():
                if not any(res in a.spec_min for a in node.path[1:]):
                    guaranteed[res] = guaranteed.get(res, 0) + amount
        self.warnings = []
        factors = {}
        for res, total in sorted(guaranteed.items()):
            have = capacity.get(res, 0)
            if total > have:
                factors[res] = (have, total)
                self.warnings.append(
                    f"guarantees of {res} scaled to {have / total:.0%}: the cluster has "
                    f"{format_milli(res, have)}, the tree guarantees {format_milli(res, total)}"
                )
        for node in self.nodes.values():
            node.min = {
                res: (amount if res not in factors else math.floor(amount * factors[res][0] / factors[res][1]))
                for res, amount in node.spec_min.items()
            }
        return self.warnings

    # -- accounting ---------------------------------------------------------
    def charge(self, pod, sign: int = 1) -> None:
        """Count (1) or uncount (-1) ``pod`` in ``used`` of every node on its path."""
        for node in pod.leaf.path:
            used = node.used
            for res, amount in pod.requests.items():
                used[res] = used.get(res, 0) + sign * amount
            if not pod.preemptible:
                for res, amount in pod.requests.items():
                    node.np_used[res] = node.np_used.get(res, 0) + sign * amount

    def leave(self, pod, sign: int = 1) -> None:
        """Count (1) or uncount (-1) a terminating pod in ``leaving`` on its path."""
        for node in pod.leaf.path:
            leaving = node.leaving
            for res, amount in pod.requests.items():
                leaving[res] = leaving.get(res, 0) + sign * amount

    def index_victim(self, pod, sign: int = 1) -> None:
        """Add (1) or remove (-1) a running preemptible pod from the victim index."""
        if not pod.preemptible:
            return
        index = pod.leaf.candidates if pod.leaf.candidates is not None else self.outside.candidates
        if sign > 0:
            index.add(pod)
        else:
            index.remove(pod)
        prio = pod.priority
        for node in pod.leaf.path:
            counts = node.prio_count
            left = counts.get(prio, 0) + sign
            if left:
                counts[prio] = left
            else:
                counts.pop(prio, None)

    # -- reading ------------------------------------------------------------
    def over_max(self, leaf: QNode, request: ResourceList, *, reserved: bool = False):
        """The first (node, resource) on the path where ``request`` would exceed ``max``, else None.

        Terminating pods count until they are gone. ``reserved``: the request
        is already in ``used`` (a nominated pod about to start).
        """
        for node in leaf.path:
            if not node.max:
                continue
            used, leaving = node.used, node.leaving
            for res, amount in request.items():
                cap = node.max.get(res)
                if cap is not None and amount and \
                        used.get(res, 0) + leaving.get(res, 0) + (0 if reserved else amount) > cap:
                    return node, res
        return None

    def over_min_nonpreemptible(self, leaf: QNode, request: ResourceList):
        """Where a non-preemptible ``request`` would go beyond the guarantee, else None."""
        for node in leaf.path:
            for res, amount in request.items():
                if amount and res in node.managed and node.np_used.get(res, 0) + amount > node.min.get(res, 0):
                    return node, res
        return None

    def report(self) -> dict:
        """``{node: {"min","max","used"}}`` for the tree's nodes, in tree order."""
        out = {}
        if self.tree is None:
            return out
        for spec in self.tree.root.walk():
            node = self.nodes[spec.name]
            # Only what the node manages: a GPU-only tree reports no cpu.
            used = {r: v for r, v in node.used.items() if v and r in node.managed}
            out[node.name] = {"min": node.min, "max": node.max, "used": used}
        return out
