"""The readable side-by-side table of ``tenancy whatif`` (and the one-team blocks ``tenancy usage`` prints)."""

from __future__ import annotations

from .. import vocabulary
from ..vocabulary import in_bytes, resource_name


def duration(seconds) -> str:
    """The vocabulary's ``1 min 30 s`` every screen uses; ``-`` where there is none."""
    return "-" if seconds is None else vocabulary.duration(float(seconds))


def resource_hours(values: dict | None) -> str:
    """``{"cpu": 12.5, "memory": 3.2e12}`` as ``CPU 12.5 h, memory 0.7 GiB-h``."""
    if not values:
        return "-"
    parts = []
    for res, hours in values.items():
        if in_bytes(res):
            parts.append(f"{resource_name(res)} {hours / 2**30:.3g} GiB-h")
        else:
            parts.append(f"{resource_name(res)} {hours:.3g} h")
    return ", ".join(parts)


def percent(values: dict | None) -> str:
    return ", ".join(f"{resource_name(res)} {v * 100:.1f}%" for res, v in (values or {}).items()) or "-"


TEAM_LINES = (
    ("wait p50", "wait_p50_s", duration),
    ("wait p95", "wait_p95_s", duration),
    ("evictions suffered", "evictions_suffered", str),
    ("evictions caused", "evictions_caused", str),
    ("used", "used_hours", resource_hours),
    ("borrowed", "borrowed_hours", resource_hours),
    ("lent", "lent_hours", resource_hours),
    ("below guarantee while others borrowed", "below_guarantee_s", duration),
    ("never started", "never_started", str),
)
CLUSTER_LINES = (("utilisation", "utilisation", percent), ("idle", "idle_hours", resource_hours))


def _cell(values: dict | None, key: str, fmt) -> str:
    if values is None:
        return "(no such team)"
    value = values.get(key)
    return fmt(value) if value is not None or fmt is duration else "-"


def side_by_side(rows: list[dict]) -> str:
    """One block per team, then the cluster's: each measure under the current tree and the proposed one."""
    blocks = []
    for row in rows:
        team = row["scope"] == "team"
        lines = TEAM_LINES if team else CLUSTER_LINES
        title = f"team {row['name']}" if team else "cluster"
        cells = [(label, _cell(row["current"], key, fmt), _cell(row["proposed"], key, fmt)) for label, key, fmt in lines]
        w0 = max(len(title), *(len(c[0]) + 2 for c in cells))
        w1 = max(len("current tree"), *(len(c[1]) for c in cells))
        block = [f"{title:<{w0}}  {'current tree':<{w1}}  proposed tree"]
        block += [f"  {label:<{w0 - 2}}  {cur:<{w1}}  {new}" for label, cur, new in cells]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)
