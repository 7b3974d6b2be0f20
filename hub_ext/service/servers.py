"""The backstop for notebooks whose end nobody reported: a notebook whose server the hub no longer
runs (stopped while the service was not told, a hub restart that dropped a pending spawn) gives its
room back once its server has been missing for a grace period."""

from __future__ import annotations

from .identity import SERVICE
from .store import WorkloadRow
from .workloads import NOTEBOOK


class ServerCheck:
    def __init__(self, controller):
        self.c = controller
        self._missing: dict[str, float] = {}  # notebook workload id -> when the hub was first seen without its server

    def reconcile_servers(self, active: set[tuple[str, str]], grace: float) -> list[WorkloadRow]:
        """Notebooks whose server the hub no longer runs give their room back once missing for ``grace``
        seconds. ``active``: ``(user, server name)`` of every server the hub runs or is starting."""
        c = self.c
        now, released = c.clock(), []
        for row in [r for r in c.rows.values() if r.kind == NOTEBOOK]:
            if (row.user, row.spec.get("serverName") or "") in active:
                self._missing.pop(row.id, None)
                continue
            since = self._missing.setdefault(row.id, now)
            if now - since >= grace and now - row.created >= grace:
                self._missing.pop(row.id, None)
                server = row.spec.get("serverName") or ""
                c.admission.cancel(SERVICE, row, by_spawner=True,
                                   why=f"the hub no longer runs {row.user}'s server {server!r}: its room is free again"
                                   if server else f"the hub no longer runs {row.user}'s server: its room is free again")
                released.append(row)
        for wid in [w for w in self._missing if w not in c.rows]:
            del self._missing[wid]
        return released
