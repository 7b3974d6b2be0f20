"""The one-command demo: a multi-tenant hub on http://127.0.0.1:8000 with the local backend.

Four teams on the second seed's quota tree (root 40 CPU; leaves guarantee 10 and may
use 20), demo users in groups, password login. ``scripts/demo`` starts it; the
settings below are ordinary JupyterHub and jupyterhub-tenancy traits.
"""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
state = os.environ.get("TENANCY_DEMO_STATE", os.path.join(here, "..", ".demo"))
os.makedirs(state, exist_ok=True)
service_port = int(os.environ.get("TENANCY_SERVICE_PORT", "10101"))

c = get_config()  # noqa: F821 - provided by JupyterHub

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("TENANCY_DEMO_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.db_url = f"sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{state}/jupyterhub-proxy.pid"
if os.environ.get("TENANCY_CHP"):
    c.ConfigurableHTTPProxy.command = [os.environ["TENANCY_CHP"]]

# Who may log in: identity-provider groups, mapped to hub groups (tenants).
c.JupyterHub.authenticator_class = "tenancy-demo"
c.DemoAuthenticator.password = os.environ.get("TENANCY_DEMO_PASSWORD", "demo")
c.DemoAuthenticator.users = {
    "alice": {"groups": ["ds-alpha"]},  # team-a
    "bob": {"groups": ["ds-beta"]},  # team-b
    "carol": {"groups": ["research-gamma"]},  # team-c
    "dave": {"groups": ["research-delta"]},  # team-d
    "erin": {"groups": ["ds-alpha", "ds-beta"]},  # in two teams: picks at spawn time
    "admin": {"groups": ["platform"], "admin": True},
}
c.DemoAuthenticator.group_map = {
    "ds-alpha": "team-a", "ds-beta": "team-b", "research-gamma": "team-c", "research-delta": "team-d",
}

# Notebooks are local jupyterhub-singleuser processes, queued by the scheduler first.
c.JupyterHub.spawner_class = "tenancy-local"
c.JupyterHub.allow_named_servers = True
c.TenancyLocalSpawner.home_dir_template = f"{state}/home/{{username}}"
c.TenancyLocalSpawner.tenancy_service_url = f"http://127.0.0.1:{service_port}/services/tenancy/"
c.TenancyLocalSpawner.default_url = "/lab"
c.TenancyLocalSpawner.profiles = {
    "small": {"display_name": "Small: 5 CPU, 4 GiB", "resources": {"requests": {"cpu": "5", "memory": "4Gi"}}},
    "large": {"display_name": "Large: 10 CPU, 8 GiB", "resources": {"requests": {"cpu": "10", "memory": "8Gi"}}},
}
c.Spawner.environment = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}

# Scopes: users and their servers' tokens may use the scheduler service.
c.JupyterHub.custom_scopes = {
    "custom:tenancy:use": {"description": "Submit, read and cancel workloads in your teams' namespaces."},
    "custom:tenancy:admin": {"description": "Manage the quota tree and every team's workloads."},
}
c.JupyterHub.extra_user_scopes = {"access:services!service=tenancy", "custom:tenancy:use!user"}
c.Spawner.server_token_scopes = [
    "users:activity!user", "access:servers!server", "access:services!service=tenancy", "custom:tenancy:use!user",
]
c.JupyterHub.load_roles = [
    {"name": "tenancy-service", "services": ["tenancy"],
     "scopes": ["list:users", "read:users", "list:groups", "read:groups", "admin:groups", "servers", "read:servers"]},
]

# The scheduler service, started and restarted by the hub.
c.JupyterHub.services = [{
    "name": "tenancy",
    "url": f"http://127.0.0.1:{service_port}",
    "command": [sys.executable, "-m", "hub_ext.cli", "serve", "--config", os.path.join(here, "tenancy_config.py")],
    "display": False,
    "oauth_no_confirm": True,
    "environment": {"TENANCY_DEMO_STATE": state, "PYTHONUNBUFFERED": "1"},
}]
