"""How the objects we make are labelled and named, and how the provisioner's are built and compared. No I/O.

Training pods (of our Jobs, or bare) carry ``tenancy.jupyter.org/workload=<id>``
and ``app.kubernetes.io/managed-by=jupyterhub-tenancy``; the spawner puts the
same workload label on notebook pods, and a pod without it is not ours
(``foreign``). A Job's pods carry the Job controller's ``job-name`` and
``controller-uid`` labels; ``key_of`` names the object of ours a pod belongs to.

The provisioner's ownership is a label pair:
``app.kubernetes.io/managed-by=jupyterhub-tenancy`` and
``tenancy.jupyter.org/instance=<instance>`` (one cluster may serve several hubs).
Objects also carry the annotation ``tenancy.jupyter.org/provisioned-by`` and, for a
tenant's objects, ``tenancy.jupyter.org/group`` with the hub group's exact name
(a label value cannot hold every group name).

Comparison looks only at what the provisioner owns (``differences``): its label and
annotation keys, and per kind the fields it sets. Labels others add are kept; the
fields it sets are restored. Quantities compare by value (``"1000m"`` equals
``"1"``), and LimitRange items after the API server's own defaulting, by the same
parsers the scheduler uses.
"""

from __future__ import annotations

import copy
import hashlib
import re

from ...quota.errors import ValidationError
from ...quota.limitrange import parse_limit_range
from ...quota.priorityclass import PREEMPT
from ...quota.resourcequota import parse_resource_quota
from .api import Kind

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyterhub-tenancy"
INSTANCE = "tenancy.jupyter.org/instance"
TENANT = "tenancy.jupyter.org/tenant"
QUOTA_LEAF = "tenancy.jupyter.org/quota-leaf"
SHARED = "tenancy.jupyter.org/shared"
OWNED_LABELS = (MANAGED_BY, INSTANCE, TENANT, QUOTA_LEAF, SHARED)

PROVISIONED_BY = "tenancy.jupyter.org/provisioned-by"
GROUP = "tenancy.jupyter.org/group"
OWNED_ANNOTATIONS = (PROVISIONED_BY, GROUP)

RBAC = "rbac.authorization.k8s.io"

#: the engine workload a pod of ours (training or notebook) runs for
WORKLOAD_LABEL = "tenancy.jupyter.org/workload"
#: the pods the backend made (training pods: of our Jobs, or bare), and our Jobs
OURS = f"{MANAGED_BY}={MANAGER},{WORKLOAD_LABEL}"
# The Job controller's labels on its pods; these (unprefixed) names are set by every version
# (the batch.kubernetes.io/ ones only since 1.27).
JOB_NAME_LABEL = "job-name"
JOB_UID_LABEL = "controller-uid"

