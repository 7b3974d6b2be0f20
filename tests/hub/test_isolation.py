"""Isolation of workloads on the local backend, for real: the demo's hub run as root, as CI runs it.

Each user's notebooks and training jobs run as the user's own system account
(``jupyter-<name>``); a hostile job of alice's tries what a job could do when it ran as
the service's account (issue 8, finding 1): read the service's token from its
environment, its database, bob's logs, work folder and home, the hub's secrets, and use
any hub token it finds to join bob's team. Each attempt fails, as the job itself reports.
The service's environment holds no hub token, and the scopes it has change no group.

The hub's work dir here is one that other accounts may cross (``/tmp/tenancy-isolation-*``,
0711, as ``/srv`` would be), not pytest's private one: only the modes the hub and the
service give their own files protect them.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from demo_hub import API, service_pid, svc, token
from harness import free_port
from waiting import wait_for

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="per-user accounts need root (CI and the project's machine "
                                                      "run the tests as root)")

#: What alice's job runs: every attempt, then one JSON line; exit 0 only if nothing leaked.
HOSTILE = r'''
import glob, json, os, pwd, urllib.request
targets = json.loads(os.environ["TARGETS"])
out = {"uid": os.getuid(), "user": pwd.getpwuid(os.getuid()).pw_name, "groups": os.getgroups(),
       "euid": os.geteuid(), "attempts": {}, "environs": {}, "hub": {}}

def attempt(kind, path):
    try:
        if kind == "list":
            return "LEAKED " + repr(sorted(os.listdir(path))[:5])
        if kind == "write":
            with open(path, "w") as f:
                f.write("alice was here")
            return "LEAKED: wrote it"
        with open(path, "rb") as f:
            return "LEAKED " + repr(f.read(64))
    except OSError as err:
        return f"denied: {err.strerror}"

for name, (kind, path) in targets.items():
    out["attempts"][name] = attempt(kind, path)

# Every environment this job can read, and any hub token in one.
tokens = {}
for path in glob.glob("/proc/[0-9]*/environ"):
    pid = path.split("/")[2]
    try:
        with open(path, "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        with open(f"/proc/{pid}/status") as f:
            uid = int(next(line for line in f if line.startswith("Uid:")).split()[1])
    except (OSError, StopIteration, ValueError):
        continue
    token = env.get(b"JUPYTERHUB_API_TOKEN", b"").decode()
    out["environs"][pid] = {"uid": uid, "token": bool(token), "user": env.get(b"JUPYTERHUB_USER", b"").decode(),
                            "service": env.get(b"JUPYTERHUB_SERVICE_NAME", b"").decode()}
    if token:
        tokens[pid] = token

# With each token found: join bob's team, make our own team admin.
api = os.environ["HUB_API"]
for pid, token in tokens.items():
    for method, path, body in (("POST", "/groups/team-b/users", {"users": ["alice"]}),
                               ("PUT", "/groups/team-a/properties", {"tenancy.role": "admin"})):
        req = urllib.request.Request(api + path, method=method, data=json.dumps(body).encode(),
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
        try:
            status = urllib.request.urlopen(req, timeout=10).status
        except urllib.error.HTTPError as err:
            status = err.code
        except OSError as err:
            status = str(err)
        out["hub"][f"{pid} {method} {path}"] = status

print(json.dumps(out), flush=True)
mine = out["uid"]
leaked = [k for k, v in out["attempts"].items() if not v.startswith("denied")]
leaked += [p for p, e in out["environs"].items() if e["uid"] != mine or e["service"]]
leaked += [k for k, v in out["hub"].items() if v in (200, 201, 204)]
raise SystemExit(3 if leaked else 0)
'''


@pytest.fixture(scope="module")
def hub(hub_factory):
    if os.geteuid() != 0:
        pytest.skip("per-user accounts need root")
    work = Path(tempfile.mkdtemp(prefix="tenancy-isolation-", dir="/tmp"))
    os.chmod(work, 0o711)
    try:
        with hub_factory("isolation-hub", work=work) as h:
            # The harness's own files (its config holds its admin token) are not the product's: keep them ours.
            for path in (h.config_path, h.log_path):
                os.chmod(path, 0o600)
            h.state = work / "state"
            yield h
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pod(hub, workload_id: str) -> tuple[int | None, str | None]:
    with sqlite3.connect(hub.state / "tenancy.sqlite") as db:
        row = db.execute("select pid, log_path from pods where workload_id=? order by id limit 1",
                         (workload_id,)).fetchone()
    return (row[0], row[1]) if row else (None, None)


def _ids(pid: int) -> dict[str, list[int]]:
    with open(f"/proc/{pid}/status") as f:
        lines = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return {key: [int(x) for x in lines[key].split()] for key in ("Uid", "Gid", "Groups")}


def _finished(hub, user: str, workload_id: str, timeout: float = 90) -> dict:
    return wait_for(lambda: (lambda w: w if w["state"] in ("Succeeded", "Failed") else None)(
        svc(hub, user, "GET", f"/workloads/{workload_id}")[1]), f"workload {workload_id} to end", timeout=timeout)


def _submit(hub, user: str, **spec) -> dict:
    status, job = svc(hub, user, "POST", "/workloads", {"resources": {"requests": {"cpu": "1"}}, **spec})
    assert status == 201, job
    return job


@pytest.fixture(scope="module")
def bobs(hub):
    """bob's finished job (its log and work folder) and a secret in his home."""
    job = _submit(hub, "bob", name="bob-job", command=[
        "sh", "-c", "echo bob-log-secret; echo bob-home-secret > $HOME/secret.txt; echo bob-file > bob.txt"])
    assert _finished(hub, "bob", job["id"])["state"] == "Succeeded"
    _, log_path = _pod(hub, job["id"])
    return {"id": job["id"], "log": log_path, "folder": str(Path(log_path).parent),
            "home": pwd.getpwnam("jupyter-bob").pw_dir}


