"""One service per database: a lock held for as long as the service runs.

- SQLite: ``flock`` on ``<database>.lock`` beside the database file. The file also says who
  holds it (pid, parent pid, process start time, host), as JSON.
- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on one connection kept
  open; the holder is named in that connection's ``application_name``.

The kernel or the server releases either when the process ends, however it ends; the file
descriptor and the socket are not inherited by the service's children (training processes).

A second instance that finds the lock taken:

- exits at once with ``AlreadyRunning`` when the holder is a live service on this machine
  whose parent still runs (two services on one database is a configuration mistake);
- when the holder is *orphaned* (the process that started it, its hub, is gone: a hub killed
  with SIGKILL), sends it SIGTERM once and waits for the lock;
- when it cannot tell (the holder is on another machine, or there is no ``/proc``), waits.

Waits are bounded (``wait_seconds``); then ``AlreadyRunning`` names the holder.

With leader election (several replicas on one database, ``backends/kubernetes/leader.py``) only the leader
takes the lock, once it holds the Lease (``elected=True``). Followers do not take it, so
they are not refused. A holder found then is a previous leader that stopped acting when
its lease ran out (it ends itself before the lease expires); its lock goes as its
process or connection does. A PostgreSQL session of it still open after a short wait (its
node gone, the connection not yet seen dead by the server) is ended with
``pg_terminate_backend``: the Lease, not the lock, says who leads.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import time

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from .store import StoreError, describe_url, engine_url, explain


class AlreadyRunning(Exception):
    """Another service holds the database; the message names it and the holder (one line)."""


def process_info(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, from /proc; None if gone or unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def me() -> dict:
    """Who this process is, as a lock holder."""
    info = process_info(os.getpid())
    return {"pid": os.getpid(), "ppid": os.getppid(), "started": info[1] if info else None,
            "host": socket.gethostname()}


def judge(holder: dict | None) -> str:
    """``running`` (a live service here whose parent still runs), ``orphaned`` (a live service here
    whose parent is gone) or ``unknown``."""
    if not holder or not isinstance(holder.get("pid"), int):
        return "unknown"
    host = str(holder.get("host") or "")
    if not host or socket.gethostname()[:len(host)] != host:
        return "unknown"
    info = process_info(holder["pid"])
    if info is None or holder.get("started") is None:
        return "unknown"  # gone (the lock is about to be free), or not the process that wrote this
    ppid, started = info
    if started != holder["started"]:
        return "unknown"
    return "running" if ppid == holder.get("ppid") else "orphaned"


class _FileLock:
    def __init__(self, path: str, database: str):
        self.path, self.database = path, database
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise StoreError(f"cannot create the lock file {self.path} beside the database ({err.strerror}): "
                             "check that its folder exists and that this user may write there") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(me()).encode() + b"\n")
        self.fd = fd
        return True

    def holder(self) -> dict | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.loads(f.read() or "null")
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        """Still ours: the file at the path is the one locked (not removed or replaced)."""
        try:
            return self.fd is not None and os.stat(self.path).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the file stays: removing it would let two holders lock two files
            self.fd = None


class _PostgresLock:
    KEY = int.from_bytes(hashlib.sha256(b"jupyterhub-tenancy service").digest()[:8], "big", signed=True)

    def __init__(self, url: str, database: str):
        self.url, self.database = url, database
        who = me()
        name = f"tenancy-serve {who['pid']} {who['ppid']} {who['started']} {who['host']}"[:63]
        self.engine = create_engine(engine_url(url), poolclass=NullPool, connect_args={"application_name": name})
        self.conn = None

    def _connect(self):
        if self.conn is None:
            try:
                self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            except Exception as err:  # noqa: BLE001 - the driver's errors become the one line
                raise StoreError(explain(self.url, err)) from None
        return self.conn

    def try_acquire(self) -> bool:
        return bool(self._connect().execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.KEY}).scalar())

    #: the granted advisory lock of ours in this database (pg_locks splits a bigint key in two halves)
    _HELD = ("l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
             "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
             "AND l.classid::bigint = :hi AND l.objid::bigint = :lo")

    def _key_halves(self) -> dict:
        key = self.KEY & 0xFFFFFFFFFFFFFFFF
        return {"hi": key >> 32, "lo": key & 0xFFFFFFFF}

    def holder(self) -> dict | None:
        row = self._connect().execute(text(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE " + self._HELD),
            self._key_halves()).first()
        parts = (row[0] or "").split() if row else []
        if len(parts) < 4 or parts[0] != "tenancy-serve":
            return None
        try:
            return {"pid": int(parts[1]), "ppid": int(parts[2]),
                    "started": None if parts[3] == "None" else int(parts[3]), "host": " ".join(parts[4:])}
        except ValueError:
            return None

    def end_holder(self) -> bool:
        """End the session that holds the lock (not ours); True if one was ended."""
        ended = self._connect().execute(text(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.pid <> pg_backend_pid() AND " + self._HELD),
            self._key_halves()).all()
        return any(row[0] for row in ended)

    def alive(self) -> bool:
        try:
            return self.conn is not None and self.conn.execute(text("SELECT 1")).scalar() == 1
        except Exception:  # noqa: BLE001 - the connection (and with it the lock) is gone
            return False

    def release(self) -> None:
        if self.conn is not None:
            try:
                # at once: the server would release it only once this session's backend has ended
                self.conn.execute(text("SELECT pg_advisory_unlock_all()"))
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None
        self.engine.dispose()


class InstanceLock:
    """The lock of one database (``kind``: ``file``, ``postgresql`` or ``none``)."""

    def __init__(self, url: str):
        self.database = describe_url(url)
        u = make_url(url)
        backend = u.get_backend_name()
        if backend == "sqlite" and u.database not in (None, "", ":memory:"):
            self.kind, self._impl = "file", _FileLock(os.path.abspath(u.database) + ".lock", self.database)
        elif backend == "postgresql":
            self.kind, self._impl = "postgresql", _PostgresLock(url, self.database)
        else:  # an in-memory database is this process's alone; other servers: no lock (yet)
            self.kind, self._impl = "none", None

    def try_acquire(self) -> bool:
        return True if self._impl is None else self._impl.try_acquire()

    def holder(self) -> dict | None:
        return None if self._impl is None else self._impl.holder()

    def alive(self) -> bool:
        return True if self._impl is None else self._impl.alive()

    def release(self) -> None:
        if self._impl is not None:
            self._impl.release()

    def acquire(self, wait_seconds: float, log, *, elected: bool = False,
                grace_seconds: float = 3.0) -> "InstanceLock":
        """Take the lock, as the module's docstring says; AlreadyRunning when it cannot be had.
        ``elected``: this replica holds the leader election's Lease (a holder is a previous leader)."""
        if elected:
            return self._take_over(wait_seconds, grace_seconds, log)
        deadline = time.monotonic() + wait_seconds
        told = signalled = False
        while not self.try_acquire():
            holder = self.holder()
            state = judge(holder)
            who = _who(holder)
            if state == "running":
                raise AlreadyRunning(f"another tenancy service ({who}) is using the database {self.database}: "
                                     "only one may run per database; stop it first")
            if state == "orphaned" and not signalled:
                log.warning("another tenancy service (%s) holds the database %s but the process that started it "
                            "is gone: stopping it (SIGTERM)", who, self.database)
                try:
                    os.kill(holder["pid"], signal.SIGTERM)
                except OSError:
                    pass
                signalled = True
            elif not told:
                log.warning("another tenancy service (%s) holds the database %s: waiting up to %.0f s for it to exit",
                            who, self.database, wait_seconds)
                told = True
            if time.monotonic() >= deadline:
                raise AlreadyRunning(f"another tenancy service ({who}) still holds the database {self.database} "
                                     f"after {wait_seconds:.0f} s: only one may run per database; stop it first")
            time.sleep(0.2)
        return self


    def _take_over(self, wait_seconds: float, grace_seconds: float, log) -> "InstanceLock":
        start = time.monotonic()
        told = ended = False
        while not self.try_acquire():
            who = _who(self.holder())
            waited = time.monotonic() - start
            if not told:
                log.warning("the previous leader (%s) still holds the database %s: waiting up to %.0f s for it to "
                            "let go", who, self.database, wait_seconds)
                told = True
            if not ended and waited >= grace_seconds and isinstance(self._impl, _PostgresLock):
                if self._impl.end_holder():
                    log.warning("ended the previous leader's database session (%s): its lease had expired", who)
                ended = True
            if waited >= wait_seconds:
                raise AlreadyRunning(f"the previous leader ({who}) still holds the database {self.database} after "
                                     f"{wait_seconds:.0f} s although this replica holds the lease")
            time.sleep(0.2)
        return self


def _who(holder: dict | None) -> str:
    if not holder or not holder.get("pid"):
        return "pid unknown"
    here = socket.gethostname()
    host = str(holder.get("host") or "")
    return f"pid {holder['pid']}" + ("" if not host or here[:len(host)] == host else f" on {host}")
