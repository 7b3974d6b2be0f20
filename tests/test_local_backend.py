"""The local backend: process handling on real processes (graceful stop, then kill; exit status kept);
the accounts users' pods run as; the refusal of a shared account; work folders the service never
reads through a link; the hub token out of the environment."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import subprocess
import sys
import time

import pytest

from hub_ext.backends.local import backend as backend_module
from hub_ext.backends.local.accounts import NAME_MAX, AccountError, account_name
from hub_ext.backends.local.backend import LocalBackend
from hub_ext.backends.local.processes import REPLACED_LOG, _alive, _read_exit
from hub_ext.backends.local.workdir import UnsafeFile, make_workdir, open_owned, read_owned
from hub_ext.quota.errors import ValidationError
from hub_ext.tenants import Tenant
from waiting import wait_for

STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: print('got SIGTERM', flush=True))\n" \
           "print('started', flush=True)\ntime.sleep(60)\n"
POLITE = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n" \
         "print('started', flush=True)\ntime.sleep(60)\n"


def _run(tmp_path, script):
    exit_file = tmp_path / "pod.exit"
    log = open(tmp_path / "pod.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "hub_ext.backends.local.runner", str(exit_file), "--",
                             sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    wait_for(lambda: b"started" in (tmp_path / "pod.log").read_bytes(), "the process to start", 20, 0.05)
    return proc, exit_file


def test_eviction_is_sigterm_then_the_grace_period_then_sigkill(tmp_path):
    proc, exit_file = _run(tmp_path, STUBBORN)
    started = time.monotonic()
    asyncio.run(LocalBackend().processes.terminate(proc.pid, grace=1.5))
    took = time.monotonic() - started
    proc.wait(timeout=10)
    assert 1.4 <= took < 10, took  # it waited the grace period, not less, then killed
    assert not _alive(proc.pid)
    assert b"got SIGTERM" in (tmp_path / "pod.log").read_bytes()  # asked first
    assert proc.returncode == -9  # the runner itself went with the group's SIGKILL


def test_a_pod_that_stops_on_sigterm_is_not_killed_and_its_status_is_kept(tmp_path):
    proc, exit_file = _run(tmp_path, POLITE)
    started = time.monotonic()
    asyncio.run(LocalBackend().processes.terminate(proc.pid, grace=30))
    assert time.monotonic() - started < 10  # no need to wait out the grace period
    assert proc.wait(timeout=10) == 3 and _read_exit(exit_file) == 3


def test_the_runner_reports_a_missing_command(tmp_path):
    exit_file = tmp_path / "x.exit"
    code = subprocess.run([sys.executable, "-m", "hub_ext.backends.local.runner", str(exit_file), "--",
                           "/nonexistent/command"], capture_output=True, text=True, timeout=30)
    assert code.returncode == 127 and "cannot run /nonexistent/command" in code.stderr
    assert _read_exit(exit_file) == 127 and not os.path.exists(str(exit_file) + ".tmp")


# -- whose account a user's pods run as ---------------------------------------------------

HASHED = re.compile(r"jupyter-[a-z0-9-]+--[0-9a-f]{10}\Z")


@pytest.mark.parametrize("user, account", [
    ("alice", "jupyter-alice"),
    ("bob-2", "jupyter-bob-2"),
    ("j_doe", "jupyter-j_doe"),
    ("x" * 24, "jupyter-" + "x" * 24),  # exactly 32 characters
])
def test_a_valid_system_name_goes_in_unchanged(user, account):
    assert account_name(user) == account


@pytest.mark.parametrize("user, slug", [
    ("j.doe@example.org", "jupyter-j-doe-exampl--"),  # cut to fit 32 characters
    ("Alice", "jupyter-alice--"),  # not alice's
    ("a--b", "jupyter-a-b--"),  # "--" marks the hashed form: a plain name never has it
    ("-x-", "jupyter-x--"),
    ("x" * 25, "jupyter-" + "x" * 12 + "--"),  # too long: cut, hashed
    ("ünïcödé", "jupyter-n-c-d--"),
    ("@@@", "jupyter-user--"),
])
def test_any_other_hub_name_becomes_a_slug_and_a_hash(user, slug):
    name = account_name(user)
    assert name.startswith(slug) and HASHED.match(name) and len(name) <= NAME_MAX, name
    assert account_name(user) == name  # the same every time


def test_account_names_never_collide():
    jdoe = account_name("j.doe@example.org")
    squatter = jdoe[len("jupyter-"):]  # a user who takes j.doe's account name as their hub name
    users = ["alice", "Alice", "ALICE", "alice_", "alice-", "a.lice", "a-lice", "a_lice", "j.doe@example.org",
             "j-doe@example.org", "j.doe@example.com", squatter, "x" * 24, "x" * 25, "x" * 26, "", "-", "--"]
    names = [account_name(u) for u in users]
    assert len(set(names)) == len(users), dict(zip(users, names))
    assert all(re.fullmatch(r"[a-z_][a-z0-9_-]*", n) and len(n) <= NAME_MAX for n in names)


def test_a_template_that_cannot_make_valid_accounts_is_refused():
    with pytest.raises(AccountError, match="leaves no room"):
        account_name("alice", "a-very-long-prefix-for-{username}")
    with pytest.raises(AccountError, match="not a valid system account name"):
        account_name("1bob", "{username}")
    assert account_name("alice", "u_{username}") == "u_alice"


# -- not root: one shared account, said and refused -----------------------------------------

def _shared(monkeypatch, **traits):
    monkeypatch.setattr(backend_module, "running_as_root", lambda: False)
    return LocalBackend(**traits)


def _tenant(group, *members):
    return Tenant(group=group, namespace=group, members=list(members))


def test_not_root_the_backend_says_all_users_share_its_account(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING):
        backend = _shared(monkeypatch)
    assert not backend.per_user
    [line] = [r.getMessage() for r in caplog.records if "LocalBackend" in r.getMessage()]
    assert "does not run as root, so every user's training jobs run as its own account" in line


@pytest.mark.parametrize("tenants", [
    [_tenant("team-a", "alice"), _tenant("team-b", "bob")],  # two tenants
    [_tenant("team-a", "alice", "bob")],  # two users
])
def test_not_root_a_multi_user_configuration_is_refused_unless_allowed(monkeypatch, tenants):
    with pytest.raises(ValidationError, match=r"c\.LocalBackend\.allow_shared_account = True"):
        _shared(monkeypatch).tenants_changed(tenants)
    _shared(monkeypatch, allow_shared_account=True).tenants_changed(tenants)  # the admin opted in


def test_not_root_one_user_in_one_tenant_is_fine(monkeypatch):
    _shared(monkeypatch).tenants_changed([_tenant("team-a", "alice")])
    _shared(monkeypatch).tenants_changed([])


def test_as_root_every_user_has_an_account_so_nothing_is_refused(monkeypatch):
    monkeypatch.setattr(backend_module, "running_as_root", lambda: True)
    LocalBackend().tenants_changed([_tenant("team-a", "alice"), _tenant("team-b", "bob")])


def test_the_services_sqlite_database_is_made_private(tmp_path):
    from traitlets import Unicode
    from traitlets.config import Configurable

    class Service(Configurable):
        db_url = Unicode()

    db = tmp_path / "tenancy.sqlite"
    for name in (db, tmp_path / "tenancy.sqlite-wal"):
        name.write_text("x")
        name.chmod(0o644)
    LocalBackend(parent=Service(db_url=f"sqlite:///{db}"))
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tenancy.sqlite-wal").stat().st_mode) == 0o600


# -- work folders: the service never follows what a user put there ---------------------------

def test_the_service_reads_a_pods_files_only_if_they_are_its_own(tmp_path):
    me = os.geteuid()
    folder = make_workdir(tmp_path, "w1", me, os.getegid())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "workloads").stat().st_mode) == 0o711
    secret = tmp_path / "secret"
    secret.write_text("the service's database")
    (folder / "p-0.log").symlink_to(secret)  # a pod replaced its log with a link
    (folder / "p-0.exit").symlink_to(secret)
    os.mkfifo(folder / "p-1.log")  # or with a FIFO, to hang the service
    row = type("Row", (), {"log_path": str(folder / "p-0.log")})
    assert LocalBackend().logs(None, row) == REPLACED_LOG
    row.log_path = str(folder / "p-1.log")
    assert LocalBackend().logs(None, row) == REPLACED_LOG  # and did not block
    assert _read_exit(folder / "p-0.exit") is None
    assert read_owned(secret, me + 1) is None  # someone else's file
    for name in ("p-0.log", "p-1.log"):
        with pytest.raises(UnsafeFile):
            open_owned(folder, name, os.O_WRONLY | os.O_APPEND, me, os.getegid())
    assert secret.read_text() == "the service's database"
    fd = open_owned(folder, "p-2.log", os.O_WRONLY | os.O_APPEND, me, os.getegid())
    os.write(fd, b"hello\n")
    os.close(fd)
    assert stat.S_IMODE((folder / "p-2.log").stat().st_mode) == 0o600
    assert read_owned(folder / "p-2.log", me) == b"hello\n"


def test_the_hub_token_leaves_the_environment_through_a_pipe():
    code = ("from hub_ext.service.hub import take_hub_token, hub_token\n"
            "take_hub_token()\n"
            "import json, os\n"
            "env = open('/proc/self/environ', 'rb').read().decode()\n"
            "print(json.dumps({'token': hub_token(), 'in_proc': 'JUPYTERHUB_API_TOKEN' in env,\n"
            "                  'in_os': 'JUPYTERHUB_API_TOKEN' in os.environ, 'fd': 'TENANCY_HUB_TOKEN_FD' in os.environ,\n"
            "                  'pid': os.getpid()}))\n")
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": "s3cret-token"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    out = json.loads(proc.communicate(timeout=60)[0])
    assert out == {"token": "s3cret-token", "in_proc": False, "in_os": False, "fd": False, "pid": proc.pid}