@as_root
def test_a_users_jobs_run_as_their_own_account_in_a_private_folder(hub, bobs):
    bob = pwd.getpwnam("jupyter-bob")
    for path, mode in ((bobs["folder"], 0o700), (bobs["log"], 0o600), (bobs["home"], 0o700)):
        st = os.lstat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (bob.pw_uid, mode), path
    assert Path(bobs["home"], "secret.txt").read_text() == "bob-home-secret\n"  # $HOME was his
    job = _submit(hub, "alice", name="alice-sleeps", command=["sleep", "300"])
    pid = wait_for(lambda: _pod(hub, job["id"])[0], "alice's job to start")
    alice = pwd.getpwnam("jupyter-alice")
    for proc in wait_for(lambda: [pid] + _children(pid) if _children(pid) else None, "the command under the runner"):
        ids = _ids(proc)
        assert ids["Uid"] == [alice.pw_uid] * 4 and ids["Gid"] == [alice.pw_gid] * 4, (proc, ids)
        assert set(ids["Groups"]) <= set(os.getgrouplist(alice.pw_name, alice.pw_gid)), ids  # none of root's
    svc(hub, "alice", "DELETE", f"/workloads/{job['id']}")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


@as_root
def test_a_hostile_job_reaches_no_token_no_database_and_nothing_of_bob(hub, bobs):
    service = service_pid(hub)
    state, work = hub.state, hub.workdir
    targets = {
        "the service's environment": ("read", f"/proc/{service}/environ"),
        "the service's memory": ("read", f"/proc/{service}/mem"),
        "the hub's environment": ("read", f"/proc/{hub.proc.pid}/environ"),
        "the service's database": ("read", str(state / "tenancy.sqlite")),
        "the service's state folder": ("list", str(state)),
        "every work folder": ("list", str(state / "workloads")),
        "the hub's database": ("read", str(work / "jupyterhub.sqlite")),
        "the hub's cookie secret": ("read", str(work / "jupyterhub_cookie_secret")),
        "bob's job log": ("read", bobs["log"]),
        "bob's work folder": ("list", bobs["folder"]),
        "a file in bob's work folder": ("read", str(Path(bobs["folder"]) / "bob.txt")),
        "writing into bob's work folder": ("write", str(Path(bobs["folder"]) / "alice.txt")),
        "bob's home": ("list", bobs["home"]),
        "a file in bob's home": ("read", str(Path(bobs["home"]) / "secret.txt")),
    }
    for suffix in ("-wal", "-shm"):
        if (state / f"tenancy.sqlite{suffix}").exists():
            targets[f"the service's database{suffix}"] = ("read", str(state / f"tenancy.sqlite{suffix}"))
    job = _submit(hub, "alice", name="hostile", script=HOSTILE,
                  env={"TARGETS": json.dumps(targets), "HUB_API": hub.hub_api_url})
    done = _finished(hub, "alice", job["id"])
    status, logs = svc(hub, "alice", "GET", f"/workloads/{job['id']}/logs")
    assert status == 200, logs
    report = json.loads(next(line for line in logs.splitlines() if line.startswith("{")))
    assert report["user"] == "jupyter-alice" and report["euid"] == report["uid"] != 0, report
    assert {k: v for k, v in report["attempts"].items() if not v.startswith("denied")} == {}, report["attempts"]
    assert set(report["attempts"]) == set(targets)
    # The environments it could read are its own account's (its notebook's, if any): none of the service's.
    strangers = {p: e for p, e in report["environs"].items() if e["uid"] != report["uid"] or e["service"]}
    assert strangers == {}, strangers
    assert all(code in (401, 403) for code in report["hub"].values()), report["hub"]
    assert done["state"] == "Succeeded", (done, report)  # the job's own verdict: exit 0, nothing leaked
    status, team_b = hub.api("GET", "/groups/team-b")
    assert "alice" not in team_b["users"]


