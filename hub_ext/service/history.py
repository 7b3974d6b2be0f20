"""What the cluster, the nodes, the quota tree and the jobs looked like over time: sampled, kept, shown.

``snapshot(controller)`` reads the engine once: capacity, what is allocated (by
team) and what waits, per resource; each node's allocated room and pods (by
team); each quota node's used, min, max, borrowed and lent; how many jobs wait
and run per team. ``History`` stores one snapshot every ``interval`` seconds in
the service's database (table ``samples``), drops those older than the
retention, and pushes the current snapshot to the pages through the event
stream (``{"type": "sample"}`` messages) whenever it changed, so a laptop needs
no Prometheus and the pages never reload.

Amounts are in base units (cores, bytes, devices). Who sees what: admins see
everything; a user sees every team's totals and the whole tree's use (they name
no person and no server); namespaces of no team are summed as ``"other
teams"`` (``visible``).
"""

from __future__ import annotations

import asyncio
import json
import time

from sqlalchemy import JSON, Float, Integer, delete, select
from sqlalchemy.orm import Mapped, mapped_column

from ..scheduler.model import Phase
from .store import Base

OTHERS = "other teams"
NO_TEAM = "(no team)"


class SampleRow(Base):
    """One snapshot of the cluster (see ``snapshot``), taken every ``history_interval_seconds``."""

    __tablename__ = "samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    data: Mapped[dict] = mapped_column(JSON)


def units(milli: dict) -> dict:
    """Engine amounts (thousandths) in base units, zeros left out."""
    return {r: v / 1000 for r, v in milli.items() if v}


def _add(into: dict, res_amounts: dict) -> None:
    for res, amount in res_amounts.items():
        into[res] = into.get(res, 0) + amount


def team_names(controller) -> dict[str, str]:
    """namespace -> the team (hub group) that owns it; namespaces of no team keep their name."""
    return {t.namespace: t.group for t in controller.tenants if t.usable}


#: Pods (or rows) read per turn of the event loop by ``snapshot_async``: with 10,000 queued, reading
#: them all at once held the loop for a tenth of a second (every page, every scrape).
CHUNK = 250


def snapshot(controller, now: float | None = None) -> dict:
    """The state the pages and ``/metrics`` show, read from the engine (see the module's docstring)."""
    steps = _snapshot(controller, now)
    for _ in steps:
        pass
    return steps.snap


async def snapshot_async(controller, now: float | None = None) -> dict:
    """``snapshot``, read ``CHUNK`` pods at a time with the event loop's other work in between
    (the figures may mix states a few milliseconds apart, as a scrape does anyway)."""
    steps = _snapshot(controller, now)
    for _ in steps:
        await asyncio.sleep(0)
    return steps.snap


class _snapshot:
    """The reading of a snapshot, a chunk per step (iterate it; then ``snap`` is the result)."""

    def __init__(self, controller, now):
        self.controller, self.now, self.snap = controller, now, None

    def __iter__(self):
        controller = self.controller
        engine = controller.engine
        teams = team_names(controller)
        capacity: dict = {}
        nodes: dict = {}
        for node in engine.cluster.nodes.values():
            _add(capacity, node.allocatable)
            nodes[node.name] = {"allocatable": units(node.allocatable), "allocated": {}, "pods": 0, "teams": {}}
        allocated: dict = {}
        pending: dict = {}
        by_team: dict = {}
        jobs: dict = {}
        pods = list(engine.pods.values())
        for start in range(0, len(pods), CHUNK):
            if start:
                yield
            for pod in pods[start:start + CHUNK]:
                team = teams.get(pod.namespace, pod.namespace)
                if pod.phase in (Phase.RUNNING, Phase.TERMINATING):
                    _add(allocated, pod.requests)
                    _add(by_team.setdefault(team, {}), pod.requests)
                    node = nodes.get(pod.node) if pod.node else None
                    if node is not None:
                        node["pods"] += 1
                        _add(node["allocated"], units(pod.requests))
                        _add(node["teams"].setdefault(team, {}), units(pod.requests))
                elif pod.phase is Phase.PENDING and pod.node is None and not pod.inadmissible:
                    _add(pending, pod.requests)  # what waits for room (work that can never start is not demand)
        rows = list(controller.rows.values())
        for start in range(0, len(rows), CHUNK):
            yield
            for row in rows[start:start + CHUNK]:
                if row.kind == "training" and row.state in ("Pending", "Running"):
                    count = jobs.setdefault(row.tenant or row.namespace, {"queued": 0, "running": 0})
                    count["queued" if row.state == "Pending" else "running"] += 1
        self.snap = {
            "time": controller.clock() if self.now is None else self.now,
            "cluster": {"capacity": units(capacity), "allocated": units(allocated), "pending": units(pending)},
            "teams": {team: units(amounts) for team, amounts in sorted(by_team.items())},
            "nodes": nodes,
            "quota": quota_figures(controller),
            "jobs": jobs,
            "teamGroups": sorted(set(teams.values())),  # who is a team (``visible``: the rest is summed)
        }


