"""The cluster's Nodes as the engine's capacity: read, watched, judged usable, reported.

Capacity is the Nodes matching ``node_label_selector``, followed by a watch: a
node that joins adds its room, one that is cordoned, not Ready, tainted against
our pods or resized changes it at once, one that is deleted takes its pods with
it (the controller queues them again). When no usable node is left the
controller's health says why, in one line.
"""

from __future__ import annotations

import asyncio

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from .api import NODE, KubernetesError
from .informer import Informer, outage_error


class Nodes:
    """The node watch of a ``KubernetesBackend`` and what it last read of each node."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller and monitor
        self.watch: Informer | None = None
        self.objs: dict[str, dict] = {}
        # What was read of each node last: (its facts, its NodeSpec, usable). A kubelet's heartbeat changes
        # none of the facts; with a hundred nodes those events come several a second, each left unparsed.
        self.read: dict[str, tuple] = {}
        self.error: KubernetesError | None = None  # why the last read of the Nodes failed

    def now(self):
        """The Ready, schedulable Nodes matching ``node_label_selector`` now (empty when the API server
        does not answer: the node watch adds them once it does)."""
        backend = self.backend
        query = {"labelSelector": backend.node_label_selector or None}
        try:
            items = backend.api.request("GET", NODE.path(), query=query).get("items") or []
        except KubernetesError as err:
            self.error = err
            if outage_error(err):
                backend.monitor.failed(err, "reading nodes")
            return []
        self.error = None
        out = []
        for node in items:
            self.objs[node["metadata"]["name"]] = node
            spec = self.spec(node)
            if spec is not None and self.usable(node):
                out.append(spec)
        return out

    def spec(self, node: dict):
        """The engine's NodeSpec of a Node (None, logged, when it cannot be read)."""
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        allocatable = {k: v for k, v in (status.get("allocatable") or status.get("capacity") or {}).items()
                       if k != "pods" and not k.startswith("hugepages-")}
        try:
            return parse_node({"name": meta["name"], "allocatable": allocatable, "labels": meta.get("labels") or {}},
                              f"Node {meta.get('name')}")
        except ValidationError as err:
            self.backend.log.warning("not counting node %s: %s", meta.get("name"), err)
            return None

    def usable(self, node: dict) -> bool:
        """Ready, not cordoned, and no NoSchedule/NoExecute taint our pods do not tolerate."""
        spec, status = node.get("spec") or {}, node.get("status") or {}
        if spec.get("unschedulable"):
            return False
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") != "True":
            return False
        for taint in spec.get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                    _tolerates(t, taint) for t in self.backend.tolerations):
                return False
        return True

    def ensure_watched(self) -> None:
        if self.watch is None:
            backend = self.backend
            self.watch = Informer(backend.api, NODE, backend.node_label_selector or None, asyncio.get_running_loop(),
                                  self.event, timeout_seconds=backend.relist_seconds, monitor=backend.monitor,
                                  log=backend.log, name="nodes").start()

    def event(self, kind: str, obj) -> None:
        if kind == "LIST":
            now = {n["metadata"]["name"]: n for n in obj}
            for name in set(self.objs) - set(now):
                self.gone(name)
            self.objs = now
            for node in obj:
                self.seen(node)
        elif kind == "DELETED":
            name = obj["metadata"]["name"]
            self.objs.pop(name, None)
            self.gone(name)
        else:
            self.objs[obj["metadata"]["name"]] = obj
            self.seen(obj)
        self.report()

    def seen(self, obj: dict) -> None:
        controller = self.backend.controller
        name = obj["metadata"]["name"]
        facts = _node_facts(obj)
        read = self.read.get(name)
        if read is not None and read[0] == facts:
            spec, usable = read[1], read[2]
        else:
            spec = self.spec(obj)
            usable = self.usable(obj)
            self.read[name] = (facts, spec, usable)
        if spec is None:
            return
        known = controller.engine.cluster.nodes.get(spec.name)
        if known is None:
            if usable:
                controller.add_nodes([spec])
            return
        alloc = dict(spec.allocatable)
        alloc.pop("pods", None)
        if known.allocatable != alloc or known.labels != spec.labels or known.schedulable != usable:
            controller.node_changed(spec, usable)

    def gone(self, name: str) -> None:
        self.read.pop(name, None)
        controller = self.backend.controller
        if name in controller.engine.cluster.nodes:
            controller.node_removed(name)

    def tell(self, health) -> None:
        """Say on the health why the Nodes could not be read (an outage is the monitor's to say)."""
        if self.error is not None and not outage_error(self.error):
            health.set("nodes", f"cannot read the cluster's Nodes: {self.error}")

    def report(self) -> None:
        """Tell the controller's health whether any node is usable (and, when none is, why)."""
        health = getattr(self.backend.controller, "health", None)
        if health is None:
            return
        if any(read[2] for read in self.read.values()):
            health.set("nodes", None)
            return
        selector = self.backend.node_label_selector
        which = f"match node_label_selector {selector!r}" if selector else "exist"
        health.set("nodes", f"no Ready, schedulable Node {'matches' if selector else 'exists'}"
                            f" ({len(self.objs)} {which}, none Ready, uncordoned and free of taints our "
                            "pods do not tolerate): label nodes for KubernetesBackend.node_label_selector, or fix it")


def _node_facts(node: dict) -> tuple:
    """What ``Nodes.spec`` and ``Nodes.usable`` read of a node: its size, labels, cordon, taints and Ready status."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (status.get("allocatable"), status.get("capacity"), meta.get("labels"), spec.get("unschedulable"),
            spec.get("taints"), ready)


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Whether a toleration (as in a pod spec) tolerates a node's taint."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")
