"""Persistence: workloads, their pods and their history, through SQLAlchemy (SQLite or PostgreSQL).

Everything a user can see survives a restart of the service or the hub:
workloads with their spec, each pod's phase, node, queue age and reason, and
the event history. The controller writes through on every change.

Opening the store checks the database: a file that is not a database (or a
damaged one) is a ``StoreError`` whose message names the file and the remedy.
Rows whose stored JSON cannot be read any more are moved aside into the table
``quarantine`` (the row kept as it was, with the error), so that one bad row
never stops the service; ``moved_aside`` lists what was moved at this opening.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time

from sqlalchemy import (JSON, Float, ForeignKey, Index, Integer, String, Text, and_, create_engine, delete, event,
                        or_, select, type_coerce)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload

#: States a workload does not leave (``Quarantined``: set aside at a restore, see Controller.restore).
FINAL_STATES = ("Succeeded", "Failed", "Cancelled", "Stopped", "Preempted", "Rejected", "Quarantined")


class StoreError(Exception):
    """The database cannot be used; the message names it and says what to do (one line)."""


class Base(DeclarativeBase):
    pass


class WorkloadRow(Base):
    __tablename__ = "workloads"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # notebook | training
    name: Mapped[str] = mapped_column(String(253))
    user: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(63))
    tenant: Mapped[str | None] = mapped_column(String(255), nullable=True)
    spec: Mapped[dict] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    created: Mapped[float] = mapped_column(Float)
    finished: Mapped[float | None] = mapped_column(Float, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    succeeded: Mapped[int] = mapped_column(Integer, default=0)
    pods: Mapped[list["PodRow"]] = relationship(back_populates="workload", cascade="all, delete-orphan",
                                                order_by="PodRow.index")
    # Listings are newest first (created, then id) and filter before they page: by user or
    # namespace (who may see what), state and kind.
    __table_args__ = (
        Index("ix_workloads_created_id", "created", "id"),
        Index("ix_workloads_user_created", "user", "created", "id"),
        Index("ix_workloads_namespace_created", "namespace", "created", "id"),
        Index("ix_workloads_state_created", "state", "created", "id"),
        Index("ix_workloads_kind_state_created", "kind", "state", "created", "id"),
    )


class PodRow(Base):
    __tablename__ = "pods"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workload_id: Mapped[str] = mapped_column(ForeignKey("workloads.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(253))
    phase: Mapped[str] = mapped_column(String(16))
    node: Mapped[str | None] = mapped_column(String(253), nullable=True)
    created: Mapped[float] = mapped_column(Float)
    admitted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    workload: Mapped[WorkloadRow] = relationship(back_populates="pods")


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    workload_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    type: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict | None] = mapped_column(JSON, nullable=True)


class SettingRow(Base):
    """Settings changed at run time (the quota tree an admin edited)."""

    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[dict] = mapped_column(JSON)


class QuarantineRow(Base):
    """Rows set aside because they could not be read: kept as they were stored, with the error."""

    __tablename__ = "quarantine"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(32))  # the table the rows came from
    row_id: Mapped[str] = mapped_column(String(64), index=True)  # the id (key) of the row there
    error: Mapped[str] = mapped_column(Text)
    data: Mapped[str] = mapped_column(Text)  # JSON: {table: [row as stored, ...]} (JSON columns as their raw text)

    def describe(self) -> str:
        """One line for the log: which row, why, where it is kept and what to do."""
        what = {"workloads": "workload", "pods": "pod rows of workload", "events": "event",
                "settings": "setting"}.get(self.source, f"row of {self.source}")
        todo = ("nothing uses them now: delete them there once you have looked" if self.source == "pods"
                else f"repair it and insert it back into {self.source}, or delete it there")
        return f"{what} {self.row_id} moved aside: {self.error}; kept in table quarantine (id {self.id}): {todo}"


#: SQLite's ``synchronous`` settings a Store accepts (https://sqlite.org/pragma.html#pragma_synchronous)
SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


class Store:
    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL"):
        synchronous = sqlite_synchronous.upper()
        if synchronous not in SQLITE_SYNCHRONOUS:
            raise StoreError(f"sqlite_synchronous must be one of {', '.join(SQLITE_SYNCHRONOUS)}, "
                             f"not {sqlite_synchronous!r}")
        self.url = url
        self.where = describe_url(url)
        self.moved_aside: list[QuarantineRow] = []
        try:
            sa_url = engine_url(url)
            is_sqlite = sa_url.get_backend_name() == "sqlite"
            self.engine = create_engine(sa_url, future=True, **({} if is_sqlite else {"pool_pre_ping": True}))
            if is_sqlite:
                @event.listens_for(self.engine, "connect")
                def _sqlite_pragmas(conn, _record):  # pragma: no cover - driver detail
                    cur = conn.cursor()
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute(f"PRAGMA synchronous={synchronous}")
                    cur.execute("PRAGMA foreign_keys=ON")
                    cur.close()
            with self.engine.begin() as conn:
                if is_sqlite:
                    problems = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check")]
                    if problems != ["ok"]:
                        raise StoreError(f"the database {self.where} is damaged ({problems[0]}): move it aside to "
                                         "start afresh, or restore a backup (sqlite3's .recover may save its rows)")
                Base.metadata.create_all(conn)
                for table in Base.metadata.sorted_tables:  # indexes added since a table was created
                    for index in table.indexes:
                        index.create(conn, checkfirst=True)
        except StoreError:
            raise
        except Exception as err:  # noqa: BLE001 - the driver's own errors too: each becomes the one line
            raise StoreError(explain(url, err)) from None
        self.session = Session(self.engine, expire_on_commit=False)
        self._events: list[dict] = []  # recorded, not yet written (see ``record``)
        self._move_aside_unreadable()

    def commit(self) -> None:
        self.flush_events()
        self.session.commit()

    def rollback(self) -> None:
        """Drop what was not committed: the session's changes and the events recorded since."""
        self._events.clear()
        self.session.rollback()

    def close(self) -> None:
        """Close the session and the engine's connections."""
        self.session.close()
        self.engine.dispose()

    def add(self, row) -> None:
        self.session.add(row)

    def delete(self, row) -> None:
        self.session.delete(row)

    def active_workloads(self) -> list[WorkloadRow]:
        return [self.session.get(WorkloadRow, wid) for wid in self.active_workload_ids()]

    def active_workload_ids(self) -> list[str]:
        """Ids of the workloads not yet ended, oldest first (the queue's order)."""
        q = select(WorkloadRow.id).where(WorkloadRow.state.not_in(FINAL_STATES)).order_by(WorkloadRow.created, WorkloadRow.id)
        return list(self.session.scalars(q))

    def workload(self, wid: str) -> WorkloadRow | None:
        return self.session.get(WorkloadRow, wid)

    def workloads(self, *, user: str | None = None, namespaces=None, state=None, kind=None, limit: int = 100,
                  after: str | None = None) -> tuple[list[WorkloadRow], str | None]:
        """One page of workloads, newest first (``created`` then ``id``, descending).

        ``namespaces``: those of these namespaces (None: all); with ``user`` too, also the
        user's own wherever they are. ``state``/``kind``: a value or a list of values.
        Filters apply before the page is cut. ``after``: the token of the previous page.
        Returns the rows and the token of the next page (None: this was the last).
        A malformed token is a ``ValueError``.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive whole number, got {limit!r}")
        def page(where):
            q = select(WorkloadRow.created, WorkloadRow.id)
            if where is not None:
                q = q.where(where)
            for column, wanted in ((WorkloadRow.state, state), (WorkloadRow.kind, kind)):
                if wanted is not None:
                    q = q.where(column.in_([wanted] if isinstance(wanted, str) else list(wanted)))
            if after is not None:
                created, wid = decode_continue(after)
                q = q.where(or_(WorkloadRow.created < created,
                                and_(WorkloadRow.created == created, WorkloadRow.id < wid)))
            q = q.order_by(WorkloadRow.created.desc(), WorkloadRow.id.desc()).limit(limit + 1)
            return list(self.session.execute(q))

        if user is not None and namespaces is not None:
            # Two pages, each read along its own index, merged: "user's OR these namespaces'" in one
            # query scans and sorts every row (a tenth of a second on the event loop with 10,000).
            keys = sorted(set(page(WorkloadRow.user == user)) | set(page(WorkloadRow.namespace.in_(list(namespaces)))),
                          reverse=True)[:limit + 1]
        else:
            keys = page(None if namespaces is None else WorkloadRow.namespace.in_(list(namespaces)))
        ids = [wid for _, wid in keys]
        q = (select(WorkloadRow).options(selectinload(WorkloadRow.pods))  # one query for the page's pods, not one each
             .where(WorkloadRow.id.in_(ids)).order_by(WorkloadRow.created.desc(), WorkloadRow.id.desc()))
        rows = list(self.session.scalars(q)) if ids else []
        if len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        return rows, encode_continue(rows[-1].created, rows[-1].id)

    def history_rows(self, start: float, end: float) -> list[WorkloadRow]:
        """Workloads (with their pod rows) submitted by ``end`` that had not ended before ``start``, oldest first."""
        q = (select(WorkloadRow).options(selectinload(WorkloadRow.pods))
             .where(WorkloadRow.created <= end, or_(WorkloadRow.finished.is_(None), WorkloadRow.finished >= start))
             .order_by(WorkloadRow.created, WorkloadRow.id))
        return list(self.session.scalars(q))

    def events_of_type(self, type_: str) -> list[EventRow]:
        """Every recorded event of ``type_`` (the quota tree's edits: few), oldest first."""
        self.flush_events()
        return list(self.session.scalars(select(EventRow).where(EventRow.type == type_).order_by(EventRow.time, EventRow.id)))

    def setting(self, key: str):
        row = self.session.get(SettingRow, key)
        return None if row is None else row.value

    def set_setting(self, key: str, value) -> None:
        row = self.session.get(SettingRow, key)
        if row is None:
            self.session.add(SettingRow(key=key, value=value))
        else:
            row.value = value

    def record(self, time: float, type_: str, message: str, workload_id=None, details=None) -> None:
        """An event, written with the next commit. Events are only ever added, never changed: they are
        inserted together as one statement, not as ORM objects (a flush of those was most of a
        commit's cost under a burst of submissions)."""
        self._events.append({"time": time, "type": type_, "message": message, "workload_id": workload_id,
                             "details": json.loads(json.dumps(details)) if details else None})

    def flush_events(self) -> None:
        """Write the events recorded so far into the open transaction (before reading events back)."""
        if self._events:
            rows, self._events = self._events, []
            self.session.execute(EventRow.__table__.insert(), rows)

    def events(self, workload_id: str, limit: int = 200) -> list[EventRow]:
        self.flush_events()
        q = select(EventRow).where(EventRow.workload_id == workload_id).order_by(EventRow.id.desc()).limit(limit)
        return list(reversed(list(self.session.scalars(q))))

    def revert(self, row: WorkloadRow) -> None:
        """Drop the unsaved changes to a workload, its pod rows and its new events (a restore of it failed)."""
        self._events = [e for e in self._events if e["workload_id"] != row.id]
        with self.session.no_autoflush:
            for obj in list(self.session.new):
                if isinstance(obj, PodRow) and obj.workload_id == row.id:
                    self.session.expunge(obj)
            for prow in list(row.pods):
                if prow in self.session and prow not in self.session.new:
                    self.session.refresh(prow)
            self.session.refresh(row)

    # -- rows that cannot be read -------------------------------------------------------
    def quarantined(self) -> list[QuarantineRow]:
        return list(self.session.scalars(select(QuarantineRow).order_by(QuarantineRow.id)))

    def orphan_pod_workload_ids(self) -> list[str]:
        """Workload ids that pod rows name but that do not exist (written without foreign keys)."""
        q = select(PodRow.workload_id).where(PodRow.workload_id.not_in(select(WorkloadRow.id))).distinct()
        return sorted(self.session.scalars(q))

    def move_aside(self, source: str, row_id, error: str) -> QuarantineRow:
        """Move one row (a workload: with its pod rows) into ``quarantine``, as stored, and commit.

        Works on rows the ORM cannot load: everything goes through plain SQL.
        """
        tables = {t.name: t for t in Base.metadata.sorted_tables}
        data: dict[str, list] = {}

        def take(table, where) -> None:
            raw = [type_coerce(c, Text) if isinstance(c.type, JSON) else c for c in table.c]
            found = [dict(r._mapping) for r in self.session.execute(select(*raw).where(where))]
            if found:
                data.setdefault(table.name, []).extend(found)
                self.session.execute(delete(table).where(where))

        pods, workloads = tables["pods"], tables["workloads"]
        if source == "workloads":
            take(pods, pods.c.workload_id == row_id)
            take(workloads, workloads.c.id == row_id)
        elif source == "pods":  # pod rows whose workload is gone, by workload id
            take(pods, pods.c.workload_id == row_id)
        elif source == "settings":
            take(tables["settings"], tables["settings"].c.key == row_id)
        else:
            table = tables[source]
            take(table, table.c.id == row_id)
        row = QuarantineRow(time=time.time(), source=source, row_id=str(row_id), error=error,
                            data=json.dumps(data, default=_raw))
        self.session.add(row)
        self.session.commit()
        return row

    def _move_aside_unreadable(self) -> None:
        """Rows whose JSON does not parse (or has the wrong shape) go to ``quarantine``; so do pod
        rows of a workload that is gone. A workload goes with its pod rows."""
        checks = (("workloads", "id", "spec", dict), ("pods", "workload_id", "reason", (dict, type(None))),
                  ("events", "id", "details", (dict, type(None))), ("settings", "key", "value", object))
        tables = {t.name: t for t in Base.metadata.sorted_tables}
        bad: dict[tuple[str, str], str] = {}
        try:
            for name, key, column, shape in checks:
                table = tables[name]
                q = select(table.c[key], type_coerce(table.c[column], Text))
                if isinstance(shape, tuple) and type(None) in shape:
                    q = q.where(table.c[column].is_not(None))  # SQL NULL is fine there: not read at all
                for row_key, raw in self.session.execute(q):
                    error = _unreadable(raw, shape)
                    if error is not None:
                        source = "workloads" if name == "pods" else name  # a bad pod row takes its workload
                        bad.setdefault((source, row_key), f"its {name}.{column} {error}")
            for wid in self.orphan_pod_workload_ids():
                bad.setdefault(("pods", wid), "its workload is gone")
            for (source, row_key), error in bad.items():
                self.moved_aside.append(self.move_aside(source, row_key, error))
        except SQLAlchemyError as err:
            self.session.rollback()
            raise StoreError(explain(self.url, err)) from None


def _unreadable(raw, shape) -> str | None:
    """Why a stored JSON value cannot be used (None: it can)."""
    if raw is None:
        value = None
    elif isinstance(raw, (str, bytes)):
        try:
            value = json.loads(raw)
        except ValueError as err:
            return f"is not valid JSON ({err})"
    else:
        value = raw  # a driver that parses JSON itself (PostgreSQL's json type)
    if not isinstance(value, shape):
        return f"is {type(value).__name__}, not {'an object' if shape is dict else 'an object or null'}"
    return None


def _raw(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# -- continue tokens ---------------------------------------------------------------------
def encode_continue(created: float, wid: str) -> str:
    """The opaque token of the page after the row (created, id)."""
    return base64.urlsafe_b64encode(json.dumps([created, wid]).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        created, wid = json.loads(raw)
        if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created) \
                or not isinstance(wid, str):
            raise ValueError
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        shown = token if len(token) <= 24 else token[:24] + "..."
        raise ValueError(f"continue token {shown!r} is malformed: pass the token of the previous page as it was "
                         "given, or leave it out to start from the newest") from None
    return float(created), wid


# -- URLs and errors -----------------------------------------------------------------------
def engine_url(url: str):
    """The SQLAlchemy URL to use: ``postgresql://`` (or ``postgres://``) takes whichever driver is
    installed (psycopg2, else psycopg 3: ``pip install 'jupyterhub-tenancy[postgres]'``)."""
    u = make_url(url)
    if u.drivername in ("postgres", "postgresql"):
        try:
            import psycopg2  # noqa: F401
            driver = "postgresql"
        except ImportError:
            driver = "postgresql+psycopg"
        u = u.set(drivername=driver)
    return u


def describe_url(url: str) -> str:
    """The database as people name it: a SQLite file's path, else the URL without its password."""
    try:
        u = make_url(url)
    except ArgumentError:
        return url
    if u.get_backend_name() == "sqlite":
        return u.database if u.database not in (None, "", ":memory:") else "(in memory)"
    return u.render_as_string(hide_password=True)


def explain(url: str, err: BaseException) -> str:
    """One line for an error met opening or reading the database: what is wrong and what to do."""
    where = describe_url(url)
    if isinstance(err, ArgumentError):
        return f"TenancyService.db_url {url!r} is not a database URL: use e.g. sqlite:////path/tenancy.sqlite or " \
               "postgresql://user@host/tenancy"
    if isinstance(err, (NoSuchModuleError, ImportError)):
        return f"the database URL {where} needs a driver that is not installed ({err}): " \
               "pip install 'jupyterhub-tenancy[postgres]' for PostgreSQL"
    orig = getattr(err, "orig", None) or err
    detail = " ".join(str(orig).split()) or type(orig).__name__
    if len(detail) > 200:
        detail = detail[:200] + "..."
    try:
        sqlite = make_url(url).get_backend_name() == "sqlite"
    except ArgumentError:
        sqlite = False
    if sqlite:
        lowered = detail.lower()
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return f"the database {where} is not a valid SQLite database ({detail}): move it aside to start afresh, " \
                   "or restore a backup"
        if "unable to open" in lowered or "readonly" in lowered or "read-only" in lowered:
            return f"cannot open the database {where} ({detail}): check that its folder exists and that this user " \
                   "may write there"
        return f"cannot use the database {where} ({detail}): move it aside to start afresh, or restore a backup"
    if isinstance(err, DBAPIError) and err.connection_invalidated or "connect" in detail.lower():
        return f"cannot connect to the database {where} ({detail}): check TenancyService.db_url and that the " \
               "server runs and accepts this user"
    return f"cannot use the database {where} ({detail}): check TenancyService.db_url and the server's log"
