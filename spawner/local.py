"""Notebooks as local ``jupyterhub-singleuser`` processes, admitted by the tenancy scheduler first."""

from __future__ import annotations

import os

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from traitlets import Bool

from .mixin import TenancySpawnerMixin


class TenancyLocalSpawner(TenancySpawnerMixin, SimpleLocalProcessSpawner):
    """Runs the server as the hub's own OS user, in a home folder per user (the laptop demo's spawner).

    Set ``system_users = True`` to run servers as the users' own system accounts
    (``LocalProcessSpawner``), which needs the hub to run as root.
    """

    system_users = Bool(False, help="Run servers as the users' own system accounts (needs root).").tag(config=True)

    def get_args(self):
        args = super().get_args()
        if not self.system_users and os.geteuid() == 0:
            # Servers run as the hub's user; when that is root (a container, CI), say it is intended.
            args.append("--ServerApp.allow_root=True")
        return args

    def user_env(self, env):
        if self.system_users:
            return LocalProcessSpawner.user_env(self, env)
        return super().user_env(env)
