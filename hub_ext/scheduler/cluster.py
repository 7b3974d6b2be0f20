"""Cluster nodes and a fit index: which node has room for a request, in O(log n) for the usual case.

Each resource keeps a sorted list of ``(free, node)``. A lookup bisects the
list of the request's dominant resource to the first node with enough of it
and walks forward until every resource fits: a best fit on the dominant
resource, so pods pack (like kube-scheduler's MostAllocated scoring).
Nominated pods are charged to their node at once, so a node's ``free`` may be
negative while its victims terminate; nobody else can take that room. Each
node also sums what its terminating pods hold (``leaving``: room already
promised to the nominees, so a preemption search may count on it) and what
its nominated pods reserve (``reserved``: a nominee starts only once
``free + reserved`` holds its request, that is, once the pods really left).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sortedcontainers import SortedList

from ..quota.quantity import ResourceList


@dataclass(eq=False)
class Node:
    name: str
    allocatable: ResourceList
    labels: dict[str, str] = field(default_factory=dict)
    free: ResourceList = field(default_factory=dict)
    max_pods: int | None = None
    pods: int = 0
    residents: dict = field(default_factory=dict)  # uid -> pod running, terminating or nominated here
    leaving: ResourceList = field(default_factory=dict)  # held by terminating pods
    reserved: ResourceList = field(default_factory=dict)  # held by nominated pods
    schedulable: bool = True  # False: cordoned or not Ready; its pods stay, new ones go elsewhere

    def fits(self, request: ResourceList, selector: dict | None = None, extra: ResourceList | None = None) -> bool:
        """Whether a new pod of ``request`` may go here (never on an unschedulable node)."""
        return self.schedulable and self.has_room(request, selector, extra)

    def has_room(self, request: ResourceList, selector: dict | None = None, extra: ResourceList | None = None) -> bool:
        """Whether ``request`` fits in the room left, schedulable or not (a pod that runs here already)."""
        if self.max_pods is not None and self.pods >= self.max_pods:
            return False
        if selector and any(self.labels.get(k) != v for k, v in selector.items()):
            return False
        free = self.free
        for res, amount in request.items():
            have = free.get(res, 0) + (extra.get(res, 0) if extra else 0)
            if amount > have:
                return False
        return True


class Cluster:
    def __init__(self):
        self.nodes: dict[str, Node] = {}
        self.capacity: ResourceList = {}
        self.free_total: ResourceList = {}
        self.leaving_nodes: set[str] = set()
        self._index: dict[str, SortedList] = {}
        self._most: dict[str, int] | None = None  # largest allocatable per resource (None: to recount)

    # -- membership ---------------------------------------------------------
    def add_node(self, name: str, allocatable: ResourceList, labels=None) -> Node:
        allocatable = dict(allocatable)
        pods = allocatable.pop("pods", None)
        node = Node(name, allocatable, dict(labels or {}), dict(allocatable), None if pods is None else pods // 1000)
        self.nodes[name] = node
        self._most = None
        for res, amount in allocatable.items():
            self.capacity[res] = self.capacity.get(res, 0) + amount
            self.free_total[res] = self.free_total.get(res, 0) + amount
            self._index.setdefault(res, SortedList()).add((amount, name))
        return node

    def remove_node(self, name: str) -> Node:
        """Forget a node (its residents must have been unbound or moved first)."""
        node = self.nodes.pop(name)
        self._most = None
        if node.schedulable:
            self._unlist(node)
        self.leaving_nodes.discard(name)
        return node

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        """Cordon (False) or uncordon a node: an unschedulable node's room counts neither in
        ``capacity`` nor in ``free_total`` and no lookup offers it; its residents stay."""
        node = self.nodes[name]
        if node.schedulable == schedulable:
            return
        if schedulable:
            node.schedulable = True
            self._list(node)
        else:
            self._unlist(node)
            node.schedulable = False

    def resize(self, name: str, allocatable: ResourceList, labels=None) -> Node:
        """A node's allocatable (or labels) changed: its free room is what is left after its residents,
        possibly below zero (the pods stay; nothing new fits until they leave)."""
        node = self.nodes[name]
        if node.schedulable:
            self._unlist(node)
        allocatable = dict(allocatable)
        pods = allocatable.pop("pods", None)
        used: ResourceList = {}
        for pod in node.residents.values():
            _add(used, pod.requests, 1)
        node.allocatable = allocatable
        node.free = {res: amount - used.get(res, 0) for res, amount in allocatable.items()}
        node.max_pods = None if pods is None else pods // 1000
        if labels is not None:
            node.labels = dict(labels)
        self._most = None
        if node.schedulable:
            self._list(node)
        return node

    def _list(self, node: Node) -> None:
        for res, amount in node.allocatable.items():
            self.capacity[res] = self.capacity.get(res, 0) + amount
            self.free_total[res] = self.free_total.get(res, 0) + node.free[res]
            self._index.setdefault(res, SortedList()).add((node.free[res], node.name))

    def _unlist(self, node: Node) -> None:
        for res, amount in node.allocatable.items():
            self.capacity[res] -= amount
            self.free_total[res] -= node.free[res]
            self._index[res].remove((node.free[res], node.name))

    # -- accounting ---------------------------------------------------------
    def bind(self, node: Node, pod, *, nominated: bool = False) -> None:
        node.residents[pod.uid] = pod
        self.charge(node, pod.requests)
        if nominated:
            _add(node.reserved, pod.requests, 1)

    def start(self, pod) -> None:
        """A nominated pod runs now."""
        _add(self.nodes[pod.node].reserved, pod.requests, -1)

    def leave(self, pod) -> None:
        """A running pod was evicted and terminates."""
        node = self.nodes[pod.node]
        _add(node.leaving, pod.requests, 1)
        self.leaving_nodes.add(node.name)

    def stay(self, pod) -> None:
        """A terminating pod's eviction was taken back: it runs on, its room is not leaving."""
        node = self.nodes[pod.node]
        _add(node.leaving, pod.requests, -1)
        if not any(node.leaving.values()):
            self.leaving_nodes.discard(node.name)

    def unbind(self, pod, *, terminating: bool = False, nominated: bool = False) -> None:
        node = self.nodes[pod.node]
        del node.residents[pod.uid]
        self.charge(node, pod.requests, -1)
        if terminating:
            _add(node.leaving, pod.requests, -1)
            if not any(node.leaving.values()):
                self.leaving_nodes.discard(node.name)
        if nominated:
            _add(node.reserved, pod.requests, -1)

    @staticmethod
    def can_start(node: Node, request: ResourceList) -> bool:
        """Whether the pods on ``node`` really left enough room (terminating ones included)."""
        return all(node.free.get(r, 0) + node.reserved.get(r, 0) >= a for r, a in request.items() if a)

    def charge(self, node: Node, request: ResourceList, sign: int = 1) -> None:
        """Take (sign=1) or give back (sign=-1) ``request`` on ``node``."""
        node.pods += sign
        free, index, total = node.free, self._index, self.free_total
        for res, amount in request.items():
            if res not in node.allocatable or not amount:
                continue
            if not node.schedulable:  # not listed: only its own free room changes
                free[res] -= sign * amount
                continue
            lst = index[res]
            lst.remove((free[res], node.name))
            free[res] -= sign * amount
            total[res] -= sign * amount
            lst.add((free[res], node.name))

    # -- lookup -------------------------------------------------------------
    def find_fit(self, request: ResourceList, selector: dict | None = None) -> Node | None:
        """A node with room for ``request`` (best fit on its dominant resource), or None."""
        wanted = {r: a for r, a in request.items() if a > 0}
        if not wanted:
            return next((n for n in self.nodes.values() if n.schedulable and n.fits(wanted, selector)), None)
        key = max(wanted, key=lambda r: wanted[r] / max(self.capacity.get(r, 0), 1))
        lst = self._index.get(key)
        if lst is None:
            return None
        nodes = self.nodes  # the loop of ``candidates``, inline: this is every admission's hot path
        for _, name in lst.islice(lst.bisect_left((wanted[key], "")), None):
            node = nodes[name]
            if node.fits(wanted, selector):
                return node
        return None

    def candidates(self, request: ResourceList):
        """Nodes that may have room for ``request``, best fit first: those with enough of its dominant
        resource free, least free first (every node when it asks for nothing)."""
        wanted = {r: a for r, a in request.items() if a > 0}
        if not wanted:
            yield from [n for n in self.nodes.values() if n.schedulable]
            return
        key = max(wanted, key=lambda r: wanted[r] / max(self.capacity.get(r, 0), 1))
        lst = self._index.get(key)
        if lst is None:
            return
        nodes = self.nodes
        for _, name in lst.islice(lst.bisect_left((wanted[key], "")), None):
            yield nodes[name]

    def largest_free(self, resource: str) -> int:
        lst = self._index.get(resource)
        return lst[-1][0] if lst else 0

    def largest_allocatable(self, resource: str) -> int:
        """The most of ``resource`` any one node has at all (0: no node has it)."""
        if self._most is None:
            most: dict[str, int] = {}
            for node in self.nodes.values():
                for res, amount in node.allocatable.items():
                    most[res] = max(most.get(res, 0), amount)
            self._most = most
        return self._most.get(resource, 0)

    def total_free(self, resource: str) -> int:
        return self.free_total.get(resource, 0)


def _add(target: ResourceList, amounts: ResourceList, sign: int) -> None:
    for res, amount in amounts.items():
        target[res] = target.get(res, 0) + sign * amount
