"""What the identity tests share: the teams (hub groups whose properties an admin sets in the admin
panel: with ``manage_groups`` the hub takes membership from the provider, not from ``load_groups``),
the provider-group map, and the story's steps through the hub's and the service's APIs."""

from __future__ import annotations

from demo_hub import svc
from waiting import wait_for

TEAMS = {"team-alpha": {"tenancy.namespace": "team-a", "tenancy.quota-leaf": "root.a.1"},
         "team-beta": {"tenancy.namespace": "team-b", "tenancy.quota-leaf": "root.a.2"}}
GROUP_MAP = {"data-science-alpha": "team-alpha", "data-science-beta": "team-beta"}
#: On top of the demo's configuration: teams come from the provider, their properties from the admin.
COMMON = """
c.JupyterHub.load_groups = {}
c.Authenticator.admin_users = {"admin"}  # the hub's admins are the service's (tests read workloads as admin)
c.JupyterHub.template_vars = {"tenancy_contact": "the platform team (platform@example.org)"}
"""


def make_teams(hub) -> None:
    for name, props in TEAMS.items():
        status, body = hub.api("POST", f"/groups/{name}")
        assert status in (201, 409), body
        status, body = hub.api("PUT", f"/groups/{name}/properties", props)
        assert status == 200, body


def hub_groups(hub, user: str) -> list[str]:
    status, body = hub.api("GET", f"/users/{user}")
    assert status == 200, body
    return sorted(body["groups"])


def user_info(hub, user: str) -> dict:
    status, body = hub.api("GET", f"/users/{user}")
    assert status == 200, body
    return (body.get("user_info") or {}).get("tenancy") or {}


def service_teams(hub, tok: str) -> list[str]:
    status, body = svc(hub, None, "GET", "/me", tok=tok)
    assert status == 200, body
    return sorted(t["group"] for t in body["tenants"])


def wait_teams(hub, tok: str, teams: list[str]) -> None:
    """Until the service sees the user's teams as the hub has them (it reads the hub's groups every few s)."""
    assert wait_for(lambda: service_teams(hub, tok) == teams, f"the service to see teams {teams}")


def running_notebook(hub, tok: str) -> str:
    """The id of the user's running notebook workload."""
    status, body = svc(hub, None, "GET", "/workloads?mine=true&kind=notebook", tok=tok)
    assert status == 200, body
    return next(w["id"] for w in body["workloads"] if w["state"] == "Running")


def waiting_job(hub, tok: str, tenant: str) -> dict:
    """A job of ``tenant`` that waits: 20 CPUs on a leaf of max 20 where a notebook runs (same priority, so
    it preempts nothing)."""
    status, body = svc(hub, None, "POST", "/workloads", {
        "tenant": tenant, "name": "waits", "command": ["sleep", "300"], "priorityClassName": "low-priority-dev",
        "resources": {"requests": {"cpu": "20"}}}, tok=tok)
    assert status == 201 and body["state"] == "Pending", body
    return body


def admin_token(hub) -> str:
    """A token of the hub admin ``admin`` (the service's admins are the hub's)."""
    if not getattr(hub, "admin_user_token", None):
        hub.admin_user_token = hub.token_for("admin")
    return hub.admin_user_token


def workload(hub, wid: str) -> dict:
    status, body = svc(hub, None, "GET", f"/workloads/{wid}", tok=admin_token(hub))
    assert status == 200, body
    return body


def after_the_move(hub, user: str, tok: str, job: dict, notebook_id: str) -> None:
    """At the login after the move: the waiting job of the old team is cancelled, the running notebook
    goes on, and the user may submit to the new team only."""
    assert wait_for(lambda: workload(hub, job["id"])["state"] == "Cancelled", "the old team's waiting job to go")
    wait_teams(hub, tok, ["team-beta"])
    nb = workload(hub, notebook_id)
    assert nb["state"] == "Running" and nb["tenant"] == "team-alpha", nb
    assert hub.server_model(user)["ready"]
    status, body = svc(hub, None, "POST", "/workloads", {"tenant": "team-alpha", "command": ["true"]}, tok=tok)
    assert status == 403 and f"{user} is not a member of tenant team-alpha" in body["error"], body
    status, body = svc(hub, None, "POST", "/workloads", {"tenant": "team-beta", "command": ["true"],
                                                          "resources": {"requests": {"cpu": "1"}}}, tok=tok)
    assert status == 201 and body["namespace"] == "team-b", body