def quota_figures(controller) -> dict:
    """Per quota node: used, min, max, borrowed (used above min) and lent (idle guarantee that siblings use).

    Lent: under one parent, the children's borrowed room comes first out of their
    siblings' idle guarantees; each idle child is counted as lending its share of
    that room, in proportion to its idle guarantee.
    """
    quota = controller.engine.quota
    teams = {t.leaf: t.group for t in controller.tenants if t.usable and t.leaf}
    report = quota.report()
    out = {}
    for name, values in report.items():
        node = quota.nodes[name]
        used, low = values["used"], node.min
        out[name] = {"team": teams.get(name), "parent": node.parent.name if node.parent else None,
                     "used": units(used), "min": units(low), "max": units(values["max"]),
                     "borrowed": units({r: max(0, used.get(r, 0) - low.get(r, 0)) for r in node.managed}),
                     "lent": {}}
    for name in report:
        node = quota.nodes[name]
        kids = [k for k in node.children if k.name in report]
        for res in node.managed:
            borrowed = sum(max(0, k.used.get(res, 0) - k.min.get(res, 0)) for k in kids)
            idle = {k.name: max(0, k.min.get(res, 0) - k.used.get(res, 0)) for k in kids}
            total_idle = sum(idle.values())
            if not borrowed or not total_idle:
                continue
            share = min(1.0, borrowed / total_idle)
            for kid, amount in idle.items():
                if amount:
                    out[kid]["lent"][res] = amount * share / 1000
    return out


def visible(snap: dict, identity) -> dict:
    """``snap`` as ``identity`` may see it: the one rule of every page, ``/tree`` and the event stream.

    Admins see everything. A user sees every team's totals (allocated, quota used, borrowed and
    lent, jobs queued and running), which name no person and no server, so everyone can see what
    binds; namespaces that are no team's (a person's own, say) are summed as ``"other teams"``.
    Who runs what stays with the team (``visibility.py`` keeps names out of the reclaim table)."""
    if identity.admin:
        return snap
    quota = snap.get("quota") or {}
    known = set(snap.get("teamGroups") or []) | {q.get("team") for q in quota.values() if q.get("team")}
    known |= {t.group for t in identity.tenants if t.usable} | {t.namespace for t in identity.tenants if t.usable}

    def fold(per_team: dict) -> dict:
        out, others = {}, {}
        for team, amounts in per_team.items():
            if team in known:
                out[team] = amounts
            else:
                _add(others, amounts)
        if others:
            out[OTHERS] = others
        return out

    out = dict(snap)
    out["teams"] = fold(snap.get("teams") or {})
    out["nodes"] = {name: {**node, "teams": fold(node.get("teams") or {})} for name, node in (snap.get("nodes") or {}).items()}
    jobs, others = {}, {"queued": 0, "running": 0}
    for team, count in (snap.get("jobs") or {}).items():
        if team in known:
            jobs[team] = count
        else:
            others = {k: others[k] + count.get(k, 0) for k in others}
    if others["queued"] or others["running"]:
        jobs[OTHERS] = others
    out["jobs"] = jobs
    return out


