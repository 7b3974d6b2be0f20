"""A real PostgreSQL server for the store's tests (Debian's ``postgresql`` package).

``postgres_server`` (session scope) runs ``initdb`` into a fresh folder and starts
``postgres`` on 127.0.0.1 on a free port, as the ``postgres`` system user when we are root
(postgres refuses to run as root), and stops it at the end. ``postgres_url`` (per test)
creates an empty database on it and drops it afterwards.

When PostgreSQL or the driver is missing the tests fail and say how to install them
(``scripts/test`` installs the server with apt-get when it can). ``TENANCY_SKIP_POSTGRES=1``
skips them instead, for local runs.
"""

from __future__ import annotations

import gc
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from waiting import wait_for

SKIP = os.environ.get("TENANCY_SKIP_POSTGRES") == "1"
SKIP_REASON = "TENANCY_SKIP_POSTGRES=1 asks to skip the PostgreSQL tests"
INSTALL = ("install it with `apt-get install postgresql` (Debian/Ubuntu; scripts/test does this when run as root), "
           "or set TENANCY_SKIP_POSTGRES=1 to skip these tests locally")


def bindir() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian's layout), or one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir
        self.user = None  # the system user the server runs as (None: this process's)
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root, PostgreSQL needs a system user to run as and there is no `postgres` "
                            "user: " + INSTALL, pytrace=False)
        self.base = Path(tempfile.mkdtemp(prefix="tenancy-pg-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.log = self.base / "postgres.log"
        if self.user is not None:
            os.chown(self.base, self.user.pw_uid, self.user.pw_gid)

    def _run_as(self) -> dict:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def start(self) -> "PostgresServer":
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        init = subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync", "--locale=C"],
            capture_output=True, text=True, env=env, cwd=self.base, **self._run_as())
        if init.returncode != 0:
            pytest.fail(f"initdb failed ({init.returncode}): {init.stderr.strip()[-2000:]}", pytrace=False)
        log = open(self.log, "ab")
        if self.user is not None:
            os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(
            [str(self.bin_dir / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port),
             "-k", "", "-F", "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.base,
            start_new_session=True, **self._run_as())
        log.close()

        def accepts():
            if self.proc.poll() is not None:
                pytest.fail(f"postgres exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}", pytrace=False)
            with self.connect("postgres"):  # raises while it is not up yet
                return True
        wait_for(accepts, "postgres to accept connections", 60, 0.2, show=lambda: self.log.read_text()[-2000:],
                 ignore=Exception)
        return self

    def connect(self, dbname: str):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname, autocommit=True,
                               connect_timeout=5)

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        name = "t_" + secrets.token_hex(6)
        with self.connect("postgres") as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # smart shutdown is SIGTERM; fast is SIGINT
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    if SKIP:
        pytest.skip(SKIP_REASON)
    found = bindir()
    if found is None:
        pytest.fail("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): " + INSTALL, pytrace=False)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("the PostgreSQL driver is missing: pip install -e '.[postgres]' (the test extra has it)",
                    pytrace=False)
    server = PostgresServer(found)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of a new, empty database on the test server (dropped afterwards)."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        # Connections a test left open are finalized now, not in the middle of some later
        # ast.parse (CPython 3.11.7 raises "AST constructor recursion depth mismatch" then).
        gc.collect()
        postgres_server.drop_database(name)
