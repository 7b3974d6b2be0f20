"""The store on both databases it supports: SQLite and a real PostgreSQL server (tests/postgres.py).

Round trips, keyset pagination with filters applied before the page is cut, the lock that
keeps one service per database, rows that cannot be read moved aside, and a restart that
restores the queue from the database (bad rows quarantined, the others restored).
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from hub_ext.backends.local import LocalBackend
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.lock import AlreadyRunning, InstanceLock, process_info
from hub_ext.service.store import EventRow, PodRow, Store, StoreError, WorkloadRow, encode_continue
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
LOG = logging.getLogger("tenancy.test")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tenancy.sqlite"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def stores(db_url):
    """``open()`` -> a Store on the test's database; all are closed at the end."""
    opened = []

    def open_store() -> Store:
        opened.append(Store(db_url))
        return opened[-1]

    yield open_store
    for store in opened:
        store.close()


def raw_sql(url: str, *statements: str, **params) -> None:
    """Write behind the store's back (as a damaged or hand-edited database would be), foreign keys off."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SET session_replication_role = replica"))  # no foreign key checks
            for statement in statements:
                conn.execute(text(statement), params)
    finally:
        engine.dispose()


def workload(wid: str, created: float, *, user="alice", namespace="team-a", state="Pending", kind="training",
             spec=None) -> WorkloadRow:
    return WorkloadRow(id=wid, kind=kind, name=f"w-{wid}", user=user, namespace=namespace, tenant=None,
                       spec=spec if spec is not None else {"kind": kind, "replicas": 1}, state=state, created=created,
                       succeeded=0)


# -- round trips --------------------------------------------------------------------------
def test_rows_come_back_as_written_after_reopening(stores):
    store = stores()
    spec = {"kind": "training", "command": ["python", "-c", "print('é')"], "env": {"A": "1"},
            "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}}, "replicas": 2}
    row = workload("a1", 1000.25, spec=spec)
    row.pods.append(PodRow(index=0, name="w-a1-0", phase="Running", node="n1", created=1000.5, admitted_at=1001.0,
                           reason={"code": "quota-max", "details": {"need": 1}}, pid=4242, log_path="/x/log"))
    store.add(row)
    store.record(1002.0, "started", "w-a1-0 admitted on n1", "a1", {"node": "n1"})
    store.set_setting("tree", {"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree"})
    store.commit()
    store.close()

    again = stores()
    got = again.workload("a1")
    assert (got.kind, got.name, got.user, got.namespace, got.state, got.created) == \
        ("training", "w-a1", "alice", "team-a", "Pending", 1000.25)
    assert got.spec == spec
    [pod] = got.pods
    assert (pod.name, pod.phase, pod.node, pod.created, pod.admitted_at, pod.pid, pod.log_path) == \
        ("w-a1-0", "Running", "n1", 1000.5, 1001.0, 4242, "/x/log")
    assert pod.reason == {"code": "quota-max", "details": {"need": 1}}
    [ev] = again.events("a1")
    assert (ev.type, ev.message, ev.details) == ("started", "w-a1-0 admitted on n1", {"node": "n1"})
    assert again.setting("tree")["kind"] == "ElasticQuotaTree"
    assert again.active_workload_ids() == ["a1"]
    assert again.moved_aside == [] and again.quarantined() == []


def test_events_are_read_back_before_their_commit_and_go_with_a_rollback_or_a_revert(stores):
    """Events are written together at the commit, not as ORM objects: read back before it all the
    same, in order; a rollback drops them; reverting a workload drops its own only."""
    store = stores()
    store.add(workload("e1", 1.0))
    store.add(workload("e2", 1.0))
    store.commit()
    store.record(2.0, "submitted", "one", "e1")
    store.record(3.0, "waiting", "two", "e1", {"resource": "cpu"})
    assert [(e.type, e.message, e.details) for e in store.events("e1")] == \
        [("submitted", "one", None), ("waiting", "two", {"resource": "cpu"})]
    store.record(4.0, "started", "three", "e1")
    store.rollback()
    assert store.events("e1") == []
    store.record(5.0, "started", "kept", "e2")
    store.record(5.0, "started", "dropped", "e1")
    store.revert(store.workload("e1"))
    store.commit()
    store.close()
    again = stores()
    assert [e.message for e in again.events("e2")] == ["kept"] and again.events("e1") == []


@pytest.mark.parametrize("setting, value", [("NORMAL", 1), ("full", 2)])
def test_sqlite_synchronous_is_applied_and_a_wrong_one_is_one_line(tmp_path, setting, value):
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}", sqlite_synchronous=setting)
    try:
        assert store.session.execute(text("PRAGMA synchronous")).scalar() == value
    finally:
        store.close()
    with pytest.raises(StoreError, match="sqlite_synchronous must be one of OFF, NORMAL, FULL, EXTRA, not 'sometimes'"):
        Store(f"sqlite:///{tmp_path / 't.sqlite'}", sqlite_synchronous="sometimes")


# -- listings ------------------------------------------------------------------------------
def _all_pages(store, limit, **filters):
    pages, after = [], None
    while True:
        rows, after = store.workloads(limit=limit, after=after, **filters)
        pages.append([r.id for r in rows])
        if after is None:
            return pages
        assert len(pages) < 1000


def test_pages_are_newest_first_and_cover_every_row_once(stores):
    store = stores()
    # ties on `created` (the same second) are broken by id, so no row is skipped or repeated
    for i in range(23):
        store.add(workload(f"w{i:02d}", 100.0 + i // 4))
    store.commit()
    expected = [r for r in sorted((f"w{i:02d}" for i in range(23)), key=lambda w: (100 + int(w[1:]) // 4, w),
                                  reverse=True)]
    pages = _all_pages(store, 5)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [w for p in pages for w in p] == expected
    rows, after = store.workloads(limit=23)
    assert len(rows) == 23 and after is None  # exactly full: no empty next page


def test_a_row_added_while_paging_neither_shifts_nor_repeats_the_pages(stores):
    store = stores()
    for i in range(10):
        store.add(workload(f"w{i}", 100.0 + i))
    store.commit()
    first, after = store.workloads(limit=4)
    store.add(workload("new", 500.0))  # newest: it belongs before the first page, not in the next
    store.commit()
    rest = []
    while after is not None:
        rows, after = store.workloads(limit=4, after=after)
        rest += [r.id for r in rows]
    assert [r.id for r in first] == ["w9", "w8", "w7", "w6"]
    assert rest == ["w5", "w4", "w3", "w2", "w1", "w0"]


def test_filters_apply_before_the_page_is_cut(stores):
    store = stores()
    # 600 finished jobs, newer than the 3 that still wait: the old listing (newest 500, then
    # ?state=Pending) found none of the waiting ones
    for i in range(3):
        store.add(workload(f"p{i}", 10.0 + i, state="Pending"))
    for i in range(600):
        store.add(workload(f"s{i:03d}", 1000.0 + i, state="Succeeded"))
    store.add(workload("nb", 5000.0, kind="notebook", state="Running", user="bob", namespace="team-b"))
    store.commit()
    rows, after = store.workloads(state="Pending", limit=100)
    assert [r.id for r in rows] == ["p2", "p1", "p0"] and after is None
    rows, _ = store.workloads(state=["Pending", "Running"], limit=10)
    assert [r.id for r in rows] == ["nb", "p2", "p1", "p0"]
    rows, _ = store.workloads(kind="notebook")
    assert [r.id for r in rows] == ["nb"]
    rows, _ = store.workloads(kind=["training"], state="Pending", limit=2)
    assert [r.id for r in rows] == ["p2", "p1"]
    assert sum(len(p) for p in _all_pages(store, 100, state="Succeeded")) == 600  # no stop at 500
    assert store.workloads(state=[])[0] == []


def test_who_may_see_what_keeps_its_meaning(stores):
    store = stores()
    store.add(workload("a", 1.0, user="alice", namespace="team-a"))
    store.add(workload("b", 2.0, user="bob", namespace="team-b"))
    store.add(workload("c", 3.0, user="alice", namespace="team-c"))  # alice's, in a team she left
    store.add(workload("d", 4.0, user="dave", namespace="team-d"))
    store.commit()

    def ids(**kw):
        return [r.id for r in store.workloads(**kw)[0]]

    assert ids() == ["d", "c", "b", "a"]  # namespaces=None: all (an admin)
    assert ids(namespaces=["team-a", "team-b"]) == ["b", "a"]
    assert ids(user="alice", namespaces=["team-b"]) == ["c", "b", "a"]  # her own anywhere, or her teams'
    assert ids(user="alice", namespaces=[]) == ["c", "a"]
    assert ids(user="alice", namespaces=[], state="Pending", limit=1) == ["c"]


@pytest.mark.parametrize("token", [
    "not base64!", "zzz", base64.urlsafe_b64encode(b"[1]").decode(), base64.urlsafe_b64encode(b'["1", "x"]').decode(),
    base64.urlsafe_b64encode(b'[NaN, "x"]').decode(), base64.urlsafe_b64encode(b'[true, "x"]').decode(),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(), "A" * 5000,
], ids=["not-base64", "short", "one-item", "string-time", "nan", "bool", "not-utf8", "long"])
def test_a_malformed_continue_token_is_a_value_error_naming_it(stores, token):
    store = stores()
    with pytest.raises(ValueError) as info:
        store.workloads(after=token)
    message = str(info.value)
    assert "\n" not in message and "continue token" in message and token[:20] in message
    assert len(message) < 300  # a short prefix of the input, never all of it


def test_limit_must_be_positive(stores):
    with pytest.raises(ValueError, match="limit"):
        stores().workloads(limit=0)


def test_the_token_is_opaque_and_round_trips_exactly(stores):
    store = stores()
    created = 1767225600.123456  # full float precision: the boundary row is excluded exactly
    store.add(workload("x", created))
    store.add(workload("y", created))
    store.commit()
    rows, after = store.workloads(limit=1)
    assert [r.id for r in rows] == ["y"] and after == encode_continue(created, "y")
    assert [r.id for r in store.workloads(after=after)[0]] == ["x"]


def test_sqlite_listings_walk_an_index_not_a_sort(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/t.sqlite")
    try:
        for filters in ({}, {"namespaces": ["team-a"]}, {"state": "Pending"}):
            q = str(_compiled(store, **filters))
            plan = " ".join(r[-1] for r in store.session.execute(text("EXPLAIN QUERY PLAN " + q)))
            assert "INDEX ix_workloads_" in plan and "TEMP B-TREE" not in plan, (filters, plan)
    finally:
        store.close()


def _compiled(store, **filters):
    """The listing's SELECT with its parameters inlined (for EXPLAIN)."""
    from sqlalchemy import select

    from hub_ext.service.store import WorkloadRow as W
    q = select(W)
    if "namespaces" in filters:
        q = q.where(W.namespace.in_(filters["namespaces"]))
    if "state" in filters:
        q = q.where(W.state.in_([filters["state"]]))
    q = q.order_by(W.created.desc(), W.id.desc()).limit(101)
    return q.compile(store.engine, compile_kwargs={"literal_binds": True})