class History:
    """Samples in the database, with retention; the live snapshot for the pages' event stream."""

    def __init__(self, controller, *, interval: float = 15.0, retention_hours: float = 48.0, live: float = 2.0,
                 metrics=None):
        self.controller = controller
        self.interval = interval
        self.retention = retention_hours * 3600
        self.live = live
        self.metrics = metrics
        self.store = controller.store
        SampleRow.__table__.create(self.store.engine, checkfirst=True)
        self._last_sent: str | None = None
        self._last_stored = 0.0
        self._latest: tuple[float, dict] | None = None  # (monotonic time, snapshot) of the last read
        self._reading: asyncio.Future | None = None

    def take(self, now: float | None = None, snap: dict | None = None) -> dict:
        """Store one sample now, ``snap`` or one read now (and drop those past the retention); returns it."""
        snap = snapshot(self.controller, now) if snap is None else snap
        self.store.add(SampleRow(time=snap["time"], data=snap))
        self.store.session.execute(delete(SampleRow).where(SampleRow.time < snap["time"] - self.retention))
        self.store.commit()
        self._last_stored = snap["time"]
        return snap

    async def current(self, max_age: float = 1.0) -> dict:
        """The live snapshot, at most ``max_age`` seconds old: read again (a chunk per turn of the
        event loop, once for all who ask meanwhile) when older. For the pages and ``/metrics``."""
        latest = self._latest
        if latest is not None and time.monotonic() - latest[0] <= max_age:
            return latest[1]
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read())
        return await asyncio.shield(self._reading)

    async def _read(self) -> dict:
        started = time.monotonic()
        snap = await snapshot_async(self.controller)
        self._latest = (started, snap)
        return snap

    def samples(self, since: float, *, most: int = 720) -> list[dict]:
        """Stored samples from ``since`` on, oldest first, thinned evenly to at most ``most``."""
        q = select(SampleRow.data).where(SampleRow.time >= since).order_by(SampleRow.time)
        rows = list(self.store.session.scalars(q))
        if len(rows) > most:
            step = len(rows) / most
            rows = [rows[int(i * step)] for i in range(most)] + [rows[-1]]
        return rows

    def publish(self, snap: dict) -> None:
        """Push ``snap`` to the event stream's listeners, if it differs from the last one pushed."""
        key = json.dumps({k: v for k, v in snap.items() if k != "time"}, sort_keys=True, default=str)
        if key == self._last_sent:
            return
        self._last_sent = key
        message = {"type": "sample", "sample": snap}
        for queue in list(self.controller.listeners):
            queue.put_nowait(message)

    def wanted(self, now: float) -> bool:
        """Whether a round at ``now`` needs a snapshot: a sample is due, or someone listens."""
        return now - self._last_stored >= self.interval or bool(self.controller.listeners)

    def step(self, now: float | None = None, snap: dict | None = None) -> dict | None:
        """One round of the loop: store a sample when due, push the live snapshot when it changed.
        Between samples, with nobody listening, nothing is worked out (a snapshot reads every pod:
        thousands, every ``live`` seconds, under load); ``/metrics`` takes its own when scraped.
        ``snap``: the snapshot of ``now``, read already."""
        now = self.controller.clock() if now is None else now
        if not self.wanted(now):
            return None
        snap = snapshot(self.controller, now) if snap is None else snap
        if now - self._last_stored >= self.interval:
            self.take(now, snap)
        if self.metrics is not None:
            self.metrics.observe_snapshot(snap)
        if self.controller.listeners:
            self.publish(snap)
        return snap

    async def refresh_metrics(self) -> None:
        """The page figures' gauges as of now (before ``/metrics`` answers)."""
        if self.metrics is not None:
            self.metrics.observe_snapshot(await self.current())

    async def run(self) -> None:
        while True:
            try:
                now = self.controller.clock()
                if self.wanted(now):
                    self.step(now, await snapshot_async(self.controller, now))
            except Exception:  # noqa: BLE001 - a failed sample must not stop the service
                self.store.rollback()
                self.controller.log.exception("taking a history sample failed")
            await asyncio.sleep(min(self.live, self.interval))


def since_argument(raw: str | None, now: float | None = None, default_hours: float = 6.0) -> float:
    """``?hours=`` as the epoch time to start from (at most the retention is stored anyway)."""
    now = time.time() if now is None else now
    try:
        hours = float(raw) if raw else default_hours
    except ValueError:
        hours = default_hours
    return now - max(0.01, min(hours, 24 * 365)) * 3600
