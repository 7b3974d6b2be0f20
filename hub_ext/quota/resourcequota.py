"""ResourceQuota: namespace hard caps, checked at submission as the API server checks them.

Every non-terminal pod of the namespace counts, pending ones included. Only
pod-level resources are enforced (``pods``, ``count/pods``, ``cpu``,
``memory``, ``requests.*``, ``limits.*``); object counts of other kinds
(``count/services`` ...) are accepted and not tracked here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import meta as m
from .errors import ValidationError
from .pods import PodSpec
from .quantity import MILLI, ResourceList, check_resource_name, format_milli, parse_quantity

# Quota keys for which every container must declare the amount ("must specify").
_MUST_SPECIFY = {
    "cpu": ("requests", "cpu"),
    "memory": ("requests", "memory"),
    "requests.cpu": ("requests", "cpu"),
    "requests.memory": ("requests", "memory"),
    "limits.cpu": ("limits", "cpu"),
    "limits.memory": ("limits", "memory"),
}
_SCOPES = {"BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "PriorityClass"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


@dataclass(frozen=True)
class ScopeRequirement:
    scope: str
    operator: str = "Exists"
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceQuota:
    namespace: str
    name: str
    hard: ResourceList
    scopes: tuple[ScopeRequirement, ...] = field(default=())

    def tracked(self) -> list[str]:
        return [k for k in self.hard if pod_key(k)]

    def matches(self, spec: PodSpec, priority_class: str | None) -> bool:
        return all(_scope_matches(s, spec, priority_class) for s in self.scopes)


def pod_key(key: str) -> bool:
    """Whether a quota key is about pods (and so enforced by the scheduler)."""
    return key in ("pods", "count/pods", "cpu", "memory", "ephemeral-storage") or key.startswith(
        ("requests.", "limits.")
    ) and key not in ("requests.storage",)


def parse_resource_quota(obj) -> ResourceQuota:
    obj = m.mapping(obj, "ResourceQuota")
    meta = m.metadata(obj, "ResourceQuota", namespaced=True)
    where = f"ResourceQuota {meta.namespace}/{meta.name}"
    spec = m.mapping(obj.get("spec"), f"{where}: spec")
    raw_hard = m.mapping(spec.get("hard"), f"{where}: spec.hard", optional=True)
    hard: ResourceList = {}
    for key, value in raw_hard.items():
        name = key[len("count/"):] if isinstance(key, str) and key.startswith("count/") else key
        if isinstance(name, str) and name.startswith(("requests.", "limits.")):
            name = name.split(".", 1)[1]
        check_resource_name(name, f"{where}: spec.hard")
        amount = parse_quantity(value, f"{where}: spec.hard {key}")
        if key in ("pods", "count/pods") and amount % MILLI:
            raise ValidationError(f"{where}: spec.hard {key} must be a whole number, got {value!r}")
        hard[key] = amount
    scopes = [ScopeRequirement(m.string(s, f"{where}: spec.scopes")) for s in m.sequence(spec.get("scopes"), f"{where}: spec.scopes")]
    selector = m.mapping(spec.get("scopeSelector"), f"{where}: spec.scopeSelector", optional=True)
    for i, raw in enumerate(m.sequence(selector.get("matchExpressions"), f"{where}: scopeSelector.matchExpressions")):
        raw = m.mapping(raw, f"{where}: matchExpressions[{i}]")
        values = m.sequence(raw.get("values"), f"{where}: matchExpressions[{i}].values")
        scopes.append(ScopeRequirement(
            m.string(raw.get("scopeName"), f"{where}: matchExpressions[{i}].scopeName"),
            m.string(raw.get("operator"), f"{where}: matchExpressions[{i}].operator"),
            tuple(m.string(v, f"{where}: matchExpressions[{i}].values") for v in values),
        ))
    for s in scopes:
        if s.scope not in _SCOPES:
            raise ValidationError(f"{where}: unknown scope {s.scope!r} (known: {', '.join(sorted(_SCOPES))})")
        if s.operator not in _OPERATORS:
            raise ValidationError(f"{where}: scope operator must be one of {', '.join(sorted(_OPERATORS))}, got {s.operator!r}")
        if s.operator in ("In", "NotIn") and not s.values:
            raise ValidationError(f"{where}: scope {s.scope} with operator {s.operator} needs values")
    return ResourceQuota(meta.namespace, meta.name, hard, tuple(scopes))


def _scope_matches(s: ScopeRequirement, spec: PodSpec, priority_class: str | None) -> bool:
    if s.scope in ("BestEffort", "NotBestEffort"):
        best_effort = not any(c.requests or c.limits for c in spec.all_containers())
        return best_effort == (s.scope == "BestEffort")
    if s.scope in ("Terminating", "NotTerminating"):
        return (spec.active_deadline_seconds is not None) == (s.scope == "Terminating")
    # PriorityClass scope
    if s.operator == "Exists":
        return bool(priority_class)
    if s.operator == "DoesNotExist":
        return not priority_class
    return (priority_class in s.values) == (s.operator == "In")


def usage_of(spec: PodSpec, requests: ResourceList, limits: ResourceList, keys) -> ResourceList:
    """What one pod adds to each tracked quota key."""
    out: ResourceList = {}
    for key in keys:
        if key in ("pods", "count/pods"):
            out[key] = MILLI
        elif key.startswith("requests."):
            out[key] = requests.get(key[9:], 0)
        elif key.startswith("limits."):
            out[key] = limits.get(key[7:], 0)
        else:
            out[key] = requests.get(key, 0)
    return out


def missing_declarations(quota: ResourceQuota, spec: PodSpec) -> str | None:
    """The API server's "must specify" text when a tracked cpu/memory amount is undeclared."""
    parts = []
    for key in sorted(quota.hard):
        if key not in _MUST_SPECIFY:
            continue
        attr, res = _MUST_SPECIFY[key]
        missing = [c.name for c in spec.all_containers() if res not in getattr(c, attr)]
        if missing:
            parts.append(f"{key} for: {','.join(missing)}")
    return "; ".join(parts) or None


def exceeded_message(quota: ResourceQuota, need: ResourceList, used: ResourceList) -> str | None:
    over = [k for k in sorted(need) if need[k] and used.get(k, 0) + need[k] > quota.hard[k]]
    if not over:
        return None

    def show(amounts):
        return ",".join(f"{k}={_fmt(k, amounts.get(k, 0))}" for k in over)

    return (
        f"exceeded quota: {quota.name}, requested: {show(need)}, used: {show(used)}, "
        f"limited: {show(quota.hard)}"
    )


def _fmt(key: str, value: int) -> str:
    return format_milli(key.split(".", 1)[-1].split("/", 1)[-1], value)
