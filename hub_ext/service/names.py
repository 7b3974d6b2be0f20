"""People's names for workloads, in sentences people read: "bob's notebook (Large)", "alice's job train-3"."""

from __future__ import annotations

from .workloads import NOTEBOOK


def named(row) -> str:
    """What a person calls the workload of ``row``: whose, what, and the notebook's profile or server."""
    spec = row.spec or {}
    if row.kind == NOTEBOOK:
        server = spec.get("serverName") or ""
        profile = (spec.get("profile") or "").replace("-", " ").replace("_", " ")
        what = f"{row.user}'s notebook" + (f" {server!r}" if server else "")
        return what + (f" ({profile[:1].upper() + profile[1:]})" if profile else "")
    return f"{row.user}'s job {row.name}"
