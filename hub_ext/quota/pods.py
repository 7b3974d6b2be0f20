"""Pod specs down to what scheduling needs: containers' requests and limits, priority, grace."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import meta as m
from .errors import ValidationError
from .priorityclass import NEVER, PREEMPT
from .quantity import ResourceList, format_milli, parse_resource_list

DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True)
class Container:
    name: str
    requests: ResourceList
    limits: ResourceList
    init: bool = False


@dataclass(frozen=True)
class PodSpec:
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    overhead: ResourceList = field(default_factory=dict)
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    active_deadline_seconds: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)

    def all_containers(self):
        return self.init_containers + self.containers

    def with_containers(self, containers, init_containers) -> "PodSpec":
        return replace(self, containers=tuple(containers), init_containers=tuple(init_containers))

    def requests(self) -> ResourceList:
        return _effective(self, "requests")

    def limits(self) -> ResourceList:
        return _effective(self, "limits")


def _effective(spec: PodSpec, attr: str) -> ResourceList:
    """Kubernetes' effective pod amount: max(sum of containers, largest init container) + overhead."""
    total: ResourceList = {}
    for c in spec.containers:
        for k, v in getattr(c, attr).items():
            total[k] = total.get(k, 0) + v
    for c in spec.init_containers:
        for k, v in getattr(c, attr).items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in spec.overhead.items():
        total[k] = total.get(k, 0) + v
    return total


def parse_pod_spec(raw, where: str) -> PodSpec:
    raw = m.mapping(raw, f"{where}: spec")
    containers = tuple(_containers(raw.get("containers"), f"{where}: containers", init=False))
    if not containers:
        raise ValidationError(f"{where}: spec.containers must list at least one container")
    init = tuple(_containers(raw.get("initContainers"), f"{where}: initContainers", init=True))
    names = [c.name for c in init + containers]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ValidationError(f"{where}: container name {dup!r} is used twice")
    pcn = raw.get("priorityClassName")
    if pcn is not None:
        m.object_name(pcn, f"{where}: priorityClassName")
    policy = raw.get("preemptionPolicy")
    if policy is not None and policy not in (PREEMPT, NEVER):
        raise ValidationError(f"{where}: preemptionPolicy must be {PREEMPT} or {NEVER}, got {policy!r}")
    grace = raw.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    deadline = raw.get("activeDeadlineSeconds")
    return PodSpec(
        containers=containers,
        init_containers=init,
        overhead=parse_resource_list(raw.get("overhead"), f"{where}: overhead"),
        priority_class_name=pcn,
        preemption_policy=policy,
        grace_seconds=m.integer(grace, f"{where}: terminationGracePeriodSeconds", maximum=m.MAX_SECONDS),
        active_deadline_seconds=None if deadline is None else m.integer(
            deadline, f"{where}: activeDeadlineSeconds", minimum=1, maximum=m.MAX_SECONDS),
        node_selector=m.string_map(raw.get("nodeSelector"), f"{where}: nodeSelector"),
    )


def _containers(raw_list, what: str, *, init: bool):
    for i, raw in enumerate(m.sequence(raw_list, what)):
        raw = m.mapping(raw, f"{what}[{i}]")
        name = m.string(raw.get("name"), f"{what}[{i}].name")
        where = f"{what[: what.rfind(':')]}: container {name}"
        resources = m.mapping(raw.get("resources"), f"{where}: resources", optional=True)
        requests = parse_resource_list(resources.get("requests"), f"{where}: requests")
        limits = parse_resource_list(resources.get("limits"), f"{where}: limits")
        # API-server defaulting: a limit without a request sets the request.
        for res, limit in limits.items():
            requests.setdefault(res, limit)
        for res, request in requests.items():
            limit = limits.get(res)
            if limit is not None and request > limit:
                raise ValidationError(
                    f"{where}: requests {res} {format_milli(res, request)} must be less than or equal to "
                    f"its limit {format_milli(res, limit)}"
                )
        yield Container(name, requests, limits, init)
