"""The one-command demo: a multi-tenant hub on http://127.0.0.1:8000 with the local backend.

Four teams on the second seed's quota tree (root 40 CPU; leaves guarantee 10 and may
use 20), demo users in groups, password login. ``scripts/demo`` starts it; the
settings below are ordinary JupyterHub and jupyterhub-tenancy traits.

Run as root, every user's notebooks and training jobs run as their own system account
(``jupyter-alice``, ...; made on first use, homes in /home). Run as yourself, they all
run as you (the scheduler service says so, see ``tenancy_config.py``).
"""

import atexit
import os
import sys

import spawner
from hub_ext.backends.local import cgroups
from hub_ext.backends.local.account_python import python_for_accounts

here = os.path.dirname(os.path.abspath(__file__))
state = os.environ.get("TENANCY_DEMO_STATE", os.path.join(here, "..", ".demo"))
os.umask(0o077)  # the hub's database, secrets and logs are its own (the service inherits this)
os.makedirs(state, exist_ok=True)
os.chmod(state, 0o711)  # the users' accounts reach their work folders in it, and list nothing
service_port = int(os.environ.get("TENANCY_SERVICE_PORT", "10101"))

c = get_config()  # noqa: F821 - provided by JupyterHub

# Stopping the demo (Ctrl-C) stops the training jobs still running too, once the hub has stopped
# the notebook servers and the scheduler service (a restart of the service alone keeps them: it
# adopts them again). Where it cannot find them (no cgroups), it says how to stop them.
atexit.register(cgroups.main, ["stop", state])

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("TENANCY_DEMO_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.db_url = f"sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{state}/jupyterhub-proxy.pid"
if os.environ.get("TENANCY_CHP"):
    c.ConfigurableHTTPProxy.command = [os.environ["TENANCY_CHP"]]

# Who may log in, with one password.
c.JupyterHub.authenticator_class = "tenancy-demo"
c.DemoAuthenticator.password = os.environ.get("TENANCY_DEMO_PASSWORD", "demo")
c.DemoAuthenticator.users = {"alice": {}, "bob": {}, "carol": {}, "dave": {}, "erin": {}, "admin": {"admin": True}}

# The teams (tenants): hub groups with their members and tenancy properties, made by the hub
# itself at start-up, so the scheduler service needs no right to change groups. (JupyterHub
# takes groups from load_groups or from the authenticator, not both: with an identity
# provider, TenancyAuthenticatorMixin maps its groups at login, and the properties are set
# once in the admin panel instead.) The properties here are applied again at every start.
c.DemoAuthenticator.manage_groups = False
c.JupyterHub.load_groups = {
    "team-a": {"users": ["alice", "erin"],
               "properties": {"tenancy.namespace": "team-a", "tenancy.quota-leaf": "root.a.1"}},
    "team-b": {"users": ["bob", "erin"],  # erin is in two teams: she picks one at spawn time
               "properties": {"tenancy.namespace": "team-b", "tenancy.quota-leaf": "root.a.2"}},
    "team-c": {"users": ["carol"],
               "properties": {"tenancy.namespace": "team-c", "tenancy.quota-leaf": "root.b.1",
                              "tenancy.priority-classes": "low-priority-dev,high-priority-research,critical-prod"}},
    "team-d": {"users": ["dave"],
               "properties": {"tenancy.namespace": "team-d", "tenancy.quota-leaf": "root.b.2"}},
    "platform": {"users": ["admin"], "properties": {"tenancy.namespace": "platform", "tenancy.role": "admin"}},
}

# Notebooks are local jupyterhub-singleuser processes, queued by the scheduler first: as
# root, each user's as their own account (jupyter-<name>, home /home/jupyter-<name>); else
# all as you, each in a home of its own under the state folder (home_dir_template).
c.JupyterHub.spawner_class = "tenancy-local"
c.JupyterHub.allow_named_servers = True
c.JupyterHub.template_paths = [spawner.TEMPLATES]  # the waiting page stops the server that waits
c.TenancyLocalSpawner.home_dir_template = f"{state}/home/{{username}}"
c.TenancyLocalSpawner.tenancy_service_url = f"http://127.0.0.1:{service_port}/services/tenancy/"
c.TenancyLocalSpawner.default_url = "/lab"
c.TenancyLocalSpawner.profiles = {
    "small": {"display_name": "Small: 5 CPU, 4 GiB", "description": "For exploring data, writing code and small experiments.",
              "resources": {"requests": {"cpu": "5", "memory": "4Gi"}}},
    "large": {"display_name": "Large: 10 CPU, 8 GiB", "description": "For heavier preprocessing and local training runs.",
              "resources": {"requests": {"cpu": "10", "memory": "8Gi"}}},
}
# A Python the users' accounts can run (this one, unless it is where they cannot enter, as
# pyenv under /root: then a virtualenv in /opt with this one's packages).
c.Spawner.environment = {"PATH": os.path.dirname(python_for_accounts()) + os.pathsep + os.environ.get("PATH", "")}

# Scopes: users and their servers' tokens may use the scheduler service.
c.JupyterHub.custom_scopes = {
    "custom:tenancy:use": {"description": "Submit, read and cancel workloads in your teams' namespaces."},
    "custom:tenancy:admin": {"description": "Manage the quota tree and every team's workloads."},
}
c.JupyterHub.extra_user_scopes = {"access:services!service=tenancy", "custom:tenancy:use!user"}
c.Spawner.server_token_scopes = [
    "users:activity!user", "access:servers!server", "access:services!service=tenancy", "custom:tenancy:use!user",
]
# The scheduler service's own rights in the hub: read users, groups and servers, and stop
# servers (to evict a notebook). Nothing that changes a group, a user, a role or a token, or
# starts a server: whoever got its token could do no more than that.
c.JupyterHub.load_roles = [
    {"name": "tenancy-service", "services": ["tenancy"],
     "scopes": [
         "list:users",          # GET /users?state=active: every running server (reconciling notebooks)
         "read:users:name",     # a user's name and admin flag (who is admin)
         "read:users:groups",   # a user's groups (which teams they act in)
         "read:servers",        # a user's servers: running, starting, gone
         "delete:servers",      # DELETE /users/{name}/server(s)/{server}: stop an evicted notebook
         "list:groups",         # GET /groups: the teams
         "read:groups",         # their members and properties (tenancy.*)
     ]},
]

# The scheduler service, started and restarted by the hub.
c.JupyterHub.services = [{
    "name": "tenancy",
    "url": f"http://127.0.0.1:{service_port}",
    "command": [sys.executable, "-m", "hub_ext.cli", "serve", "--config", os.path.join(here, "tenancy_config.py")],
    # In the hub's Services menu for every user with access (the dashboards, and for admins the tree
    # editor and the tenants page).
    "display": True,
    "info": {"description": "Cluster, nodes, jobs and quota dashboards; the quota-tree editor and tenants (admins)."},
    "oauth_no_confirm": True,
    # A browser logged in to the hub may read its own /me and workloads through the page's OAuth, and
    # stop or delete its own servers from the Jobs page (the hub decides, with the person's own rights).
    "oauth_client_allowed_scopes": ["custom:tenancy:use!user", "delete:servers!user"],
    "environment": {"TENANCY_DEMO_STATE": state, "PYTHONUNBUFFERED": "1",
                    # a shorter warning before a notebook is stopped (tests); the default is a minute
                    **{k: os.environ[k] for k in ("TENANCY_NOTEBOOK_WARNING_SECONDS", "TENANCY_HISTORY_SECONDS")
                       if os.environ.get(k)}},
}]

# Idle notebooks give their room back, as in Zero to JupyterHub: jupyterhub-idle-culler (the
# service z2jh runs) stops every server (named ones too) that has had no activity for an hour;
# stopping it ends its workload at once, so whatever waits in the queue for that room starts.
# TENANCY_IDLE_TIMEOUT_SECONDS sets the hour (tests use a few seconds); 0 turns culling off.
idle_timeout = int(os.environ.get("TENANCY_IDLE_TIMEOUT_SECONDS", "3600"))
if idle_timeout > 0:
    c.JupyterHub.services.append({
        "name": "idle-culler",
        # looked at every tenth of the timeout, at most every 10 minutes (z2jh's interval), at least every second
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle_timeout}",
                    f"--cull-every={min(600, max(1, idle_timeout // 10))}"],
    })
    # What it needs to see activity and stop servers, and nothing more (z2jh's culler role).
    c.JupyterHub.load_roles.append({"name": "idle-culler", "services": ["idle-culler"],
                                    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]})
