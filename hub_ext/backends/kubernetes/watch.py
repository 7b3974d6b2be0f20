"""What the cluster holds that we did not make: pods of other controllers, ResourceQuotas, LimitRanges.

Pods without our workload label (a Deployment, ``kubectl run``, another
operator) take room on nodes and count against their namespace's quotas and
quota-tree leaf, exactly as the cluster sees them; the backend follows them
with an ``informer.Informer`` and counts those that hold room (``holds_room``).
``read_limits`` and ``apply_limits`` copy the
namespaces' ResourceQuotas and LimitRanges into the engine, so that a workload
the API server would refuse is refused before it is created, with the same words.
"""

from __future__ import annotations

import json

from ...quota.errors import ValidationError
from ...quota.manifests import parse_object
from ...quota.pods import parse_pod_spec
from .api import LIMIT_RANGE, RESOURCE_QUOTA, Api

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
