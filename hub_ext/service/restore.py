"""After a restart: the engine and the owners rebuilt from the store, no workload lost, none admitted twice.

Queued pods keep their place (their creation time); pods that still run are
adopted where they ran; a training pod that ended while the service was away is
finished with its recorded exit status; a pod caught in its grace period is
stopped and, for a training job, queued again. A gang comes back whole or not at
all. A workload that cannot be restored is quarantined, the others restored.
"""

from __future__ import annotations

from ..quota.errors import ValidationError
from ..scheduler.owners import Owner
from .store import WorkloadRow
from .workloads import FINAL, NOTEBOOK, TRAINING


class Restore:
    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store, self.books = controller.engine, controller.store, controller.books
        self.rows, self.owners, self.pod_rows = controller.rows, controller.owners, controller.pod_rows

    async def restore(self) -> int:
        """Rebuild engine and owners from the store; the number of workloads still active.

        A workload that cannot be restored (an unknown kind, a spec that no longer
        makes a pod, pod rows that make no sense) is quarantined: its state becomes
        ``Quarantined`` with the error in ``message`` (the row is kept), one line is
        logged, and the others are restored. Rows whose JSON could not be read at all
        were moved into the table ``quarantine`` when the store opened; they are
        logged here. An error of the backend itself (the cluster unreachable) is no
        fault of a row: it stops the restore as before.
        """
        c = self.c
        count = 0
        now = c.clock()
        for moved in self.store.moved_aside:
            c.log.error("%s", moved.describe())
        for wid in self.store.active_workload_ids():
            try:
                row = self.store.workload(wid)
                count += await self._restore_one(row, now)
            except _BackendFailed as failed:
                raise failed.error from None
            except Exception as err:  # noqa: BLE001 - whatever a bad row makes fail, the others go on
                self._quarantine(wid, err, now)
        self.store.record(now, "restored", f"restored {count} active workload(s)")
        self.store.commit()
        c.loop.poke()
        return count

    async def _restore_one(self, row: WorkloadRow, now: float) -> int:
        """Restore one active workload; 1 if it is still active afterwards, else 0."""
        if row.kind not in (NOTEBOOK, TRAINING):
            raise ValidationError(f"unknown kind {row.kind!r} (notebook, training)")
        backend = self.c.backend
        owner = self.books.make_owner(row)
        if owner.spec.gang:
            await self._restore_gang(row, owner, now)
        for prow in row.pods if not owner.spec.gang else []:
            owner._next_index = max(owner._next_index, prow.index + 1)
            if prow.phase not in ("Pending", "Running", "Rejected", "Terminating"):
                continue
            pod = self.engine.submit(
                row.namespace, prow.name, owner.spec.template, now, created=prow.created,
                owner=None if row.kind == NOTEBOOK else (owner.spec.kind, owner.spec.name))
            owner.pods.append(pod)
            self.pod_rows[pod.uid] = prow
            if prow.phase not in ("Running", "Terminating"):
                continue
            status = await _backend(backend.recover(row, prow, pod))
            if status == "running" and prow.phase == "Running" and self.engine.adopt(pod, prow.node, prow.admitted_at or now):
                continue
            if status == "running":
                await _backend(backend.stop(row, pod, prow))  # gone before its pod may be admitted again
            self._restore_ended(row, owner, pod, prow, status, now)
            if row.state in FINAL:
                break
        if row.state == "Failed":
            self.books.finish_failed(row, now)  # its other pods stop too
        elif row.state not in FINAL:
            self.books.sync(row)  # e.g. its last pod succeeded while we were away: it is done
        if row.state not in FINAL:
            return 1
        self.rows.pop(row.id, None)
        self.owners.pop(row.id, None)
        return 0

    async def _restore_gang(self, row: WorkloadRow, owner: Owner, now: float) -> None:
        """A gang comes back whole or not at all: all its running pods adopted where they ran, or
        those still running stopped and the whole gang queued again in its old place."""
        backend = self.c.backend
        for prow in row.pods:
            owner._next_index = max(owner._next_index, prow.index + 1)
        prows = [p for p in row.pods if p.phase in ("Pending", "Running", "Rejected", "Terminating")]
        if not prows:
            return
        pods = self.engine.submit_gang(row.namespace, [p.name for p in prows], owner.spec.template, now,
                                       created=min(p.created for p in prows), owner=(owner.spec.kind, owner.spec.name))
        owner.pods += pods
        self.pod_rows.update((pod.uid, prow) for pod, prow in zip(pods, prows))
        ran = [(pod, prow) for pod, prow in zip(pods, prows) if prow.phase in ("Running", "Terminating")]
        if not ran:
            return  # it was waiting: it waits again, whole, in its place
        status = {pod.uid: await _backend(backend.recover(row, prow, pod)) for pod, prow in ran}
        if len(ran) == len(pods) and all(status[pod.uid] == "running" and prow.phase == "Running" for pod, prow in ran):
            adopted = [self.engine.adopt(pod, prow.node, prow.admitted_at or now) for pod, prow in ran]
            if all(adopted):
                return
            for pod, ok in zip(pods, adopted):
                if ok:  # a node is gone or full: the gang may not run in part
                    self.engine.delete(pod.uid)
            pods = self.engine.submit_gang(row.namespace, [p.name for p in prows], owner.spec.template, now,
                                           created=min(p.created for p in prows),
                                           owner=(owner.spec.kind, owner.spec.name))
            owner.pods = pods
            self.pod_rows.update((pod.uid, prow) for pod, prow in zip(pods, prows))
            status = {pod.uid: "running" for pod in pods}
            ran = list(zip(pods, prows))
        for pod, prow in ran:
            if status[pod.uid] == "running":
                await _backend(backend.stop(row, pod, prow))  # gone before the gang may be admitted again
        for pod, prow in ran:
            if isinstance(status[pod.uid], tuple) and status[pod.uid][1] and status[pod.uid][1] < 128 \
                    and prow.phase != "Terminating":
                self._restore_ended(row, owner, pod, prow, status[pod.uid], now)  # a member failed: the job fails
                return
        self.store.record(now, "requeued", f"gang {row.name} did not all run after the restart; it is queued "
                          "again, whole, in its place", row.id)

    def _quarantine(self, wid: str, err: Exception, now: float) -> None:
        """Set aside a workload that could not be restored: forgotten by the engine, kept in the store."""
        log = self.c.log
        self.books.drop(wid)
        error = " ".join(str(err).split()) if isinstance(err, ValidationError) else f"{type(err).__name__}: {err}"
        error = error if len(error) <= 300 else error[:300] + "..."
        try:
            row = self.store.workload(wid)
            self.store.revert(row)  # what the failed attempt changed is not written
        except Exception:  # noqa: BLE001 - not even loadable: moved aside whole, as stored
            self.store.rollback()
            moved = self.store.move_aside("workloads", wid, f"it cannot be loaded ({error})")
            log.error("%s", moved.describe())
            return
        was = row.state
        row.state, row.finished = "Quarantined", now
        row.message = f"quarantined at restore (was {was}): {error}"
        self.store.record(now, "quarantined", row.message, wid)
        self.store.commit()
        log.error("workload %s (%s %s of %s in %s) quarantined at restore: %s; the row is kept with state "
                  "Quarantined: its owner may submit it again, or an admin may repair it in table workloads "
                  "and set its state back to %s", wid, row.kind, row.name, row.user, row.namespace, error, was)

    def _restore_ended(self, row, owner, pod, prow, status, now) -> None:
        """A pod that ran before the restart and does not run now."""
        was_evicted = prow.phase == "Terminating"
        if isinstance(status, tuple) and status[1] >= 128 and row.kind == TRAINING and not was_evicted:
            # Killed by a signal while we were away (a machine or hub shutdown): lost, not failed.
            self.store.record(now, "requeued", f"{prow.name} was stopped by signal {status[1] - 128} while the "
                              "service was down; it is queued again in its place", row.id)
            return
        if isinstance(status, tuple) and not was_evicted:  # ("exited", code)
            code = status[1]
            self.engine.delete(pod.uid)
            owner.pods.remove(pod)
            prow.phase, prow.finished_at = ("Succeeded" if code == 0 else "Failed"), now
            self.store.record(now, "succeeded" if code == 0 else "failed",
                              f"{prow.name} exited with status {code} while the service was down", row.id)
            if code == 0:
                owner.succeeded += 1
                row.succeeded = owner.succeeded
            else:
                row.state, row.finished = "Failed", now
            return
        if row.kind == NOTEBOOK:
            self.engine.delete(pod.uid)
            owner.pods.remove(pod)
            prow.phase, prow.finished_at = "Evicted", now
            row.state, row.finished = ("Preempted" if was_evicted else "Stopped"), now
        elif not was_evicted:
            self.store.record(now, "requeued", f"{prow.name} was gone after the restart; it is queued again in its place",
                              row.id)
        # a training pod waits in the queue again, in its old place


class _BackendFailed(Exception):
    """The backend (not a row) failed during a restore."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


async def _backend(call):
    try:
        return await call
    except Exception as err:  # noqa: BLE001 - told apart from a bad row's errors
        raise _BackendFailed(err) from err
