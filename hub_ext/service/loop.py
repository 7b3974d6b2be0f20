"""The scheduling loop: after every change one pass (``tick``) reconciles owners, asks the engine,
starts the admitted pods and evicts the victims through the backend, writes the rows and commits once.

Changes ask for a pass with ``poke``: for the workloads they concern, or for all of
them after a change that may concern any (a tree, nodes, health). Submissions that
wait for their decision (``decide``) are answered after the pass's one commit.
"""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import inspect as sa_inspect

from ..scheduler.model import Phase
from .store import PodRow, WorkloadRow
from .names import named
from .withdraw import Withdrawals
from .workloads import NOTEBOOK


class Loop:
    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store, self.books = controller.engine, controller.store, controller.books
        self.rows, self.owners, self.pod_rows = controller.rows, controller.owners, controller.pod_rows
        self._dirty = asyncio.Event()
        # What the next tick looks at: the workloads that changed (submitted, a pod ended or was lost,
        # an eviction done), or all of them after a change that may concern any (a tree, nodes, health).
        self.changed: set[str] = set()
        self._full = True
        # Workloads with a pod the API server refused (a ResourceQuota, say), by namespace: their owner
        # tries again, as a ReplicaSet or Job controller retries, on the passes after a quota's usage
        # went down in that namespace (a pod deleted or ended, a quota changed: ``engine.quota_freed``),
        # which needs no change to the workload itself. Thousands refused wait at no cost per pass.
        self._retrying: dict[str, set[str]] = {}
        self._waiters: list[tuple[WorkloadRow, asyncio.Future]] = []  # submissions waiting for a tick's commit
        self._positions: dict | None = None  # queue positions as of the last tick (see queue_positions)
        self.looping = False  # run() is ticking
        self.withdrawals = Withdrawals(controller)

    def poke(self, workload_ids=None) -> None:
        """Ask for a tick: for the workloads ``workload_ids`` (and what is queued), or, without them,
        for every active workload (after a change that may concern any)."""
        if workload_ids is None:
            self._full = True
        else:
            self.changed.update(w for w in workload_ids if w is not None)
        self._dirty.set()

    async def decide(self, row: WorkloadRow) -> None:
        """Return once a pass has decided on the submitted ``row`` and committed it, with the other
        submissions of that pass (one commit for all: a group commit)."""
        done = asyncio.get_running_loop().create_future()
        self._waiters.append((row, done))
        self.poke([row.id])
        await done

    def queue_positions(self) -> dict:
        """``engine.positions()`` as of the last tick, worked out once for the answers of its submissions."""
        if self._positions is None:
            self._positions = self.engine.positions()
        return self._positions

    async def run(self, interval: float = 1.0) -> None:
        self.looping = True
        try:
            await self._run(interval)
        finally:
            self.looping = False
            for _, done in self._waiters:
                if not done.done():
                    done.cancel()
            self._waiters = []

    async def _run(self, interval: float) -> None:
        while True:
            # asyncio.wait, not wait_for: before Python 3.12, wait_for swallows a cancellation that comes
            # as the event is set, and the service would never stop.
            waiter = asyncio.ensure_future(self._dirty.wait())
            try:
                await asyncio.wait({waiter}, timeout=interval)
            finally:
                waiter.cancel()
            self._dirty.clear()
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad tick must not stop scheduling
                self.c.log.exception("scheduling pass failed")

    def tick(self) -> None:
        """One scheduling pass: reconcile the workloads that changed (all of them after a ``poke()``
        without ids), ask the engine, start and evict, write what changed, commit once."""
        c, engine, books, rows = self.c, self.engine, self.books, self.rows
        now = c.clock()
        started = time.perf_counter()
        full, self._full = self._full, False
        waiters, self._waiters = self._waiters, []
        touched: set[str] = set()
        seen: set[str] = set()
        waited: list = []  # pods the engine looked at that still wait
        self._positions = None
        try:
            for _ in range(100):
                freed, engine.quota_freed = engine.quota_freed, set()
                changed, self.changed = self.changed, set()
                for namespace in freed:
                    waiting = self._retrying.get(namespace, set())
                    waiting.intersection_update(rows)  # those that ended meanwhile
                    changed |= waiting
                seen |= changed
                for wid in list(rows) if full else changed:
                    row = rows.get(wid)
                    if row is not None:
                        self.reconcile(row, now)
                touched |= self.withdrawals.withdraw(now)
                # While a blocking problem lasts (a start-up check, the API server away) nothing is admitted.
                decisions = engine.schedule(now) if not c.health.blocking else None
                if decisions is not None:
                    waited += decisions.waited
                if not decisions:
                    break
                for pod in decisions.admitted:
                    self.start(pod, now)
                    touched.add(books.wid(pod))
                for ev in decisions.evictions:
                    c._evict(ev, now)
                    touched.add(books.wid(ev.victim))
                for pod in decisions.nominated:
                    touched.add(books.wid(pod))
            if c.metrics is not None:
                c.metrics.observe_tick(time.perf_counter() - started)
            for wid in list(rows) if full else seen | touched:
                row = rows.get(wid)
                if row is None:
                    continue
                before = row.state
                books.sync(row)
                if row.state != before:  # e.g. a job that finished: its watchers hear it
                    touched.add(row.id)
            # Waiting pods the engine looked at may wait for another reason now: their rows say so. Only
            # those: the others kept theirs (going over the whole queue cost every pass milliseconds).
            reasons, pod_rows = books.reasons, self.pod_rows
            for pod in waited:
                if pod.phase is Phase.PENDING and pod.node is None and \
                        pod.reason is not reasons.get(pod.uid, False) and pod.uid in pod_rows:
                    books.sync_pod(pod)
                    touched.add(books.wid(pod))
            self.store.commit()
            lost = [row for row, _ in waiters if not sa_inspect(row).persistent]
            if lost:  # rolled back by someone else (a failed history sample) before this commit: again
                for row in lost:
                    self.store.add(row)
                self.store.commit()
        except BaseException as err:
            if waiters:
                self.store.rollback()
                for row, done in waiters:
                    books.drop(row.id)
                    if not done.done():
                        done.set_exception(err if isinstance(err, Exception) else RuntimeError("stopped"))
            raise
        for _, done in waiters:
            if not done.done():
                done.set_result(None)
        c.viewer.notify(touched - {None})

    def reconcile(self, row: WorkloadRow, now: float) -> None:
        """The workload's owner makes the pods it lacks (a new pod of a Job, one refused before)."""
        owner = self.owners.get(row.id)
        if owner is None or self.c.datasets.hold(row, owner, now):  # a dataset it names is not ready
            return
        before = {p.uid for p in owner.pods}
        owner.reconcile(self.engine, now)
        if any(p.phase is Phase.REJECTED for p in owner.pods):
            self._retrying.setdefault(row.namespace, set()).add(row.id)
        elif row.id in self._retrying.get(row.namespace, ()):
            self._retrying[row.namespace].discard(row.id)
        pod_rows = self.pod_rows
        for index, pod in enumerate(owner.pods):
            if pod.uid not in before and pod.uid not in pod_rows:
                prow = PodRow(workload_id=row.id, index=_index(pod.name, index), name=pod.name,
                              phase=pod.phase.value, created=pod.created)
                row.pods.append(prow)
                pod_rows[pod.uid] = prow

    def start(self, pod, now: float) -> None:
        """Start an admitted pod through the backend."""
        c = self.c
        prow = self.pod_rows.get(pod.uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if row is None:
            return
        self.store.record(now, "started", f"{pod.name} admitted on {pod.node}", row.id)
        c.datasets.pin(row)  # what it mounts, before the backend mounts it
        if c.metrics is not None:
            c.metrics.admitted(pod)
        c.backend.admitted(row, pod, prow)  # before the reply of a submit waiting for this pass
        c._spawn(c.backend.start(row, pod, prow))

    def evict(self, ev, now: float) -> None:
        """Evict a victim through the backend; an evicted notebook's page counts down to its end."""
        c, victim = self.c, ev.victim
        prow = self.pod_rows.get(victim.uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if row is None:
            return
        self.store.record(now, victim.reason.code, victim.reason.message, row.id,
                          self._preemptor_named(victim.reason.details))
        if c.metrics is not None:
            c.metrics.evicted(victim)
        if row.kind == NOTEBOOK:  # its server stops after the backend's warning window, else the grace period
            c.withdrawn.pop(row.id, None)
            warn = c.backend.notebook_warning_seconds
            c.evicting[row.id] = {"deadline": now + max(0.0, warn) if warn is not None else ev.deadline,
                                  "message": victim.reason.message}
        task = c._spawn(c.backend.evict(row, victim, prow, ev.deadline - now, victim.reason))
        if row.kind == NOTEBOOK and row.id in c.evicting:
            c.evicting[row.id]["task"] = task


    def _preemptor_named(self, details: dict | None) -> dict | None:
        """The eviction's details with whose work took the room in people's words (``preemptorName``:
        "carol's job train-3", ``preemptorTeam``), for the victim's notices; the engine knows only pods."""
        prow = self.pod_rows.get((details or {}).get("preemptorUid"))
        row = self.rows.get(prow.workload_id) if prow is not None else None
        if row is None:
            return details
        return {**details, "preemptorName": named(row), "preemptorTeam": row.tenant or row.namespace}


def _index(name: str, fallback: int) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else fallback
