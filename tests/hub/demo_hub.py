"""Short ways to talk to the tenancy service of the demo's hub (demo/jupyterhub_config.py, made
by the ``hub_factory`` fixture): shared by the hub-tier test modules that play the demo's users."""

from __future__ import annotations

from pathlib import Path

from harness import RealHub, free_port
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
API = "/services/tenancy/api/v1"


def service_answers(hub) -> bool:
    """Whether the hub's tenancy service answers its health check through the proxy."""
    try:
        return hub.request("GET", f"{API}/health", timeout=5).status_code == 200
    except Exception:  # noqa: BLE001 - the proxy or the service is not there (yet)
        return False


def demo_hub(chp_path: str, work: Path, *, env: dict[str, str] | None = None, root: Path = ROOT,
             **kwargs) -> RealHub:
    """The demo's hub (``root``/demo/jupyterhub_config.py), not started yet: its state in ``work``,
    its service on a free port, notebooks warned 2 s before they are stopped; ``env`` adds to that
    environment, ``kwargs`` go to ``RealHub`` (``extra_config``, ...). A ``root`` other than this
    checkout runs that tree's demo and code."""
    env = {"TENANCY_DEMO_STATE": str(work / "state"), "TENANCY_SERVICE_PORT": str(free_port()),
           "TENANCY_NOTEBOOK_WARNING_SECONDS": "2", **({"PYTHONPATH": str(root)} if root != ROOT else {}),
           **(env or {})}
    return RealHub(root / "demo" / "jupyterhub_config.py", work, chp_path=chp_path, env=env, **kwargs)


def wait_serving(hub) -> None:
    """Once a demo hub has started: its tenancy service answers, and it keeps its users' tokens."""
    hub.tokens = {}
    wait_for(lambda: service_answers(hub), "the tenancy service to answer")


def service_pid(hub) -> int:
    """The pid of the tenancy service the demo hub runs."""
    for pid, cmd in hub.process_cmdlines().items():
        if "serve" in cmd and any("tenancy_config.py" in part for part in cmd):
            return pid
    raise AssertionError("no tenancy service process")


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
