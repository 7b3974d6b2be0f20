"""Workloads as the API, the pages and the event stream show them, and the listeners told of changes.

A view is the workload's row with what only the live state knows: each waiting
pod's place in the queue, what the cluster says of an admitted pod that does not
run yet, the countdown of an evicted notebook, and what blocks admissions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..quota.quantity import format_list
from ..scheduler.model import Phase
from .store import WorkloadRow
from .workloads import FINAL


class Views:
    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store, self.owners = controller.engine, controller.store, controller.owners

    def views(self, rows) -> list[dict]:
        """``view`` of many rows (the queue's positions are worked out once, by the engine, if one waits)."""
        return [self.view(r) for r in rows]

    async def views_async(self, rows, chunk: int = 50) -> list[dict]:
        """``views``, ``chunk`` rows per turn of the event loop: a page of 500 rows made at once held
        the loop for a tenth of a second with 10,000 queued."""
        out = []
        for start in range(0, len(rows), chunk):
            if start:
                await asyncio.sleep(0)
            out += self.views(rows[start:start + chunk])
        return out

    def view(self, row: WorkloadRow, *, events: bool = False, positions: Callable[[], dict] | None = None) -> dict:
        """What people and clients read of a workload. ``positions``: what gives the queue's places
        (``engine.positions`` unless told), asked only when one of its pods waits: with 5,000 queued they cost
        milliseconds to work out after each change of the queue, and most views are of work that runs."""
        c = self.c
        owner = self.owners.get(row.id)
        live = {p.name: p for p in (owner.pods if owner else [])}
        queued = any(p.phase is Phase.PENDING for p in live.values())
        positions = (positions or self.engine.positions)() if queued else {}
        observed = c.observed
        pods = []
        for prow in row.pods:
            item = {"name": prow.name, "phase": prow.phase, "node": prow.node, "created": prow.created,
                    "startedAt": prow.admitted_at, "finishedAt": prow.finished_at, **(prow.reason or {})}
            pod = live.get(prow.name)
            if pod is not None and pod.uid in positions:
                item["position"], item["leafPosition"] = positions[pod.uid]
            seen = observed.get(pod.uid) if pod is not None and pod.phase is Phase.RUNNING else None
            if seen is not None and seen[0] != "Running":  # admitted, not running on the cluster (yet)
                item["phase"], item["node"], item["message"] = seen[0], seen[1], seen[2]
                item["reason"] = _cluster_reason(seen)
            pods.append(item)
        current = [p for p in pods if p["phase"] not in ("Deleted",)]
        waiting = [p for p in current if p["phase"] in ("Pending", "Rejected")]
        head = waiting[0] if waiting else (current[-1] if current else {})
        out = {
            "id": row.id, "kind": row.kind, "name": row.name, "user": row.user, "namespace": row.namespace,
            "tenant": row.tenant, "priorityClassName": row.spec.get("priorityClassName"),
            "state": row.state, "created": row.created, "finished": row.finished,
            "replicas": row.spec.get("replicas", 1), "gang": bool(row.spec.get("gang")), "succeeded": row.succeeded,
            "resources": row.spec.get("resources"), "serverName": row.spec.get("serverName"),
            "reason": head.get("reason"), "message": head.get("message"), "details": head.get("details"),
            "position": head.get("position"), "leafPosition": head.get("leafPosition"),
            "pods": pods, "datasets": c.datasets.uses(row),
        }
        held = c.datasets.held.get(row.id) if row.state == "Pending" else None
        if held is not None and not waiting:  # held back before the engine: no pod waits, the dataset does
            out["reason"], out["message"], out["details"] = held.code, held.message, held.details
        warned = row.id in c.evicting  # its countdown runs: it is running until it ends
        if out["state"] == "Running" and current and not any(
                p["phase"] == "Running" or (warned and p["phase"] == "Terminating") for p in current):
            out["state"] = "Pending"  # "Running" means what the cluster says
        if out["state"] == "Pending" and c.health.blocking:
            out["reason"], out["message"] = "service-blocked", \
                f"{c.health.blocking[0]} (nothing is admitted until this is fixed)"
        evicting = c.evicting.get(row.id) if row.state not in FINAL else None
        if evicting is not None:
            out["evictionDeadline"], out["evictionMessage"] = evicting["deadline"], evicting["message"]
        withdrawn = c.withdrawn.get(row.id) if row.state not in FINAL else None
        if withdrawn is not None:  # the countdown that stopped says why
            out["evictionWithdrawn"] = withdrawn
        if events:
            out["events"] = [{"time": e.time, "type": e.type, "message": e.message, **({"details": e.details} if e.details else {})}
                             for e in self.store.events(row.id)]
        return out

    def notices(self, user: str, hours: float = 24) -> list[dict]:
        """The user's notebooks preempted lately: who took the room, and when."""
        since = self.c.clock() - hours * 3600
        out = []
        for row in self.store.workloads(user=user, namespaces=[], state="Preempted", limit=100)[0]:
            if row.state != "Preempted" or (row.finished or 0) < since:
                continue
            event = next((e for e in reversed(self.store.events(row.id)) if e.type in ("preempted", "reclaimed")), None)
            if event is not None:
                out.append({"workload": row.id, "name": row.name, "serverName": row.spec.get("serverName") or "",
                            "time": event.time, "message": event.message, **(event.details or {})})
        return out

    def quota_view(self) -> dict:
        return {name: {"min": format_list(v["min"]), "max": format_list(v["max"]), "used": format_list(v["used"])}
                for name, v in self.engine.quota.report().items()}

    def notify(self, workload_ids) -> None:
        """Tell the listeners (the event stream's) of the workloads ``workload_ids`` as they are now."""
        listeners = self.c.listeners
        if not listeners:
            return
        for wid in workload_ids:
            if wid is None:
                continue
            row = self.store.workload(wid)
            if row is None:
                continue
            message = {"type": "workload", "workload": self.view(row)}
            for queue in list(listeners):
                queue.put_nowait(message)


def _cluster_reason(seen: tuple) -> str:
    """The reason code of a pod admitted but not running on the cluster (``pod_observed``)."""
    phase, node, message = seen
    if phase == "Terminating":
        return "terminating"
    return "waiting-for-kube-scheduler" if not node else "waiting-for-node"
