"""Kubernetes quantities and resource lists.

Quantities are parsed with the ``kubernetes`` client's parser and stored as
integers in *milli-units* (``"500m"`` cpu -> 500, ``"2"`` -> 2000, ``"1Ki"``
memory -> 1024000). Integers keep arithmetic exact and fast on the hot path;
fractions below a milli-unit round up, as Kubernetes' ``MilliValue`` does.

A resource list is a plain ``dict[str, int]``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import format_quantity, parse_quantity as _k8s_parse

from .errors import ValidationError

ResourceList = dict[str, int]

MILLI = 1000

# A resource name is a Kubernetes qualified name (optionally prefixed, as in
# nvidia.com/gpu); quota keys may add "requests." / "limits." / "count/".
_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

# Kubernetes' quantity grammar (apimachinery resource.Quantity): a signed decimal,
# then a binary or decimal SI suffix or a decimal exponent.
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")

# Resources whose natural unit is bytes: formatted with binary suffixes.
_BYTES = ("memory", "ephemeral-storage", "storage")


def check_resource_name(name, what: str) -> str:
    if not isinstance(name, str) or len(name) > 253 or not _NAME.match(name):
        raise ValidationError(f"{what}: {name!r} is not a valid resource name")
    return name


def parse_quantity(value, what: str) -> int:
    """Parse one quantity into milli-units; ``what`` names it in errors."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ValidationError(f"{what}: {_show(value)} is not a quantity (expected e.g. 500m, 2, 10Gi)")
    if isinstance(value, float):
        value = repr(value)  # a YAML float means what it says: 0.1 is 100m, not 0.1000000000000000055...
    if isinstance(value, str) and not _QUANTITY.match(value.strip()):
        raise ValidationError(f"{what}: {_show(value)} is not a quantity (expected e.g. 500m, 2, 10Gi)")
    try:
        number = _k8s_parse(value.strip() if isinstance(value, str) else value)
    except (ValueError, InvalidOperation, ArithmeticError):
        raise ValidationError(f"{what}: {_show(value)} is not a quantity (expected e.g. 500m, 2, 10Gi)") from None
    if not number.is_finite():
        raise ValidationError(f"{what}: {_show(value)} is not a finite quantity")
    if number < 0:
        raise ValidationError(f"{what}: {_show(value)} must not be negative")
    # Above 2**63 milli-units nothing real is meant; Kubernetes caps there too.
    if number > 2**63 // MILLI:
        raise ValidationError(f"{what}: {_show(value)} is too large")
    return int(math.ceil(number * MILLI))


def parse_resource_list(mapping, what: str) -> ResourceList:
    """Parse ``{resource: quantity}``; ``None`` is the empty list."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise ValidationError(f"{what}: expected a mapping of resource to quantity, got {_kind(mapping)}")
    out: ResourceList = {}
    for name, value in mapping.items():
        check_resource_name(name, what)
        out[name] = parse_quantity(value, f"{what} {name}")
    return out


def format_milli(resource: str, milli: int) -> str:
    """Canonical text for a milli-unit amount of ``resource`` (``20000`` cpu -> ``"20"``)."""
    if milli % MILLI:
        return f"{milli}m"
    whole = milli // MILLI
    if resource in _BYTES or resource.startswith("hugepages-") or resource.endswith(".memory"):
        for suffix, power in (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1)):
            if whole and whole % (1024**power) == 0:
                return format_quantity(Decimal(whole), suffix)
    return str(whole)


def format_list(resources: ResourceList) -> dict[str, str]:
    return {name: format_milli(name, value) for name, value in sorted(resources.items())}


def describe(resources: ResourceList) -> str:
    """``cpu=5, memory=1Gi`` for messages."""
    return ", ".join(f"{k}={v}" for k, v in format_list(resources).items()) or "nothing"


def add_into(target: ResourceList, other: ResourceList, sign: int = 1) -> None:
    for name, value in other.items():
        target[name] = target.get(name, 0) + sign * value


def _kind(value) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