# -- one service per database ----------------------------------------------------------------
def test_a_second_lock_on_the_same_database_is_refused_at_once_naming_the_holder(db_url):
    first = InstanceLock(db_url).acquire(5, LOG)
    try:
        second = InstanceLock(db_url)
        assert not second.try_acquire()
        assert second.holder()["pid"] == os.getpid()
        started = time.monotonic()
        with pytest.raises(AlreadyRunning) as info:
            second.acquire(30, LOG)  # a live holder whose parent lives: no waiting
        assert time.monotonic() - started < 5
        message = str(info.value)
        assert f"pid {os.getpid()}" in message and first.database in message and "\n" not in message
    finally:
        first.release()
    assert second.try_acquire()  # free once the holder lets go
    second.release()


HOLDER = r"""
import os, sys, time, logging
from hub_ext.service.lock import InstanceLock
url, ready = sys.argv[1], sys.argv[2]
if os.fork() == 0:  # the child holds the lock; its parent exits, as a hub killed with SIGKILL
    InstanceLock(url).acquire(10, logging.getLogger())
    open(ready, "w").write(str(os.getpid()))
    time.sleep(120)
    os._exit(0)
while not (os.path.exists(ready) and open(ready).read()):  # the pid written whole: one short write
    time.sleep(0.05)
"""


