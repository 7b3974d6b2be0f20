"""The demo's hub (demo/jupyterhub_config.py) on random ports, and short ways to talk to its
tenancy service: shared by the hub-tier test modules that play the demo's users."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import _make_hub, _start
from harness import free_port

ROOT = Path(__file__).resolve().parents[2]
API = "/services/tenancy/api/v1"


def start_demo_hub(chp_path, work: Path, extra_config: str = "", **env):
    """A running demo hub whose service answers; ``env`` adds to the demo's environment,
    ``extra_config`` to its configuration."""
    env = {"TENANCY_DEMO_STATE": str(work / "state"), "TENANCY_SERVICE_PORT": str(free_port()),
           "TENANCY_NOTEBOOK_WARNING_SECONDS": "2", **env}
    hub = _make_hub(chp_path, work, ROOT / "demo" / "jupyterhub_config.py", env=env, extra_config=extra_config)
    _start(hub)
    hub.tokens = {}
    wait_for(lambda: hub.request("GET", f"{API}/health").status_code == 200, "the tenancy service to answer")
    return hub


def service_pid(hub) -> int:
    """The pid of the tenancy service the demo hub runs."""
    for pid, cmd in hub.process_cmdlines().items():
        if "serve" in cmd and any("tenancy_config.py" in part for part in cmd):
            return pid
    raise AssertionError("no tenancy service process")


def wait_for(predicate, what: str, timeout: float = 60, interval: float = 0.3):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def token(hub, user: str) -> str:
    """A token of the demo user's (logged in once through the form, so the groups are set)."""
    if user not in hub.tokens:
        hub.login(user, "demo")
        hub.tokens[user] = hub.token_for(user)
    return hub.tokens[user]


def svc(hub, user: str | None, method: str, path: str, json=None, tok: str | None = None, **kw):
    """``method`` on the service's API as ``user`` (or with ``tok``): (status, JSON or text)."""
    r = hub.request(method, API + path, token=tok or token(hub, user), json=json, **kw)
    body = r.json() if r.headers.get("Content-Type", "").startswith("application/json") else r.text
    return r.status_code, body


def leaf_used(hub, leaf: str, resource: str = "cpu") -> str:
    status, body = svc(hub, "admin", "GET", "/tree")
    assert status == 200, body
    return body["quota"][leaf]["used"].get(resource, "0")
