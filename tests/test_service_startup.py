"""``tenancy serve`` as a process, without a hub: how it starts, refuses and carries on.

One service per database (a second exits at once with one line naming the holder), a file
that is not a database (one line with the path and the remedy, exit 1), a bad row (set
aside, logged, the service starts), a port held by someone else (waited for, within bounds).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from hub_ext.service.store import Store, describe_url
from waiting import wait_for

ROOT = Path(os.environ.get("TENANCY_TEST_ROOT", Path(__file__).resolve().parents[1]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(tmp_path: Path, db_url: str, port: int, *extra: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env.update({"PYTHONPATH": str(ROOT), "JUPYTERHUB_API_TOKEN": "x" * 32})  # no hub API: nothing asks it
    cmd = [sys.executable, "-m", "hub_ext.cli", "serve", "--db", db_url, "--port", str(port),
           "--config", str(tmp_path / "no-config.py"), f"--LocalBackend.data_dir={tmp_path / 'data'}", *extra]
    return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=stderr, text=True)


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/services/tenancy/api/v1/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float = 60) -> None:
    def answers():
        if healthy(port):
            return True
        if proc.poll() is not None:
            pytest.fail(f"tenancy serve exited with {proc.returncode}: {proc.stderr.read()}")
        return False
    wait_for(answers, "tenancy serve to answer its health check", timeout, 0.2)


def stop(proc: subprocess.Popen) -> str:
    """Stop it; its stderr."""
    if proc.poll() is None:
        proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    return err


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tenancy.sqlite"
    return request.getfixturevalue("postgres_url")


def test_a_file_that_is_not_a_database_is_one_line_and_exit_1(tmp_path):
    db = tmp_path / "tenancy.sqlite"
    db.write_bytes(b"\x00garbage, not SQLite\n" * 100)
    proc = serve(tmp_path, f"sqlite:///{db}", free_port())
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert err.strip().splitlines() == [
        f"tenancy serve: error: the database {db} is not a valid SQLite database (file is not a database): "
        "move it aside to start afresh, or restore a backup"]


def test_a_second_instance_is_refused_at_once_with_one_line(tmp_path, db_url):
    port = free_port()
    first = serve(tmp_path, db_url, port)
    try:
        wait_healthy(first, port)
        started = time.monotonic()
        second = serve(tmp_path, db_url, free_port())
        try:
            _, err = second.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stop(second)
            pytest.fail("a second service on the same database kept running")
        assert time.monotonic() - started < 20
        assert second.returncode == 1, err
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == (
            f"tenancy serve: error: another tenancy service (pid {first.pid}) is using the database "
            f"{describe_url(db_url)}: only one may run per database; stop it first")
        assert healthy(port)  # the first one is undisturbed
    finally:
        stop(first)


def test_a_bad_row_is_set_aside_and_the_service_starts(tmp_path, db_url):
    store = Store(db_url)
    from hub_ext.service.store import WorkloadRow

    for wid, kind in (("aaaa0001", "training"), ("bbbb0002", "batch")):
        store.add(WorkloadRow(id=wid, kind=kind, name=f"job-{wid}", user="alice", namespace="team-a", spec={
            "kind": "training", "priorityClassName": "high-priority-research", "command": ["sleep", "1"],
            "resources": {"requests": {"cpu": "1000"}, "limits": {}}, "replicas": 1, "env": {}},  # waits
            state="Pending", created=time.time(), succeeded=0))
    store.commit()
    store.close()
    port = free_port()
    proc = serve(tmp_path, db_url, port)
    try:
        wait_healthy(proc, port)
    finally:
        err = stop(proc)
    [line] = [line for line in err.splitlines() if "bbbb0002" in line]
    assert "quarantined at restore: unknown kind 'batch'" in line
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            states = dict(conn.execute(text("SELECT id, state FROM workloads")).all())
    finally:
        engine.dispose()
    assert states == {"aaaa0001": "Pending", "bbbb0002": "Quarantined"}


def test_a_port_held_by_another_process_is_waited_for_then_refused(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        started = time.monotonic()
        proc = serve(tmp_path, f"sqlite:///{tmp_path}/t.sqlite", port, "--TenancyService.lock_wait_seconds=2")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert err.strip().splitlines()[-1] == (
            f"tenancy serve: error: port {port} on 127.0.0.1 is still in use by another process after 2 s: "
            "stop it, or give the service another port")
        assert time.monotonic() - started >= 2
    finally:
        holder.close()


def test_a_port_freed_while_waiting_is_taken(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc = serve(tmp_path, f"sqlite:///{tmp_path}/t.sqlite", port, "--TenancyService.lock_wait_seconds=60",
                     stderr=err)
    try:
        def says_it_waits():
            assert proc.poll() is None, log.read_text()
            return f"port {port} on 127.0.0.1 is in use: waiting up to 60 s" in log.read_text()
        wait_for(says_it_waits, "tenancy serve to say it waits for the port", 60, 0.1, show=log.read_text)
        holder.close()
        wait_healthy(proc, port)
    finally:
        holder.close()
        stop(proc)


# -- the watchdog, against a stand-in hub API on 127.0.0.1 --------------------------------------
class _Lock:
    def __init__(self, alive=True):
        self._alive = alive

    def alive(self):
        return self._alive


async def _hub_api(status: int):
    """A server answering every request with ``status``; (its API URL, the server)."""
    from tornado import httpserver, web

    class Answer(web.RequestHandler):
        def get(self, *_):
            self.set_status(status)
            self.finish("{}")

    server = httpserver.HTTPServer(web.Application([(r"/hub/api/(.*)", Answer)]))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.setblocking(False)
    server.add_sockets([sock])
    return f"http://127.0.0.1:{sock.getsockname()[1]}/hub/api", server


@pytest.mark.asyncio
async def test_the_watchdog_lets_a_service_with_a_live_hub_run():
    import asyncio

    from hub_ext.service.watchdog import Watchdog

    url, server = await _hub_api(200)
    try:
        dog = Watchdog(parent=os.getppid(), hub=lambda: (url, "t" * 32), lock=_Lock(), check_seconds=0.2,
                       grace_seconds=1)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(dog.wait(), 3)
    finally:
        server.stop()


@pytest.mark.asyncio
async def test_the_watchdog_stops_a_service_whose_token_the_hub_refuses():
    from hub_ext.service.watchdog import Watchdog

    url, server = await _hub_api(403)
    try:
        why, status = await Watchdog(parent=None, hub=lambda: (url, "t" * 32), check_seconds=0.2).wait()
    finally:
        server.stop()
    assert status == 1 and "no longer accepts this service's token (HTTP 403" in why


@pytest.mark.asyncio
async def test_the_watchdog_stops_a_service_whose_hub_is_unreachable_past_the_grace():
    from hub_ext.service.watchdog import Watchdog

    dead = f"http://127.0.0.1:{free_port()}/hub/api"
    started = time.monotonic()
    why, status = await Watchdog(parent=None, hub=lambda: (dead, "t" * 32), grace_seconds=2, check_seconds=0.2).wait()
    assert 2 <= time.monotonic() - started < 8
    assert status == 1 and why.startswith(f"the hub API at {dead} has not answered for")


@pytest.mark.asyncio
async def test_the_watchdog_stops_a_service_whose_parent_is_gone_or_whose_lock_is_lost():
    from hub_ext.service.watchdog import Watchdog

    not_my_parent = os.getppid() + 1
    why, status = await Watchdog(parent=not_my_parent).wait()
    assert (why, status) == (f"the hub that started this service (pid {not_my_parent}) has exited", 0)
    why, status = await Watchdog(parent=None, lock=_Lock(alive=False)).wait()
    assert status == 1 and "database lock is lost" in why
