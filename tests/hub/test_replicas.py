"""Several service replicas behind one hub (as on Kubernetes, behind one Service): a browser's
login made through the hub's OAuth at one replica holds at the next.

The replicas share the service's hub token, set in the hub's configuration as the chart does
(a Secret), and sign their cookies with a key derived from it. The hub starts one replica; the
test starts others with the same environment on ports of their own. Each has its own state
directory: with the local backend two processes cannot hold one database (its lock), and what is
tested here is whose cookies a replica accepts.
"""

from __future__ import annotations

import secrets
import subprocess
import urllib.request
from pathlib import Path

import pytest

from demo_hub import service_pid
from harness import free_port, get_cookie, new_session
from waiting import wait_for

TOKEN = secrets.token_hex(32)
COOKIE = "service-tenancy"  # HubOAuth's cookie, set at the service's OAuth callback


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("replicas-hub", extra_config=(
            f"[_s for _s in c.JupyterHub.services if _s['name'] == 'tenancy'][0]['api_token'] = {TOKEN!r}")) as h:
        yield h


def replica(hub, state: Path, *options: str) -> tuple[subprocess.Popen, str]:
    """Another replica: the managed service's command line and environment (its token is not
    there: the service takes it out at start), the hub token, a port and state of its own."""
    pid = service_pid(hub)
    env = dict(line.split("=", 1) for line in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in line)
    env.pop("TENANCY_HUB_TOKEN_FD", None)  # the pipe the managed service read its token from
    port = free_port()
    env.update({"JUPYTERHUB_API_TOKEN": TOKEN, "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
                "TENANCY_DEMO_STATE": str(state)})
    state.mkdir(parents=True)
    with open(state / "service.log", "wb") as log:
        proc = subprocess.Popen([*hub.process_cmdlines()[pid], *options], env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/services/tenancy"

    def up():
        try:
            return urllib.request.urlopen(f"{base}/api/v1/health", timeout=2).status == 200
        except OSError:
            return proc.poll() is not None  # ended: said below

    wait_for(up, "the other replica to answer")
    assert proc.poll() is None, (state / "service.log").read_text()[-2000:]
    return proc, base


def get(url: str, cookie: str):
    """GET with only this cookie (a session of no cookies of its own), redirects not followed."""
    return new_session().get(url, headers={"Cookie": cookie}, allow_redirects=False, timeout=30)


def stopped(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_page_login_made_at_one_replica_holds_at_another(hub, tmp_path):
    """Logged in at the hub's replica through OAuth, bob's next requests reach another: his page and
    his /me answer there without a new login. One with a key of its own sends him to log in."""
    session = hub.login("bob", "demo")
    page = session.get(hub.url("/services/tenancy/jobs"), allow_redirects=True, timeout=30)
    assert page.status_code == 200 and "Training jobs" in page.text
    login = get_cookie(session.cookies, COOKIE)
    assert login, [c.name for c in session.cookies]
    cookie = f"{COOKIE}={login}"
    other, base = replica(hub, tmp_path / "replica")
    try:
        me = get(f"{base}/api/v1/me", cookie)
        assert me.status_code == 200 and me.json()["name"] == "bob", me.text
        page = get(f"{base}/jobs", cookie)
        assert page.status_code == 200 and "Training jobs" in page.text and "team-b" in page.text, page.text[:500]
    finally:
        stopped(other)
    stranger, base = replica(hub, tmp_path / "stranger", "--TenancyService.cookie_secret=" + "s" * 40)
    try:
        page = get(f"{base}/jobs", cookie)
        location = page.headers.get("Location") or ""
        assert page.status_code == 302 and "/hub/api/oauth2/authorize" in location, (page.status_code, location)
    finally:
        stopped(stranger)
