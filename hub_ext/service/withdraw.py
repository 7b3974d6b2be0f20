"""Warned evictions taken back when their reason goes away.

A notebook evicted by a backend with a warning window (the local backend's
``notebook_warning_seconds``) keeps running while its user is warned. If the
reason goes away inside the warning (the preemptor was cancelled or queued again,
or another pod's end left room for the preemptor beside it), nobody is stopped
for nothing: the backend's eviction is cancelled, the notebook runs on (its
countdown ends, its history says why) and the preemptor, if still waiting,
starts now. Evictions already under way (a job's processes signalled, a pod on
Kubernetes evicted through the API server) cannot be taken back and run out.
"""

from __future__ import annotations

from .names import named
from .workloads import NOTEBOOK

# A warning this close to its end is not taken back: the backend may be stopping the server already.
MARGIN_SECONDS = 1.0


class Withdrawals:
    def __init__(self, controller):
        self.c = controller

    def withdraw(self, now: float) -> set[str]:
        """Take back every needless eviction that can be; returns the workloads touched."""
        c = self.c
        engine = c.engine
        if not engine.cluster.leaving_nodes or c.backend.notebook_warning_seconds is None:
            return set()  # nothing terminates, or no eviction waits out a warning: none can be taken back
        touched: set[str] = set()
        for victims, preemptor in engine.needless_evictions():
            rows = [self._row(v) for v in victims]
            if not rows or not all(self._warned(row, now) for row in rows):
                continue
            for row in {r.id: r for r in rows}.values():
                entry = c.evicting.pop(row.id)
                entry["task"].cancel()
            started = engine.withdraw_eviction(victims, preemptor, now)
            for row in {r.id: r for r in rows}.values():
                why = self._why(row, preemptor)
                c.store.record(now, "eviction-withdrawn", why, row.id)
                c.withdrawn[row.id] = {"time": now, "message": why}
                touched.add(row.id)
            for pod in victims:
                c.books.sync_pod(pod)
            for pod in started:
                c.loop.start(pod, now)
                touched.add(c.books.wid(pod))
        return touched

    def _row(self, pod):
        prow = self.c.pod_rows.get(pod.uid)
        return self.c.rows.get(prow.workload_id) if prow else None

    def _warned(self, row, now: float) -> bool:
        """Whether ``row`` is a notebook still inside its warning window (its server not touched yet)."""
        if row is None or row.kind != NOTEBOOK or self.c.backend.notebook_warning_seconds is None:
            return False
        entry = self.c.evicting.get(row.id)
        task = entry.get("task") if entry else None
        return task is not None and not task.done() and entry["deadline"] - now > MARGIN_SECONDS

    def _why(self, row, preemptor) -> str:
        """The sentence the notebook's history (and its countdown's end) shows."""
        keeps = f"{named(row)} is not stopped: it keeps running."
        if preemptor is None:
            return f"The warning is withdrawn: the work that needed its room no longer waits for it; {keeps}"
        taker = self._row(preemptor)
        return f"The warning is withdrawn: room was freed elsewhere and " \
               f"{named(taker) if taker is not None else 'the work that needed it'} starts beside it; {keeps}"
