"""Where the pods of one unit fit: a node for every pod, all at once.

A gang's pods share one request, so how many fit on a node is the same
number whatever else is placed elsewhere; counting them node by node is
exact (no packing search needed). Nodes are taken best fit first on the
request's dominant resource, as ``Cluster.find_fit`` does for one pod.

``extra`` (used by the preemption search) adds room per node name: pods
terminating there and victims the plan evicts. Without it only the room free
now counts.
"""

from __future__ import annotations

from ..quota.quantity import ResourceList
from .cluster import Cluster, Node


def slots(node: Node, request: ResourceList, selector: dict | None, extra: ResourceList | None = None,
          limit: int | None = None) -> int:
    """How many pods of ``request`` fit on ``node`` (at most ``limit``); none on an unschedulable node."""
    if not node.schedulable:
        return 0
    if selector and any(node.labels.get(k) != v for k, v in selector.items()):
        return 0
    n = limit if limit is not None else 1 << 30
    if node.max_pods is not None:
        n = min(n, node.max_pods - node.pods)
    free = node.free
    for res, amount in request.items():
        if amount > 0:
            have = free.get(res, 0) + (extra.get(res, 0) if extra else 0)
            n = min(n, have // amount if have > 0 else 0)
    return max(n, 0)


def place(cluster: Cluster, request: ResourceList, count: int, selector: dict | None,
          extra: dict[str, ResourceList] | None = None) -> list[Node] | int:
    """A node for each of ``count`` pods (a list, nodes repeated as they take several), or how many fit."""
    extra = extra or {}
    placed: list[Node] = []
    for name, room in extra.items():
        node = cluster.nodes.get(name)
        if node is not None:
            placed += [node] * slots(node, request, selector, room, count - len(placed))
            if len(placed) >= count:
                return placed
    for node in cluster.candidates(request):
        if node.name in extra:
            continue
        placed += [node] * slots(node, request, selector, None, count - len(placed))
        if len(placed) >= count:
            return placed
    return len(placed)