#: The first seed's ``ml-developer`` Role, verbatim.
DEVELOPER_RULES = [
    {"apiGroups": ["", "apps", "batch"], "resources": ["pods", "deployments", "jobs", "services"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get", "list"]},
]

#: Read-only access to the shared production namespace.
VIEWER_RULES = [
    {"apiGroups": ["", "apps", "batch"], "resources": ["pods", "deployments", "jobs", "services", "pods/log"],
     "verbs": ["get", "list", "watch"]},
]

#: The first seed's ``dev-quota``.
DEV_QUOTA = {
    "requests.cpu": "20", "requests.memory": "100Gi", "limits.cpu": "40", "limits.memory": "200Gi",
    "requests.nvidia.com/gpu": "4", "pods": "10",
}

#: Container defaults, so that a pod that declares nothing is admitted by a quota on
#: cpu and memory (the API server requires every container to declare them).
DEFAULT_LIMITS = [
    {"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}, "default": {"cpu": "1", "memory": "2Gi"}},
]

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """``text`` if it is a valid label value, else a readable, unique stand-in (``data-science-1f3a9c2b``)."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:54].strip("-_.")
    return f"{stem}-{digest}" if stem else digest


def key_of(pod: dict) -> tuple[str, str]:
    """(namespace, name of our object) for a pod of ours: its Job's name, or its own for a bare Pod."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return meta.get("namespace"), labels.get(JOB_NAME_LABEL) or labels.get("batch.kubernetes.io/job-name") \
        or meta.get("name")


def key(obj: dict) -> tuple[str, str | None, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace"), meta["name"]


def describe_key(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


class Marker:
    """Stamps and recognises the objects of one provisioner instance."""

    def __init__(self, instance: str):
        self.instance = instance

    @property
    def selector(self) -> str:
        return f"{MANAGED_BY}={MANAGER},{INSTANCE}={label_value(self.instance)}"

    def manifest(self, kind: Kind, name: str, namespace: str | None = None, *, group: str | None = None,
                 labels: dict | None = None, **fields) -> dict:
        meta = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        meta["labels"] = {MANAGED_BY: MANAGER, INSTANCE: label_value(self.instance), **(labels or {})}
        meta["annotations"] = {PROVISIONED_BY: f"{MANAGER} (instance {self.instance}); changes to what it sets are reverted"}
        if group is not None:
            meta["labels"][TENANT] = label_value(group)
            meta["annotations"][GROUP] = group
        return {"apiVersion": kind.group_version, "kind": kind.name, "metadata": meta, **fields}

    def owner(self, obj: dict) -> str | None:
        """``None`` if the object is ours; otherwise who it belongs to, for a conflict message."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY) != MANAGER:
            return "it was not created by jupyterhub-tenancy (no app.kubernetes.io/managed-by=jupyterhub-tenancy label)"
        if labels.get(INSTANCE) != label_value(self.instance):
            return f"it belongs to another jupyterhub-tenancy instance ({INSTANCE}={labels.get(INSTANCE)!r})"
        return None


def group_of(obj: dict) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(GROUP)


# ---------------------------------------------------------------------- comparison
def _rules(rules) -> list:
    keys = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")
    return [{k: list(r[k]) for k in keys if r.get(k)} for r in rules or []]


def _subjects(subjects) -> list:
    return sorted(({k: v for k, v in s.items() if v} for s in subjects or []), key=lambda s: sorted(s.items()))


def _quota_view(obj: dict):
    try:
        quota = parse_resource_quota(obj)
    except ValidationError as err:  # nothing we would write: certainly different
        return str(err)
    return quota.hard, quota.scopes


def _limit_range_view(obj: dict):
    try:
        return parse_limit_range(obj).items  # with the API server's defaults filled in
    except ValidationError as err:
        return str(err)


def _non_empty(value):
    return {k: v for k, v in value.items() if v} if isinstance(value, dict) else value


#: Per kind, the top-level fields the provisioner sets, each with how to compare it.
FIELDS = {
    "Namespace": {},
    "Role": {"rules": lambda obj: _rules(obj.get("rules"))},
    "RoleBinding": {"subjects": lambda obj: _subjects(obj.get("subjects")),
                    "roleRef": lambda obj: _non_empty(obj.get("roleRef"))},
    "ResourceQuota": {"spec": _quota_view},
    "LimitRange": {"spec": _limit_range_view},
    "PriorityClass": {"value": lambda obj: obj.get("value"),
                      "globalDefault": lambda obj: bool(obj.get("globalDefault")),
                      "description": lambda obj: obj.get("description") or "",
                      "preemptionPolicy": lambda obj: obj.get("preemptionPolicy") or PREEMPT},
}

#: Fields the API server does not let an update change: the object is recreated instead.
IMMUTABLE_FIELDS = {"RoleBinding": ("roleRef",), "PriorityClass": ("value",)}


def differences(desired: dict, live: dict, *, metadata: bool = True) -> list[str]:
    """What ``live`` has otherwise than ``desired``, among what the provisioner owns:
    ``labels``, ``annotations`` (only its own keys) and the names of the fields it sets."""
    out = []
    if metadata:
        for part, owned in (("labels", OWNED_LABELS), ("annotations", OWNED_ANNOTATIONS)):
            want = (desired["metadata"].get(part) or {})
            have = ((live.get("metadata") or {}).get(part) or {})
            if any(want.get(k) != have.get(k) for k in owned):
                out.append(part)
    out.extend(name for name, view in FIELDS[desired["kind"]].items() if view(desired) != view(live))
    return out


def needs_recreate(changed: list[str], kind: str) -> bool:
    """Whether a field the API server will not update changed (a binding's roleRef, a class's value)."""
    return any(f in changed for f in IMMUTABLE_FIELDS.get(kind, ()))


def merged(desired: dict, live: dict) -> dict:
    """``live`` with what the provisioner owns taken from ``desired`` (for a PUT)."""
    out = copy.deepcopy(live)
    meta = out.setdefault("metadata", {})
    meta.pop("managedFields", None)
    for part, owned in (("labels", OWNED_LABELS), ("annotations", OWNED_ANNOTATIONS)):
        values = {k: v for k, v in (meta.get(part) or {}).items() if k not in owned}
        values.update(desired["metadata"].get(part) or {})
        meta[part] = values
    for field in FIELDS[desired["kind"]]:
        if field in desired:
            out[field] = copy.deepcopy(desired[field])
        else:
            out.pop(field, None)
    out.pop("status", None)
    return out


def validate(obj: dict) -> None:
    """Raise ``ValidationError`` (one line) if a desired object is malformed (bad config)."""
    if obj["kind"] == "ResourceQuota":
        parse_resource_quota(obj)
    elif obj["kind"] == "LimitRange":
        parse_limit_range(obj)

