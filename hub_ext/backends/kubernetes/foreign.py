"""What the cluster holds that we did not make: pods of other controllers, ResourceQuotas, LimitRanges.

Pods without our workload label (a Deployment, ``kubectl run``, another
operator) take room on nodes and count against their namespace's quotas and
quota-tree leaf, exactly as the cluster sees them; ``Foreign`` follows them
with an ``informer.Informer`` and counts those that hold room (``holds_room``).
``read_limits`` and ``apply_limits`` copy the
namespaces' ResourceQuotas and LimitRanges into the engine, so that a workload
the API server would refuse is refused before it is created, with the same words.
``Foreign.synced`` is set once both were read the first time.
"""

from __future__ import annotations

import asyncio
import json

from ...quota.errors import ValidationError
from ...quota.manifests import parse_object
from ...quota.pods import parse_pod_spec
from .api import LIMIT_RANGE, POD, RESOURCE_QUOTA, Api, KubernetesError
from .informer import Informer, outage_error
from .objects import WORKLOAD_LABEL

#: pods in these phases hold their node's room (a bound Pending pod is being started)
HOLDING = ("Pending", "Running", "Unknown")


def holds_room(obj: dict) -> bool:
    return bool((obj.get("spec") or {}).get("nodeName")) and (obj.get("status") or {}).get("phase", "Pending") in HOLDING


def pod_spec_of(obj: dict):
    """The engine's PodSpec of a cluster pod, or None when it cannot be read (logged by the caller)."""
    meta = obj.get("metadata") or {}
    return parse_pod_spec(obj.get("spec") or {}, f"pod {meta.get('namespace')}/{meta.get('name')}")


def read_limits(api: Api) -> list[tuple]:
    """Every LimitRange and ResourceQuota of the cluster, as ``(kind, object)`` (a blocking call)."""
    return [(kind, obj) for kind in (LIMIT_RANGE, RESOURCE_QUOTA) for obj in api.list(kind)]


def apply_limits(found: list[tuple], controller, applied: dict, log) -> dict:
    """Apply what ``read_limits`` found to the engine and remove what is gone (on the loop).

    ``applied`` maps ``(kind, namespace, name)`` to the spec applied last time (an
    unchanged one is not applied again: a quota's status changes with every pod, its
    spec seldom); returns the new map.
    """
    now = {}
    for kind, obj in found:
        meta = obj.get("metadata") or {}
        key, version = (kind.name, meta.get("namespace"), meta.get("name")), json.dumps(obj.get("spec"), sort_keys=True)
        if key in applied and applied[key] == version:
            now[key] = version
            continue
        try:
            controller.apply_object(parse_object({**obj, "apiVersion": "v1", "kind": kind.name}))
            now[key] = version
        except ValidationError as err:
            log.warning("%s %s/%s is not understood, so it is not checked before creating pods: %s",
                        kind.name, key[1], key[2], err)
            if key in applied:  # it was, before this change: no longer
                controller.remove_object(*key)
    for key in applied.keys() - now.keys():
        controller.remove_object(*key)
    return now


class Foreign:
    """The watch of the pods we did not make, and the copy of the cluster's quotas and limits."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller and calls
        self.watch: Informer | None = None
        self.limits_applied: dict = {}  # what apply_limits applied last
        self.synced = asyncio.Event()  # the first read of foreign pods and of quotas and limits is in
        self.listed = self.limits_read = False

    def start(self, loop) -> None:
        """Watch the pods we did not make (``count_foreign_pods``; without it, there is nothing to list)."""
        backend = self.backend
        if backend.count_foreign_pods:
            self.watch = Informer(backend.api, POD, f"!{WORKLOAD_LABEL}", loop, self.event,
                                  timeout_seconds=backend.relist_seconds, monitor=backend.monitor, log=backend.log,
                                  name="other pods").start()
        else:
            self.listed = True

    async def read_limits(self) -> None:
        """Copy the cluster's ResourceQuotas and LimitRanges into the engine (``sync_cluster_limits``)."""
        backend = self.backend
        if backend.sync_cluster_limits:
            try:
                found = await backend.calls.call(read_limits, backend.api)
                self.limits_applied = apply_limits(found, backend.controller, self.limits_applied, backend.log)
                self.limits_read = True
            except KubernetesError as err:
                if not outage_error(err):
                    backend.log.warning("reading ResourceQuotas and LimitRanges: %s", err)
        else:
            self.limits_read = True
        self.check_synced()

    async def recount(self, namespaces: list[str]) -> None:
        """Count the pods of these namespaces (new tenants': the watch saw them, but they were not ours then)."""
        backend = self.backend
        for namespace in namespaces:
            try:
                pods = await backend.calls.call(backend.api.list, POD, f"!{WORKLOAD_LABEL}", namespace)
            except KubernetesError as err:
                if not outage_error(err):
                    backend.log.warning("listing pods of %s: %s", namespace, err)
                continue
            self.observe_all(pods)

    def observe_all(self, pods: list[dict]) -> set:
        """Count each of these pods that holds room; the uids of those."""
        seen = set()
        for obj in pods:
            uid = (obj.get("metadata") or {}).get("uid")
            if uid and holds_room(obj):
                seen.add(uid)
                self.observe(uid, obj)
        return seen

    def check_synced(self) -> None:
        if self.listed and self.limits_read:
            self.synced.set()

    def event(self, kind: str, obj) -> None:
        controller = self.backend.controller
        if kind == "LIST":
            self.listed = True
            self.check_synced()
            seen = self.observe_all(obj)
            for uid in set(controller.foreign) - seen:
                controller.forget_foreign(uid)
            return
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        if kind == "DELETED" or not holds_room(obj):
            controller.forget_foreign(uid)
        else:
            self.observe(uid, obj)

    def observe(self, uid: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        controller, namespace = self.backend.controller, meta.get("namespace")
        # Room on our nodes, or usage of a namespace we schedule for; nothing else concerns us.
        ours = (obj.get("spec") or {}).get("nodeName") in controller.engine.cluster.nodes
        if not (ours or namespace in controller.engine.quota.leaf_of
                or any(t.namespace == namespace for t in controller.tenants)):
            return
        try:
            spec = pod_spec_of(obj)
        except ValidationError as err:
            self.backend.log.warning("not counting %s: %s", f"{meta.get('namespace')}/{meta.get('name')}", err)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        known = controller.engine.pods.get(controller.foreign.get(uid, -1))
        if known is not None:
            if known.requests == {r: a for r, a in spec.requests().items() if a}:
                return
            controller.forget_foreign(uid)  # resized in place: counted again with what it asks for now
        controller.observe_foreign(uid, namespace, meta.get("name"), spec, node)