def test_an_orphaned_holder_is_stopped_and_its_lock_taken(db_url, tmp_path):
    ready = tmp_path / "ready"
    subprocess.run([sys.executable, "-c", HOLDER, db_url, str(ready)], cwd=ROOT, check=True, timeout=60)
    orphan = int(ready.read_text())
    try:
        assert process_info(orphan) is not None  # it outlived its parent, holding the lock
        assert not InstanceLock(db_url).try_acquire() or pytest.fail("the orphan does not hold the lock")
        started = time.monotonic()
        lock = InstanceLock(db_url).acquire(20, LOG)
        assert time.monotonic() - started < 15
        lock.release()
        wait_for(lambda: process_info(orphan) is None, "the orphan to be stopped", 10, 0.1)
    finally:
        if process_info(orphan) is not None:
            os.kill(orphan, signal.SIGKILL)


def test_a_holder_that_cannot_be_judged_is_waited_for_within_bounds(tmp_path):
    db = tmp_path / "t.sqlite"
    fd = os.open(str(db) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({"pid": 4321, "ppid": 1, "started": 1, "host": "another-host"}).encode())
        started = time.monotonic()
        with pytest.raises(AlreadyRunning, match=r"pid 4321 on another-host\) still holds the database .*t.sqlite after 1 s"):
            InstanceLock(f"sqlite:///{db}").acquire(1, LOG)
        assert 0.9 <= time.monotonic() - started < 5
    finally:
        os.close(fd)


