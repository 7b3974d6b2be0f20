"""What the cluster holds that we did not make: pods of other controllers, ResourceQuotas, LimitRanges.

Pods without our workload label (a Deployment, ``kubectl run``, another
operator) take room on nodes and count against their namespace's quotas and
quota-tree leaf, exactly as the cluster sees them. ``PodWatch`` lists them once
and then follows a watch from that ``resourceVersion`` (listing again when the
watch expires or the server answers 410 Gone), in a daemon thread, handing
every change to the controller's event loop. ``read_limits`` and ``apply_limits`` copy the
namespaces' ResourceQuotas and LimitRanges into the engine, so that a workload
the API server would refuse is refused before it is created, with the same words.
"""

from __future__ import annotations

import json
import threading

from ...quota.errors import ValidationError
from ...quota.manifests import parse_object
from ...quota.pods import parse_pod_spec
from .api import LIMIT_RANGE, POD, RESOURCE_QUOTA, Api

#: pods in these phases hold their node's room (a bound Pending pod is being started)
HOLDING = ("Pending", "Running", "Unknown")


def holds_room(obj: dict) -> bool:
    return bool((obj.get("spec") or {}).get("nodeName")) and (obj.get("status") or {}).get("phase", "Pending") in HOLDING


class PodWatch:
    """List + watch of the pods matching ``selector`` in every namespace, reported to ``on_event``.

    ``on_event(kind, obj)`` runs on ``loop``: kind is ``"LIST"`` (obj: every pod,
    as a list) or ``"ADDED"``/``"MODIFIED"``/``"DELETED"`` (obj: one pod).
    """

    def __init__(self, api: Api, selector: str, loop, on_event, *, timeout_seconds: int = 300, log=None):
        self.api, self.selector, self.loop, self.on_event = api, selector, loop, on_event
        self.timeout_seconds = max(1, int(timeout_seconds))
        self.log = log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tenancy-pod-watch", daemon=True)

    def start(self) -> "PodWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _emit(self, kind: str, obj) -> bool:
        try:
            self.loop.call_soon_threadsafe(self.on_event, kind, obj)
            return True
        except RuntimeError:  # the loop is closed: the service is gone
            return False

    def _run(self) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api.api_client)
        while not self._stop.is_set():
            try:
                listed = self.api.request("GET", POD.path(), query={"labelSelector": self.selector})
                if not self._emit("LIST", listed.get("items") or []):
                    return
                version = (listed.get("metadata") or {}).get("resourceVersion")
                stream = watch.Watch()
                for event in stream.stream(core.list_pod_for_all_namespaces, label_selector=self.selector,
                                           resource_version=version, timeout_seconds=self.timeout_seconds):
                    if self._stop.is_set():
                        stream.stop()
                        return
                    kind, obj = event.get("type"), event.get("raw_object")
                    if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                        if not self._emit(kind, obj):
                            return
            except Exception as err:  # noqa: BLE001 - 410 Gone, a dropped connection: list again
                if self.log is not None and getattr(err, "status", None) != 410:
                    self.log.warning("watching pods: %s", " ".join(str(err).split())[:300])
                self._stop.wait(1.0)


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
