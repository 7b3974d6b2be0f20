"""How long a waiting workload may still wait, from what the service has seen (``GET
api/v1/workloads/{id}/estimate``; the hub's waiting page words it).

The basis is the team's own history: the waits of its earlier work of the same kind and the same size
(same requests) that had to queue (``QUEUED_SECONDS`` or more between submission and admission), newest
first, at most ``SAMPLES`` of them. With none seen there is no estimate, and the answer says so
(``samples: 0``): a guess from other teams' work or other sizes would mislead more than it helps.
"""

from __future__ import annotations

from statistics import median

from .handlers import APIHandler

#: A wait shorter than this was an admission at the next turn of the loop, not a wait in the queue.
QUEUED_SECONDS = 2.0
#: The most recent similar waits looked at.
SAMPLES = 20
#: How many of the team's latest workloads of the kind are looked through for them.
LOOK_BACK = 300
#: An answer is kept this long (seconds) for every waiting workload of the same team, kind and size: each waiting
#: server asks when its place changes, and one admission moves them all (the look-back reads the store).
KEEP_SECONDS = 2.0


def waited(row) -> float | None:
    """Seconds from the workload's submission to its first admission, or None (never admitted)."""
    admitted = [p.admitted_at for p in row.pods if p.admitted_at is not None]
    return min(admitted) - row.created if admitted else None


def similar(row, other) -> bool:
    return (other.id != row.id and other.namespace == row.namespace and other.kind == row.kind
            and (other.spec.get("resources") or {}).get("requests") == (row.spec.get("resources") or {}).get("requests"))


def estimate(waits: list[float]) -> dict:
    """``{"samples": n, "medianSeconds", "lowSeconds", "highSeconds"}`` of the waits seen (newest first),
    or ``{"samples": 0}``."""
    seen = [w for w in waits if w >= QUEUED_SECONDS][:SAMPLES]
    if not seen:
        return {"samples": 0}
    return {"samples": len(seen), "medianSeconds": round(median(seen), 1), "lowSeconds": round(min(seen), 1),
            "highSeconds": round(max(seen), 1)}


class EstimateHandler(APIHandler):
    async def get(self, wid):
        c = self.controller
        row = self.workload_or_404(wid)  # the caller's teams' only
        key = (row.namespace, row.kind, repr((row.spec.get("resources") or {}).get("requests")))
        keep = self.application.settings.setdefault("wait_estimates", {})  # this service's own
        kept = keep.get(key)
        if kept is None or c.clock() - kept[0] > KEEP_SECONDS:
            rows, _ = c.store.workloads(namespaces=[row.namespace], kind=row.kind, limit=LOOK_BACK)
            kept = keep[key] = (c.clock(), estimate([w for w in (waited(r) for r in rows if similar(row, r))
                                                      if w is not None]))
            if len(keep) > 1000:  # teams x sizes: bounded all the same
                keep.pop(next(iter(keep)))
        view = c.view(row)
        self.send({"id": row.id, "state": view["state"], "position": view.get("position"),
                   "leafPosition": view.get("leafPosition"), "tenant": row.tenant, **kept[1]})



def estimate_routes(prefix: str) -> list:
    return [(prefix.rstrip("/") + r"/api/v1/workloads/([0-9a-f]+)/estimate", EstimateHandler)]