@as_root
def test_a_job_log_is_read_by_its_owner_through_the_api_and_by_nobody_else(hub, bobs):
    job = _submit(hub, "alice", name="alice-log", command=["sh", "-c", "echo hello from alice"])
    assert _finished(hub, "alice", job["id"])["state"] == "Succeeded"
    status, logs = svc(hub, "alice", "GET", f"/workloads/{job['id']}/logs")
    assert (status, logs) == (200, "hello from alice\n")
    status, body = svc(hub, "bob", "GET", f"/workloads/{job['id']}/logs")
    assert status == 403 and "hello" not in json.dumps(body), body
    status, logs = svc(hub, "admin", "GET", f"/workloads/{job['id']}/logs")
    assert (status, logs) == (200, "hello from alice\n")  # admins read every log through the API


@as_root
def test_a_job_that_swaps_its_log_for_a_link_does_not_read_through_it(hub):
    db = hub.state / "tenancy.sqlite"
    job = _submit(hub, "alice", name="swap", command=[
        "sh", "-c", f'for f in *.log; do rm "$f"; ln -s {db} "$f"; done; echo swapped > /dev/null'])
    assert _finished(hub, "alice", job["id"])["state"] == "Succeeded"
    _, log_path = _pod(hub, job["id"])
    assert os.path.islink(log_path)  # it did swap it
    status, logs = svc(hub, "alice", "GET", f"/workloads/{job['id']}/logs")
    assert status == 200 and "SQLite" not in logs and "not its own file" in logs, logs


@as_root
def test_a_notebook_server_runs_as_its_users_account_in_a_private_home(hub):
    assert hub.start_server("alice", options={"profile": "small"}, token=token(hub, "alice"), check=False)[0] in (201, 202)
    hub.wait_server_ready("alice", timeout=90)
    status, model = hub.api("GET", "/users/alice")
    pid = model["servers"][""]["state"]["pid"]
    alice = pwd.getpwnam("jupyter-alice")
    assert _ids(pid)["Uid"] == [alice.pw_uid] * 4
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    assert env[b"HOME"].decode() == alice.pw_dir and env[b"USER"] == b"jupyter-alice"
    st = os.stat(alice.pw_dir)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (alice.pw_uid, 0o700)
    r = hub.request("GET", hub.server_url("alice") + "api/status", token=token(hub, "alice"))
    assert r.status_code == 200, r.text
    hub.stop_server("alice", timeout=60)


@as_root
def test_the_services_environment_holds_no_hub_token(hub):
    pid = service_pid(hub)
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    assert b"JUPYTERHUB_API_TOKEN" not in env and b"JPY_API_TOKEN" not in env
    assert b"JUPYTERHUB_API_URL" in env  # the hub's other settings are there
    assert svc(hub, "alice", "GET", "/me")[0] == 200  # and the service works with the token it took


