"""PriorityClass objects, and the three classes the platform ships with."""

from __future__ import annotations

from dataclasses import dataclass

from . import meta as m
from .errors import ValidationError

PREEMPT = "PreemptLowerPriority"
NEVER = "Never"
# Kubernetes reserves values above one billion for system classes.
MAX_USER_VALUE = 1_000_000_000


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT
    description: str = ""
    builtin: bool = False


# The first seed's classes: production, research, and the default for dev work.
SEED_CLASSES = (
    PriorityClass("critical-prod", 1_000_000, description="Critical production training and serving.", builtin=True),
    PriorityClass("high-priority-research", 500_000, description="Important research experiments.", builtin=True),
    PriorityClass("low-priority-dev", 100_000, True, description="Development, notebooks, other non-urgent work.", builtin=True),
)


def parse_priority_class(obj) -> PriorityClass:
    obj = m.mapping(obj, "PriorityClass")
    meta = m.metadata(obj, "PriorityClass", namespaced=False)
    where = f"PriorityClass {meta.name}"
    if "value" not in obj:
        raise ValidationError(f"{where}: value is missing")
    value = m.integer(obj["value"], f"{where}: value", minimum=-MAX_USER_VALUE)
    if value > MAX_USER_VALUE:
        raise ValidationError(f"{where}: value {value} is above {MAX_USER_VALUE}, reserved for system classes")
    policy = obj.get("preemptionPolicy", PREEMPT)
    if policy not in (PREEMPT, NEVER):
        raise ValidationError(f"{where}: preemptionPolicy must be {PREEMPT} or {NEVER}, got {policy!r}")
    description = obj.get("description", "")
    if not isinstance(description, str):
        raise ValidationError(f"{where}: description must be a string")
    return PriorityClass(
        meta.name, value, m.boolean(obj.get("globalDefault", False), f"{where}: globalDefault"), policy, description
    )


class PriorityClasses:
    """The cluster's classes by name; starts with the seed classes.

    Applying a class replaces the one of the same name. Only one class may be
    the global default: a user's default takes over from a built-in one, and a
    second user default is refused, as the API server refuses it.
    """

    def __init__(self, classes=SEED_CLASSES):
        self.by_name: dict[str, PriorityClass] = {}
        for pc in classes:
            self.apply(pc)

    def apply(self, pc: PriorityClass) -> None:
        if pc.global_default:
            current = self.default()
            if current is not None and current.name != pc.name:
                if not current.builtin:
                    raise ValidationError(
                        f"PriorityClass {pc.name}: {current.name} is already the global default; only one may be"
                    )
                self.by_name[current.name] = PriorityClass(
                    current.name, current.value, False, current.preemption_policy, current.description, True
                )
        self.by_name[pc.name] = pc

    def delete(self, name: str) -> None:
        self.by_name.pop(name, None)

    def default(self) -> PriorityClass | None:
        return next((pc for pc in self.by_name.values() if pc.global_default), None)

    def resolve(self, name: str | None) -> PriorityClass | None:
        """The class a pod gets: by name, else the global default (``None``: priority 0)."""
        if not name:
            return self.default()
        pc = self.by_name.get(name)
        if pc is None:
            raise ValidationError(f"no PriorityClass with name {name} was found")
        return pc
