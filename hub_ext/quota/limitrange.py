"""LimitRange: per-container and per-pod defaults and bounds, applied as the API server applies them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import meta as m
from .errors import ValidationError
from .pods import Container, PodSpec
from .quantity import ResourceList, format_milli, parse_resource_list

CONTAINER, POD, PVC = "Container", "Pod", "PersistentVolumeClaim"


@dataclass(frozen=True)
class LimitRangeItem:
    type: str
    max: ResourceList = field(default_factory=dict)
    min: ResourceList = field(default_factory=dict)
    default: ResourceList = field(default_factory=dict)
    default_request: ResourceList = field(default_factory=dict)
    max_ratio: ResourceList = field(default_factory=dict)


@dataclass(frozen=True)
class LimitRange:
    namespace: str
    name: str
    items: tuple[LimitRangeItem, ...]


def parse_limit_range(obj) -> LimitRange:
    obj = m.mapping(obj, "LimitRange")
    meta = m.metadata(obj, "LimitRange", namespaced=True)
    where = f"LimitRange {meta.namespace}/{meta.name}"
    spec = m.mapping(obj.get("spec"), f"{where}: spec")
    items = []
    for i, raw in enumerate(m.sequence(spec.get("limits"), f"{where}: spec.limits")):
        at = f"{where}: limits[{i}]"
        raw = m.mapping(raw, at)
        kind = raw.get("type")
        if kind not in (CONTAINER, POD, PVC):
            raise ValidationError(f"{at}: type must be Container, Pod or PersistentVolumeClaim, got {kind!r}")
        item = LimitRangeItem(
            kind,
            parse_resource_list(raw.get("max"), f"{at}: max"),
            parse_resource_list(raw.get("min"), f"{at}: min"),
            parse_resource_list(raw.get("default"), f"{at}: default"),
            parse_resource_list(raw.get("defaultRequest"), f"{at}: defaultRequest"),
            parse_resource_list(raw.get("maxLimitRequestRatio"), f"{at}: maxLimitRequestRatio"),
        )
        if kind != CONTAINER and (item.default or item.default_request):
            raise ValidationError(f"{at}: default and defaultRequest are only allowed for type Container")
        items.append(_with_api_defaults(item, at))
    return LimitRange(meta.namespace, meta.name, tuple(items))


def _with_api_defaults(item: LimitRangeItem, where: str) -> LimitRangeItem:
    """SetDefaults_LimitRangeItem: default limit <- max; default request <- default limit, else min."""
    if item.type != CONTAINER:
        return item
    default = dict(item.default)
    for res, value in item.max.items():
        default.setdefault(res, value)
    request = dict(item.default_request)
    for res, value in default.items():
        request.setdefault(res, value)
    for res, value in item.min.items():
        request.setdefault(res, value)
    for res, low in item.min.items():
        high = item.max.get(res)
        if high is not None and low > high:
            raise ValidationError(f"{where}: min {res} {format_milli(res, low)} exceeds max {format_milli(res, high)}")
    for res, value in request.items():
        if value > default.get(res, value):
            raise ValidationError(
                f"{where}: defaultRequest {res} {format_milli(res, value)} exceeds default limit "
                f"{format_milli(res, default[res])}"
            )
    return replace(item, default=default, default_request=request)


def apply_limit_ranges(spec: PodSpec, ranges, pod: str) -> PodSpec:
    """Fill defaults into containers, then check every bound; raise the API server's message on violation."""
    items = [item for lr in ranges for item in lr.items]
    if not items:
        return spec
    defaulted = []
    for c in spec.all_containers():
        requests, limits = dict(c.requests), dict(c.limits)
        for item in items:
            if item.type != CONTAINER:
                continue
            for res, value in item.default.items():
                limits.setdefault(res, value)
            for res, value in item.default_request.items():
                requests.setdefault(res, value)
        defaulted.append(Container(c.name, requests, limits, c.init))
    spec = spec.with_containers([c for c in defaulted if not c.init], [c for c in defaulted if c.init])
    _check_requests_within_limits(spec, pod)
    for item in items:
        if item.type == CONTAINER:
            for c in spec.all_containers():
                _check(item, "Container", c.requests, c.limits, pod)
        elif item.type == POD:
            _check(item, "Pod", spec.requests(), spec.limits(), pod)
    return spec


def _check_requests_within_limits(spec: PodSpec, pod: str) -> None:
    """A default limit below what a container requests makes the pod invalid (the API server's 422,
    a common surprise: ``cpu: 15`` requested, the LimitRange's default limit is 1)."""
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(containers):
            for res, request in c.requests.items():
                limit = c.limits.get(res)
                if limit is not None and request > limit:
                    raise ValidationError(
                        f'Pod "{pod}" is invalid: spec.{kind}[{i}].resources.requests: Invalid value: '
                        f'"{format_milli(res, request)}": must be less than or equal to {res} limit of '
                        f'{format_milli(res, limit)} (set a limit, or ask for the LimitRange\'s default limit to be raised)')


def _check(item: LimitRangeItem, scope: str, requests: ResourceList, limits: ResourceList, pod: str) -> None:
    def fail(text):
        raise ValidationError(f'pods "{pod}" is forbidden: {text}')

    for res, low in item.min.items():
        if res not in requests:
            fail(f"minimum {res} usage per {scope} is {format_milli(res, low)}, but no request is specified")
        if requests[res] < low:
            fail(f"minimum {res} usage per {scope} is {format_milli(res, low)}, but request is {format_milli(res, requests[res])}")
    for res, high in item.max.items():
        if res not in limits:
            fail(f"maximum {res} usage per {scope} is {format_milli(res, high)}, but no limit is specified")
        if limits[res] > high:
            fail(f"maximum {res} usage per {scope} is {format_milli(res, high)}, but limit is {format_milli(res, limits[res])}")
    for res, ratio in item.max_ratio.items():
        request, limit = requests.get(res, 0), limits.get(res)
        if limit is None or request == 0:
            fail(f"{res} max limit to request ratio per {scope} is {format_milli(res, ratio)}, but no request or limit is specified")
        if limit * 1000 > ratio * request:
            fail(
                f"{res} max limit to request ratio per {scope} is {format_milli(res, ratio)}, "
                f"but provided ratio is {limit / request:.6f}"
            )
