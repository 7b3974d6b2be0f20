"""Checks at submission, as the API server's admission makes them.

A pod is refused at once (never left silently pending) when its PriorityClass
does not exist, when a LimitRange bound is broken, or when admitting it would
push a ResourceQuota of its namespace over ``hard``, counting every
non-terminal pod, pending ones included.
"""

from __future__ import annotations

from ..quota.errors import ValidationError
from ..quota.limitrange import apply_limit_ranges
from ..quota.pods import PodSpec
from ..quota.priorityclass import NEVER, PriorityClass, PriorityClasses
from ..quota.resourcequota import exceeded_message, missing_declarations, usage_of
from .model import INVALID, LIMIT_RANGE, RESOURCE_QUOTA, Reason


class Refused(Exception):
    def __init__(self, reason: Reason):
        super().__init__(reason.message)
        self.reason = reason


def resolve_priority(spec: PodSpec, classes: PriorityClasses, pod: str) -> tuple[PriorityClass | None, int, bool]:
    """(class, value, may preempt) for a pod spec."""
    try:
        pc = classes.resolve(spec.priority_class_name)
    except ValidationError as err:
        raise Refused(Reason(INVALID, f'pods "{pod}" is forbidden: {err}', {"priorityClassName": spec.priority_class_name})) from None
    policy = spec.preemption_policy or (pc.preemption_policy if pc else None)
    return pc, (pc.value if pc else 0), policy != NEVER


def apply_limits(spec: PodSpec, ranges, pod: str) -> PodSpec:
    try:
        return apply_limit_ranges(spec, ranges, pod)
    except ValidationError as err:
        raise Refused(Reason(LIMIT_RANGE, str(err), {"limitRanges": [lr.name for lr in ranges]})) from None


def charge_quotas(spec: PodSpec, requests, limits, priority_class: str | None, quotas, used, pod: str) -> dict:
    """What the pod adds to each matching quota; refuse when a quota would be exceeded.

    ``used`` maps quota name to its current usage; it is not modified.
    """
    charges = {}
    for quota in quotas:
        if not quota.matches(spec, priority_class):
            continue
        keys = quota.tracked()
        if not keys:
            continue
        missing = missing_declarations(quota, spec)
        if missing:
            raise Refused(
                Reason(
                    RESOURCE_QUOTA,
                    f'pods "{pod}" is forbidden: failed quota: {quota.name}: must specify {missing}',
                    {"quota": quota.name},
                )
            )
        need = usage_of(spec, requests, limits, keys)
        over = exceeded_message(quota, need, used.get(quota.name, {}))
        if over:
            raise Refused(Reason(RESOURCE_QUOTA, f'pods "{pod}" is forbidden: {over}', {"quota": quota.name}))
        charges[quota.name] = need
    return charges


def charge_gang_quotas(spec: PodSpec, requests, limits, priority_class: str | None, quotas, used, count: int,
                       gang: str, pod: str) -> dict:
    """``charge_quotas`` for a gang of ``count`` pods of one spec, judged whole: what each pod adds to
    each matching quota; refuse all of them when the gang together would exceed a quota."""
    charges = charge_quotas(spec, requests, limits, priority_class, quotas, {}, pod)
    for quota in quotas:
        need = charges.get(quota.name)
        if need is None:
            continue
        together = {key: amount * count for key, amount in need.items()}
        over = exceeded_message(quota, together, used.get(quota.name, {}))
        if over:
            raise Refused(Reason(RESOURCE_QUOTA, f'gang {gang} ({count} pods) is forbidden: {over}',
                                 {"quota": quota.name, "gang": gang, "pods": count}))
    return charges
