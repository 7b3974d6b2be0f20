"""Persistence: workloads, their pods and their history, through SQLAlchemy (SQLite by default).

Everything a user can see survives a restart of the service or the hub:
workloads with their spec, each pod's phase, node, queue age and reason, and
the event history. The controller writes through on every change.
"""

from __future__ import annotations

import json

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text, create_engine, event, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class WorkloadRow(Base):
    __tablename__ = "workloads"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # notebook | training
    name: Mapped[str] = mapped_column(String(253))
    user: Mapped[str] = mapped_column(String(255), index=True)
    namespace: Mapped[str] = mapped_column(String(63), index=True)
    tenant: Mapped[str | None] = mapped_column(String(255), nullable=True)
    spec: Mapped[dict] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), index=True)
    created: Mapped[float] = mapped_column(Float)
    finished: Mapped[float | None] = mapped_column(Float, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    succeeded: Mapped[int] = mapped_column(Integer, default=0)
    pods: Mapped[list["PodRow"]] = relationship(back_populates="workload", cascade="all, delete-orphan",
                                                order_by="PodRow.index")


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


class Store:
    def __init__(self, url: str):
        self.engine = create_engine(url, future=True)
        if url.startswith("sqlite"):
            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(conn, _record):  # pragma: no cover - driver detail
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()
        Base.metadata.create_all(self.engine)
        self.session = Session(self.engine, expire_on_commit=False)

    def commit(self) -> None:
        self.session.commit()

    def add(self, row) -> None:
        self.session.add(row)

    def delete(self, row) -> None:
        self.session.delete(row)

    def active_workloads(self) -> list[WorkloadRow]:
        final = ("Succeeded", "Failed", "Cancelled", "Stopped", "Preempted", "Rejected")
        return list(self.session.scalars(
            select(WorkloadRow).where(WorkloadRow.state.not_in(final)).order_by(WorkloadRow.created)))

    def workload(self, wid: str) -> WorkloadRow | None:
        return self.session.get(WorkloadRow, wid)

    def workloads(self, *, user=None, namespaces=None, limit: int = 500) -> list[WorkloadRow]:
        q = select(WorkloadRow).order_by(WorkloadRow.created.desc()).limit(limit)
        if user is not None and namespaces is not None:
            q = q.where((WorkloadRow.user == user) | (WorkloadRow.namespace.in_(namespaces)))
        elif namespaces is not None:
            q = q.where(WorkloadRow.namespace.in_(namespaces))
        return list(self.session.scalars(q))

    def setting(self, key: str):
        row = self.session.get(SettingRow, key)
        return None if row is None else row.value

    def set_setting(self, key: str, value) -> None:
        row = self.session.get(SettingRow, key)
        if row is None:
            self.session.add(SettingRow(key=key, value=value))
        else:
            row.value = value

    def record(self, time: float, type_: str, message: str, workload_id=None, details=None) -> EventRow:
        row = EventRow(time=time, type=type_, message=message, workload_id=workload_id,
                       details=json.loads(json.dumps(details)) if details else None)
        self.session.add(row)
        return row

    def events(self, workload_id: str, limit: int = 200) -> list[EventRow]:
        q = select(EventRow).where(EventRow.workload_id == workload_id).order_by(EventRow.id.desc()).limit(limit)
        return list(reversed(list(self.session.scalars(q))))
