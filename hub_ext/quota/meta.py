"""Shared shape checks for Kubernetes-style objects: mappings, names, metadata."""

from __future__ import annotations

import math
import re

from .errors import ValidationError
from .quantity import _kind, _show

# RFC 1123 label (namespaces) and subdomain (most object names).
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def mapping(value, what: str, *, optional: bool = False) -> dict:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(f"{what}: expected a mapping, got {_kind(value)}")
    return value


def sequence(value, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(f"{what}: expected a list, got {_kind(value)}")
    return value


def string(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what}: expected a non-empty string, got {_show(value)}")
    return value


# Kubernetes integer fields are int32/int64; nothing we schedule needs more than int32.
MAX_INT = 2**31 - 1
# Ten years: any longer duration is a typo, and floats lose seconds beyond it.
MAX_SECONDS = 10 * 365 * 24 * 3600


def integer(value, what: str, *, minimum: int | None = 0, maximum: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what}: expected an integer, got {_show(value)}")
    if minimum is not None and value < minimum:
        raise ValidationError(f"{what}: {value} must be at least {minimum}")
    if value > maximum:
        raise ValidationError(f"{what}: {_show(value)} is larger than {maximum}")
    return value


def boolean(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{what}: expected true or false, got {_show(value)}")
    return value


def namespace_name(value, what: str) -> str:
    string(value, what)
    if len(value) > 63 or not _LABEL.match(value):
        raise ValidationError(f"{what}: {_show(value)} is not a valid namespace name (lowercase letters, digits and '-', at most 63)")
    return value


def label_name(value, what: str, noun: str) -> str:
    """A DNS-1123 label that names a ``noun`` (it becomes part of other objects' names)."""
    string(value, what)
    if len(value) > 63 or not _LABEL.match(value):
        raise ValidationError(f"{what}: {_show(value)} is not a valid {noun} (DNS-1123 label: lowercase letters, digits and '-', at most 63)")
    return value


def object_name(value, what: str) -> str:
    string(value, what)
    if len(value) > 253 or not _SUBDOMAIN.match(value):
        raise ValidationError(f"{what}: {_show(value)} is not a valid name (DNS-1123: lowercase letters, digits, '-' and '.', at most 253)")
    return value


def string_map(value, what: str) -> dict[str, str]:
    value = mapping(value, what, optional=True)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ValidationError(f"{what}: keys and values must be strings, got {_show(key)}: {_show(item)}")
    return value


def unknown_keys(obj: dict, allowed: set[str], what: str) -> None:
    extra = [k for k in obj if k not in allowed]
    if extra:
        raise ValidationError(f"{what}: unknown field {_show(extra[0])} (known: {', '.join(sorted(allowed))})")


class Meta:
    """The parts of ``metadata`` scheduling needs."""

    __slots__ = ("name", "namespace", "labels", "annotations")

    def __init__(self, name, namespace, labels, annotations):
        self.name = name
        self.namespace = namespace
        self.labels = labels
        self.annotations = annotations


def metadata(obj: dict, kind: str, *, namespaced: bool, default_namespace: str = "default") -> Meta:
    meta = mapping(obj.get("metadata"), f"{kind}: metadata")
    name = meta.get("name")
    if name is None and kind == "Pod" and isinstance(meta.get("generateName"), str):
        name = meta["generateName"].rstrip("-") or None
    object_name(name, f"{kind} metadata.name")
    where = f"{kind} {name}"
    namespace = None
    if namespaced:
        namespace = meta.get("namespace", default_namespace)
        namespace_name(namespace, f"{where}: metadata.namespace")
        where = f"{kind} {namespace}/{name}"
    labels = string_map(meta.get("labels"), f"{where}: metadata.labels")
    annotations = string_map(meta.get("annotations"), f"{where}: metadata.annotations")
    return Meta(name, namespace, labels, annotations)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}


def duration(value, what: str) -> float:
    """Seconds from ``30s`` / ``5m`` / ``1h`` / ``1.5`` (seconds)."""
    if isinstance(value, bool):
        raise ValidationError(f"{what}: {_show(value)} is not a duration (expected e.g. 30s, 5m, 1h)")
    if isinstance(value, (int, float)) and value >= 0:
        seconds = float(value) if value < 2 * MAX_SECONDS else math.inf
    else:
        match = _DURATION.match(value) if isinstance(value, str) else None
        if not match:
            raise ValidationError(f"{what}: {_show(value)} is not a duration (expected e.g. 30s, 5m, 1h)")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not seconds <= MAX_SECONDS:  # also catches inf and nan
        raise ValidationError(f"{what}: {_show(value)} is longer than ten years")
    return seconds
