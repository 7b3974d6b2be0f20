"""The words and numbers people read, in one place for every Python screen.

The notebook's line and widget, the command line, the spawn form and the hub's pages all
say a state, an amount or a time the same way. tests/vocabulary.json fixes each form; the
TypeScript of the pages and the Lab extension is tested against the same table, so both
languages keep saying the same thing.
"""

from __future__ import annotations

import math
import time

NAMES = {"cpu": "CPU", "memory": "memory", "nvidia.com/gpu": "GPU", "pods": "pods"}
STATE_WORDS = {"Pending": "queued", "Running": "running", "Succeeded": "done", "Failed": "failed",
               "Cancelled": "cancelled", "Stopped": "stopped", "Preempted": "stopped to make room",
               "Rejected": "refused", "Quarantined": "set aside"}
#: A dataset's state in a namespace (the backends' Bound / Pending / Refused), as people read it.
DATASET_WORDS = {"Bound": "ready", "Pending": "not ready yet", "Refused": "refused"}
#: Shown where a time is not known.
NO_TIME = "—"


def resource_name(resource: str) -> str:
    """``CPU``, ``memory``, ``GPU``; any other resource by its own name."""
    return NAMES.get(resource, resource)


def _half_up(value: float) -> int:
    # JavaScript's Math.round, so that both vocabularies round 0.125 and 2.5 alike.
    return math.floor(value + 0.5)


def _trim(value: float) -> str:
    """At most two decimals, none when whole (``2.5``, ``0.33``, ``5``)."""
    rounded = _half_up(value * 100) / 100
    return str(int(rounded)) if rounded == int(rounded) else str(rounded)


def in_bytes(resource: str) -> bool:
    return resource == "memory" or resource.endswith("storage") or resource.endswith(".memory")


def amount(resource: str, value: float) -> str:
    """A base-unit amount as people read it: cores and devices as numbers, bytes in GiB (MiB below one)."""
    if in_bytes(resource):
        gib = value / 2**30
        return f"{_trim(gib)} GiB" if gib >= 1 or value == 0 else f"{_trim(value / 2**20)} MiB"
    return _trim(value)


def quantity(resource: str, text) -> str:
    """A Kubernetes quantity as the service wrote it (``"4Gi"``, ``"500m"``), as people read it; junk as is."""
    # Here, not at the top: the parser brings the kubernetes package, which the command line's
    # other words do not need.
    from .quota.errors import ValidationError
    from .quota.quantity import MILLI, parse_quantity

    try:
        return amount(resource, parse_quantity(text, resource) / MILLI)
    except ValidationError:
        return str(text)


def amounts(resources: dict) -> str:
    """``5 CPU, 4 GiB memory`` for a mapping of resource to quantity text ("" when empty)."""
    return ", ".join(f"{quantity(r, v)} {resource_name(r)}" for r, v in (resources or {}).items())


def duration(seconds: float) -> str:
    """``45 s``, ``1 min 5 s``, ``2 h 5 min``: what is left out is zero."""
    s = max(0, _half_up(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    minutes = s % 3600 // 60
    return f"{s // 3600} h" + (f" {minutes} min" if minutes else "")


def countdown(seconds: float) -> str:
    """``1:05`` left; a part of a second still counts as one, so ``0:00`` means over."""
    s = max(0, math.ceil(seconds))
    return f"{s // 60}:{s % 60:02d}"


def time_of_day(epoch: float) -> str:
    """``14:03:27``, local time."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def when(epoch: float | None, now: float | None = None) -> str:
    """The time of day for today, with the date before it for another day; ``—`` when not known."""
    if not epoch:
        return NO_TIME
    day = time.localtime(epoch)[:3]
    today = time.localtime(time.time() if now is None else now)[:3]
    return time_of_day(epoch) if day == today else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def state_word(state: str, reason: str | None = "") -> str:
    """``queued``, ``running``, ``stopped to make room``...; a queued workload that never fits ``cannot start``."""
    if state == "Pending" and reason == "inadmissible":
        return "cannot start"
    if state == "Pending" and reason == "dataset-not-ready":
        return "waiting for its data"
    return STATE_WORDS.get(state, state.lower())


def dataset_state(state: str) -> str:
    """``ready``, ``not ready yet``, ``refused``: a dataset in a namespace; any other state in lower case."""
    return DATASET_WORDS.get(state, str(state).lower())


def sentence(text: str | None) -> str:
    """The text as a sentence: capital first, full stop last unless it ends a sentence already."""
    text = (text or "").strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?)" else text + "."


def bar_text(bar: dict) -> str:
    """``CPU 12/10 (+2 borrowed) of 20``: used against the guarantee, what is borrowed, the ceiling."""
    r = bar["resource"]
    text = f"{resource_name(r)} {amount(r, bar['used'])}/{amount(r, bar['min'])}"
    if bar["borrowed"] > 0:
        text += f" (+{amount(r, bar['borrowed'])} borrowed)"
    if bar["max"] is not None:
        text += f" of {amount(r, bar['max'])}"
    return text


def position(workload: dict) -> str:
    """``position 2 in the queue, 1 in your team`` for a queued workload with a place; else ""."""
    if workload.get("state") != "Pending" or not workload.get("position"):
        return ""
    return f"position {workload['position']} in the queue, {workload.get('leafPosition')} in your team"