def test_a_lost_lock_is_noticed(db_url):
    """The watchdog asks alive(): a lock file removed, or the PostgreSQL session that held the lock ended."""
    lock = InstanceLock(db_url).acquire(5, LOG)
    try:
        assert lock.alive()
        if lock.kind == "file":
            os.unlink(lock._impl.path)
        else:
            raw_sql(db_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE application_name LIKE 'tenancy-serve %'")
        assert not lock.alive()
    finally:
        lock.release()


# -- what cannot be read ----------------------------------------------------------------------
def test_a_file_that_is_not_a_database_is_one_line_with_the_path_and_remedy(tmp_path):
    db = tmp_path / "tenancy.sqlite"
    db.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{db}")
    assert str(info.value) == (f"the database {db} is not a valid SQLite database (file is not a database): "
                               "move it aside to start afresh, or restore a backup")


def test_a_damaged_page_is_found_when_the_store_opens(tmp_path):
    db = tmp_path / "tenancy.sqlite"
    store = Store(f"sqlite:///{db}")
    for i in range(300):
        store.add(workload(f"w{i:03d}", float(i), spec={"kind": "training", "pad": "x" * 300}))
    store.commit()
    store.close()
    data = bytearray(db.read_bytes())
    page = 4096
    for offset in range(3 * page, len(data) - page, 7 * page):  # scribble over some b-tree pages
        data[offset:offset + 64] = os.urandom(64)
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=rf"the database {db} is (damaged|not a valid SQLite database) .*move it aside"):
        Store(f"sqlite:///{db}")


def _bad_json(url: str) -> str:
    # PostgreSQL's json type refuses invalid JSON, so there a bad row is JSON of the wrong shape
    return '"a string, not an object"' if url.startswith("postgresql") else '{"kind": "training", oops'


def test_rows_that_cannot_be_read_are_moved_aside_with_their_data(db_url, stores):
    store = stores()
    store.add(workload("good", 1.0))
    store.add(workload("bad", 2.0))
    store.add(workload("badpod", 3.0))
    store.commit()
    store.close()
    raw_sql(db_url,
            "UPDATE workloads SET spec = :bad WHERE id = 'bad'",
            "INSERT INTO pods (workload_id, \"index\", name, phase, created, reason) "
            "VALUES ('badpod', 0, 'p-0', 'Pending', 3.0, :bad)",
            "INSERT INTO pods (workload_id, \"index\", name, phase, created) VALUES ('gone', 0, 'g-0', 'Running', 4.0)",
            bad=_bad_json(db_url))
    again = stores()
    moved = {(q.source, q.row_id): q for q in again.moved_aside}
    assert set(moved) == {("workloads", "bad"), ("workloads", "badpod"), ("pods", "gone")}
    assert "workloads.spec" in moved["workloads", "bad"].error
    assert "pods.reason" in moved["workloads", "badpod"].error
    assert moved["pods", "gone"].error == "its workload is gone"
    # the data is kept, as it was stored
    kept = json.loads(moved["workloads", "bad"].data)
    assert kept["workloads"][0]["id"] == "bad" and kept["workloads"][0]["user"] == "alice"
    assert json.loads(moved["workloads", "badpod"].data)["pods"][0]["name"] == "p-0"
    assert json.loads(moved["pods", "gone"].data)["pods"][0]["name"] == "g-0"
    line = moved["workloads", "bad"].describe()
    assert "\n" not in line and "workload bad moved aside" in line and "table quarantine" in line
    # the rest is usable: listings, and the next opening finds nothing more
    assert [r.id for r in again.workloads()[0]] == ["good"]
    assert {(q.source, q.row_id) for q in again.quarantined()} == set(moved)
    again.close()
    assert stores().moved_aside == []