@as_root
def test_the_services_scopes_change_no_group(hub):
    hub.ensure_user("admin", admin=True)
    status, made = hub.api("POST", "/users/admin/tokens", {"roles": ["tenancy-service"], "note": "as the service"})
    assert status in (200, 201), made
    as_service = made["token"]
    status, groups = hub.api("GET", "/groups", token=as_service)
    assert status == 200  # the token works: it reads what the service reads
    before = hub.api("GET", "/groups/team-b")[1]
    refused = {
        ("POST", "/groups/team-b/users"): {"users": ["alice"]},
        ("DELETE", "/groups/team-b/users"): {"users": ["bob"]},
        ("PUT", "/groups/team-a/properties"): {"tenancy.role": "admin"},
        ("POST", "/groups/team-z"): {},
        ("POST", "/groups"): {"groups": ["team-y"]},
        ("DELETE", "/groups/team-d"): None,
        ("PATCH", "/users/alice"): {"admin": True},
        ("POST", "/users/alice/tokens"): {},
        ("POST", "/users/alice/server"): {},
    }
    answers = {f"{m} {p}": hub.api(m, p, body, token=as_service)[0] for (m, p), body in refused.items()}
    assert all(code == 403 for code in answers.values()), answers
    assert hub.api("GET", "/groups/team-b")[1] == before


@as_root
def test_a_jobs_exit_status_outlives_the_service(hub):
    """The runner, as the job's account, records the status in the job's folder; a restarted
    service (root) reads it there."""
    job = _submit(hub, "alice", name="ends-alone", command=["sh", "-c", "sleep 2; exit 7"])
    wait_for(lambda: _pod(hub, job["id"])[0], "the job to start")
    _, log_path = _pod(hub, job["id"])
    exit_file = Path(log_path).with_suffix(".exit")
    old = service_pid(hub)
    # The job ends while nobody watches it: the service is stopped (the hub does not notice) until
    # the runner has recorded the status, then killed. Killed at once, the hub started a new one
    # within seconds, sometimes before the job ended: then it was watched ending.
    os.kill(old, signal.SIGSTOP)
    try:
        wait_for(exit_file.exists, "the job to end and its runner to record its status", timeout=60)
    finally:
        os.kill(old, signal.SIGKILL)
    wait_for(lambda: _service_pid_other_than(hub, old), "the hub to restart the service", timeout=90)
    wait_for(lambda: svc(hub, "alice", "GET", f"/workloads/{job['id']}")[0] == 200, "the API after the restart")
    done = _finished(hub, "alice", job["id"])
    assert done["state"] == "Failed", done
    assert any("exited with status 7 while the service was down" in e["message"] for e in done["events"]), done
    st = os.lstat(exit_file)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pwd.getpwnam("jupyter-alice").pw_uid, 0o600)


def _service_pid_other_than(hub, old: int) -> int | None:
    try:
        pid = service_pid(hub)
    except AssertionError:
        return None
    return pid if pid != old else None


def test_serve_started_by_hand_takes_its_token_out_of_its_environment(tmp_path):
    """``tenancy serve`` with JUPYTERHUB_API_TOKEN set (a hub of our own: it records what it is sent)."""
    seen = []

    class FakeHub(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env.update(JUPYTERHUB_API_TOKEN="by-hand-token", JUPYTERHUB_API_URL=f"http://127.0.0.1:{server.server_port}/hub/api")
    config = tmp_path / "tenancy_config.py"
    config.write_text(f"c.TenancyService.db_url = 'sqlite:///{tmp_path}/t.sqlite'\n"
                      f"c.LocalBackend.data_dir = '{tmp_path}/data'\n")
    proc = subprocess.Popen([sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(config), "--port", str(port)],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _answers(port), "the service to answer", timeout=60)
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            environ = f.read()
        assert b"by-hand-token" not in environ and b"JUPYTERHUB_API_TOKEN" not in environ
        wait_for(lambda: "token by-hand-token" in seen, "the service to call the hub with its token")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        server.shutdown()


def test_serve_without_a_hub_still_starts(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
    proc = subprocess.Popen([sys.executable, "-m", "hub_ext.cli", "serve", "--db", f"sqlite:///{tmp_path}/t.sqlite",
                             "--port", str(port), f"--LocalBackend.data_dir={tmp_path}/data"],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _answers(port), "the service to answer", timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{API}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
