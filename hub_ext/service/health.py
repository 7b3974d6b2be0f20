"""What keeps the service from working, check by check, as ``/api/v1/health`` reports it.

A check is a name (``kubernetes-api``, ``priority-classes``, ``rbac``, ``nodes``,
``database`` ...) with a problem (one line that says what is wrong
and what to do) or none. A *blocking* problem stops admissions: workloads are
queued and wait, with the problem as their message, instead of being created
on a cluster that will refuse them one by one. Each change is logged once:
the problem when it appears (or its text changes), a line when it is fixed.

With several replicas (leader election) the report also names this replica's
``role`` (``leader`` or ``follower``) and the ``leader``'s identity.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from sqlalchemy import text


@dataclass
class Problem:
    check: str
    message: str
    blocking: bool
    since: float

    def to_dict(self) -> dict:
        return {"check": self.check, "message": self.message, "blocking": self.blocking, "since": self.since}


class Health:
    def __init__(self, log=None, clock=time.time):
        self.log, self.clock = log, clock
        self.problems: dict[str, Problem] = {}
        self.starting = False  # True while the service restores its state (the API answers 503)
        self.on_change = None  # called after a blocking problem is fixed (the controller looks again)
        # With leader election (several replicas): "leader" or "follower", and the leader's identity
        # (None: no replica leads right now). Without it both stay None and are not reported.
        self.role: str | None = None
        self.leader: str | None = None

    def set(self, check: str, problem: str | None, *, blocking: bool = True, log: bool = True) -> None:
        """Record ``check``'s problem (None: it is fine now), logging the change once (``log=False``:
        the caller logs it in its own words)."""
        old = self.problems.get(check)
        if problem is None:
            if old is not None:
                del self.problems[check]
                if self.log is not None and log:
                    self.log.warning("%s: fixed after %.0f s", check, self.clock() - old.since)
                if old.blocking and self.on_change is not None:
                    self.on_change()
            return
        if old is not None and old.message == problem and old.blocking == blocking:
            return
        self.problems[check] = Problem(check, problem, blocking, old.since if old else self.clock())
        if self.log is not None and log:
            self.log.error("%s: %s", check, problem) if blocking else self.log.warning("%s: %s", check, problem)

    @property
    def blocking(self) -> list[str]:
        """The blocking problems' messages (empty: the service may admit)."""
        return [p.message for p in self.problems.values() if p.blocking]

    @property
    def status(self) -> str:
        if self.starting:
            return "starting"
        if self.blocking:
            return "blocked"
        return "degraded" if self.problems else "ok"

    def report(self) -> dict:
        out = {"status": self.status,
               "problems": [p.to_dict() for p in sorted(self.problems.values(), key=lambda p: p.since)]}
        if self.role is not None:
            out.update(role=self.role, leader=self.leader)
        return out


async def watch_database(store, health: Health, *, interval: float = 10.0, timeout: float = 5.0) -> None:
    """Check every ``interval`` seconds that the database answers ``SELECT 1`` within ``timeout``."""
    def ping():
        with store.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    while True:
        # asyncio.wait, not wait_for: before Python 3.12, wait_for may swallow a cancellation
        call = asyncio.ensure_future(asyncio.to_thread(ping))
        try:
            done, _ = await asyncio.wait({call}, timeout=timeout)
        finally:
            call.cancel()  # the thread finishes its call on its own; nobody waits for it
        try:
            if not done:
                raise asyncio.TimeoutError
            call.result()
            health.set("database", None)
        except asyncio.TimeoutError:
            health.set("database", f"the database {store.where} does not answer within {timeout:.0f} s")
        except Exception as err:  # noqa: BLE001 - the driver's errors, as one line
            detail = " ".join(str(getattr(err, "orig", None) or err).split())[:200]
            health.set("database", f"the database {store.where} cannot be used ({detail}): check "
                                   "TenancyService.db_url and that the server runs")
        await asyncio.sleep(interval)
