"""The lab extension's server part in real single-user servers of the real demo hub: it calls
the scheduler service with the server's own token, streams changes to the page, answers the
dry run, and says a plain sentence when the service is down; ``tenancy`` works in a Lab
terminal; a job that would stop the user's own server asks for ``--yes`` first.
(The pages themselves: test_lab_browser.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlparse

import psutil
import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from demo_hub import leaf_used, svc, token
from harness import free_port
from kernel import run_code
from waiting import wait_for


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("lab-hub") as h:
        yield h


def lab_api(hub, user: str, path: str, method: str = "GET", body=None):
    """``method`` on ``/user/USER/tenancy/api/PATH`` with the user's token: (status, JSON or text)."""
    r = hub.request(method, hub.server_url(user) + "tenancy/api/" + path, token=token(hub, user), json=body)
    ctype = r.headers.get("Content-Type", "")
    return r.status_code, (r.json() if "json" in ctype else r.text)


def read_events(url: str, tok: str, until, timeout: float = 30) -> list[tuple[str, dict]]:
    """(event name, data) pairs of a server-sent event stream, read until ``until(name, data)`` holds."""
    import http.client

    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers={"Authorization": f"token {tok}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()[:300]
    out, name, deadline = [], "message", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            line = resp.readline().decode()
            if not line:
                break
            if line.startswith("event: "):
                name = line[7:].strip()
            elif line.startswith("data: "):
                out.append((name, json.loads(line[6:])))
                if until(*out[-1]):
                    return out
                name = "message"
    finally:
        conn.close()
    raise AssertionError(f"the stream ended or timed out first: {[n for n, _ in out]}")


def test_the_server_extension_shows_my_team_with_the_servers_own_token(hub):
    status, body = hub.start_server("alice", "", {"profile": "small"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", timeout=90)
    status, state = lab_api(hub, "alice", "state")
    assert status == 200, state
    assert state["available"] and state["ok"] and state["user"] == "alice"
    assert state["tenant"]["group"] == "team-a" and "high-priority-research" in state["tenant"]["priorityClasses"]
    assert [n["name"] for n in state["path"]] == ["root.a.1", "root.a", "root"]
    cpu = state["path"][0]["resources"][0]
    assert (cpu["resource"], cpu["used"], cpu["min"], cpu["max"]) == ("cpu", 5, 10, 20)
    [notebook] = [w for w in state["workloads"] if w["kind"] == "notebook"]
    assert notebook["state"] == "Running" and state["server"]["workloadId"] == notebook["id"]
    # Without a login of the server's, nothing: jupyter-server's own authentication guards it.
    assert hub.request("GET", hub.server_url("alice") + "tenancy/api/state").status_code in (302, 403)
    assert hub.request("GET", hub.server_url("alice") + "tenancy/api/state",
                       token=token(hub, "bob")).status_code in (302, 403)


def relays_the_service(hub, user: str) -> bool:
    """Whether the user's server holds a connection to the tenancy service. Its calls for a snapshot
    close theirs once answered: after the page's first snapshot, one held is the service's event
    stream, which the server relays to the page."""
    port = int(hub.extra_env["TENANCY_SERVICE_PORT"])
    for pid in hub.processes():
        try:
            proc = psutil.Process(pid)
            if proc.environ().get("JUPYTERHUB_USER") == user and any(
                    c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port == port
                    for c in proc.net_connections("tcp")):
                return True
        except psutil.Error:  # gone meanwhile, or not ours to read
            continue
    return False


def test_changes_stream_to_the_page_through_the_server(hub):
    submitted = {}

    def until(name, data):
        if not submitted:  # the page has its first snapshot; once the server follows the service, a change
            wait_for(lambda: relays_the_service(hub, "alice"), "alice's server to follow the service's events")
            submitted.update(lab_api(hub, "alice", "workloads", "POST", {
                "command": ["sleep", "60"], "name": "streamed", "resources": {"requests": {"cpu": "1"}}})[1])
            return False
        return name == "state" and any(w["id"] == submitted["id"] for w in data["workloads"])

    seen = read_events(hub.server_url("alice") + "tenancy/api/events", token(hub, "alice"), until=until)
    assert seen[0][0] == "state" and seen[0][1]["ok"]  # a snapshot at once
    job = next(data for name, data in seen if name == "workload" and data["id"] == submitted["id"])
    assert job["name"] == "streamed" and job["namespace"] == "team-a"
    status, logs = lab_api(hub, "alice", f"workloads/{job['id']}/logs")
    assert status == 200
    status, cancelled = lab_api(hub, "alice", f"workloads/{job['id']}", "DELETE")
    assert status == 200 and cancelled["state"] == "Cancelled"
    status, refused = lab_api(hub, "alice", "workloads", "POST", {"command": "not a list"})
    assert status == 400 and refused["error"] == "workload: command must be a non-empty list of strings"


def test_a_job_that_would_stop_my_own_server_asks_first(hub):
    # team-a: alice's notebook (5, low priority) + a 15-CPU job = its max of 20. Another job of
    # hers at high priority would take the room of her own, lower-priority notebook.
    status, filler = svc(hub, "alice", "POST", "/workloads", {"command": ["sleep", "300"], "name": "filler",
                                                            "resources": {"requests": {"cpu": "15"}}})
    assert status == 201 and filler["state"] == "Running", filler
    before = len(svc(hub, "alice", "GET", "/workloads?mine=true")[1]["workloads"])
    job = {"command": ["sleep", "30"], "name": "big", "resources": {"requests": {"cpu": "5"}}}
    status, dry = lab_api(hub, "alice", "workloads?dryRun=true", "POST", job)
    assert status == 200 and dry["dryRun"] is True, dry
    assert dry["state"] == "Pending" and dry["startsAfterEvictions"] is True
    [victim] = dry["evictions"]
    assert (victim["kind"], victim["user"], victim["serverName"]) == ("notebook", "alice", "")
    assert victim["message"] == "Preempted by team-a/big-0: lower priority (low-priority-dev) than high-priority-research"
    assert len(svc(hub, "alice", "GET", "/workloads?mine=true")[1]["workloads"]) == before  # nothing stored
    assert leaf_used(hub, "root.a.1") == "20"
    # At low priority it would just wait, evicting nobody.
    status, dry = svc(hub, "alice", "POST", "/workloads?dryRun=true", {**job, "priorityClassName": "low-priority-dev"})
    assert (dry["state"], dry["reason"], dry["evictions"]) == ("Pending", "quota-max", [])
    # From the notebook and from its terminal's command: refused, with which server and what to do.
    out = run_code(hub, "alice", token(hub, "alice"), (
        "from hub_ext.client import submit_training, TenancyError\n"
        "try:\n    submit_training(['sleep', '30'], cpu=5, name='big')\n"
        "except TenancyError as err:\n    print(err)\n"))
    assert out.strip().startswith(
        "This job would stop your default server (nb-alice) to make room, and unsaved work there would be lost. Submit "
        "it again with --yes (yes=True in Python) to go ahead anyway, or with --wait-instead (wait_instead=True) to "
        "submit it at low-priority-dev, where it stops nobody and it would wait"), out
    env = {**os.environ, "TENANCY_API_URL": hub.url("/services/tenancy/api/v1"),
           "JUPYTERHUB_API_TOKEN": token(hub, "alice"), "JUPYTERHUB_USER": "alice"}
    cli = subprocess.run([sys.executable, "-m", "hub_ext.cli", "submit", "--cpu", "5", "--", "sleep", "30"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and "tenancy: error: This job would stop your default server (nb-alice)" in cli.stderr
    assert len(svc(hub, "alice", "GET", "/workloads?mine=true")[1]["workloads"]) == before
    svc(hub, "alice", "DELETE", f"/workloads/{filler['id']}")




@pytest.mark.asyncio
async def test_tenancy_works_in_a_lab_terminal(hub):
    base = hub.server_url("alice").rstrip("/")
    tok = token(hub, "alice")
    r = hub.request("POST", f"{base}/api/terminals", token=tok, json={})
    assert r.status_code == 200, r.text
    name = r.json()["name"]

    async def session() -> str:
        conn = await websocket_connect(HTTPRequest(f"{base.replace('http://', 'ws://')}/terminals/websocket/{name}",
                                                   headers={"Authorization": f"token {tok}"}))
        screen = ""

        async def until(text: str) -> None:
            nonlocal screen
            while text not in screen:
                msg = await conn.read_message()
                if msg is None:
                    raise AssertionError(f"the terminal closed: {screen[-2000:]}")
                kind, *data = json.loads(msg)
                if kind == "stdout":
                    screen += data[0]

        try:
            # the marker's text is made by the shell: it is not in the echo of the typed line
            conn.write_message(json.dumps(["stdin", "tenancy jobs; echo END-$((40+2))-$?\r"]))
            await asyncio.wait_for(until("END-42-"), 30)
            await asyncio.wait_for(until("END-42-0"), 5)
        finally:
            conn.close()
        return screen

    screen = await session()
    output = screen.split("END-$((40+2))-$?")[-1].split("END-42-0")[0]
    assert "command not found" not in output and "ID" in output and "NAMESPACE" in output, screen[-2000:]
    hub.request("DELETE", f"{base}/api/terminals/{name}", token=tok)


def test_a_plain_sentence_when_the_service_is_down(tmp_path):
    # A single-user server of this environment (the extension enabled by its config), whose
    # TENANCY_API_URL points where nothing listens.
    port, dead, tok = free_port(), free_port(), "t" * 32
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(TENANCY_API_URL=f"http://127.0.0.1:{dead}/services/tenancy/api/v1", JUPYTERHUB_API_TOKEN="x" * 32,
               HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_server", f"--port={port}", "--no-browser",
                             f"--IdentityProvider.token={tok}", "--ServerApp.allow_root=True",
                             f"--ServerApp.root_dir={tmp_path}"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"

        def up():
            try:
                return urllib.request.urlopen(f"{base}/api/status?token={tok}", timeout=2).status == 200
            except OSError:
                return False

        wait_for(up, "the jupyter server", timeout=60)
        req = urllib.request.Request(f"{base}/tenancy/api/state", headers={"Authorization": f"token {tok}"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 503
        sentence = json.loads(err.value.read())["error"]
        assert sentence.startswith("The tenancy scheduler cannot be reached right now") and "Traceback" not in sentence
        events = read_events(f"{base}/tenancy/api/events", tok, until=lambda name, data: name == "status")
        assert events[-1][1] == {"ok": False, "message": sentence}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