# -- a restart ---------------------------------------------------------------------------------
ADMIN = Identity(name="admin", admin=True)


def _controller(store, tmp_path) -> Controller:
    backend = LocalBackend(nodes_config=[{"name": "n1", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
                           data_dir=str(tmp_path / "data"))
    return Controller(store=store, backend=backend, tree=None)


def _job(name: str, cpu: str = "2") -> dict:
    return {"kind": "training", "name": name, "namespace": "team-a", "command": ["sleep", "60"],
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}


@pytest.mark.asyncio
async def test_a_restart_restores_the_queue_from_the_database(db_url, stores, tmp_path):
    first = _controller(stores(), tmp_path)
    ids = [first.submit(ADMIN, _job(f"j{i}")).id for i in range(4)]
    before = {w: first.view(first.store.workload(w)) for w in ids}
    assert [before[w]["position"] for w in ids] == [1, 2, 3, 4]  # nothing started: all wait, in order
    first.store.close()

    second = _controller(stores(), tmp_path)
    assert await second.restore() == 4
    after = {w: second.view(second.store.workload(w)) for w in ids}
    for w in ids:
        assert (after[w]["state"], after[w]["position"], after[w]["created"]) == \
            (before[w]["state"], before[w]["position"], before[w]["created"])
    assert any(e.type == "restored" for e in second.store.session.query(EventRow))


@pytest.mark.asyncio
async def test_a_restart_quarantines_bad_rows_and_restores_the_others(db_url, stores, tmp_path, caplog):
    first = _controller(stores(), tmp_path)
    good, kind, spec, unreadable = (first.submit(ADMIN, _job(f"j{i}", cpu="1")).id for i in range(4))
    first.store.close()
    raw_sql(db_url,
            "UPDATE workloads SET kind = 'batch' WHERE id = :kind",
            # a spec that no longer makes a pod (as if stored by an older version)
            "UPDATE workloads SET spec = :spec WHERE id = :bad",
            "UPDATE workloads SET spec = :unreadable WHERE id = :u",
            kind=kind, bad=spec, u=unreadable, unreadable=_bad_json(db_url),
            spec=json.dumps({"kind": "training", "priorityClassName": "high-priority-research",
                             "resources": {"requests": {"cpu": "lots"}}}))
    caplog.set_level(logging.ERROR, logger="tenancy")
    second = _controller(stores(), tmp_path)
    assert await second.restore() == 1
    assert set(second.rows) == {good}
    assert second.view(second.store.workload(good))["position"] == 1
    for wid, why in ((kind, "unknown kind 'batch'"), (spec, "'lots' is not a quantity")):
        row = second.store.workload(wid)
        assert row.state == "Quarantined" and why in row.message and "was Pending" in row.message
        assert [e.type for e in second.store.events(wid)][-1] == "quarantined"
    assert second.store.workload(unreadable) is None  # moved aside whole
    assert [q.row_id for q in second.store.quarantined()] == [unreadable]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 3 and all("\n" not in line for line in lines)
    for wid in (kind, spec, unreadable):
        [line] = [line for line in lines if wid in line]
        assert "quarantine" in line.lower() and ("repair" in line or "submit it again" in line)
    # quarantined rows stay out of the queue at the next restart too, and the good one runs on
    second.store.close()
    third = _controller(stores(), tmp_path)
    assert await third.restore() == 1 and set(third.rows) == {good}
