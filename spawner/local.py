"""Notebooks as local ``jupyterhub-singleuser`` processes, admitted by the tenancy scheduler first.

When the hub runs as root, each user's servers run as that user's own system account,
as JupyterHub's ``LocalProcessSpawner`` and The Littlest JupyterHub do: ``jupyter-<name>``
(``LocalAccounts``, the same accounts the local backend runs their training jobs as),
made on demand, in its home (mode 0700), with umask 077. Otherwise every server runs as
the hub's own account, each in a home folder of its own (``home_dir_template``), with
no isolation between users: a laptop demo.

Each server runs in a cgroup of its own (``hub_ext.backends.local.cgroups``), with its
notebook's CPU and memory, and everything left in it is killed when the server stops.
"""

from __future__ import annotations

import asyncio
import os
import secrets

from jupyterhub.spawner import SimpleLocalProcessSpawner, SpawnException, set_user_setuid
from traitlets import Bool, default

from hub_ext.backends.local import cgroups
from hub_ext.backends.local.accounts import AccountError, LocalAccounts, running_as_root
from hub_ext.backends.local.datasets import LINKS, DatasetError, grant

from .mixin import TenancySpawnerMixin


class TenancyLocalSpawner(TenancySpawnerMixin, SimpleLocalProcessSpawner):
    """Runs each user's servers as their own system account (hub as root), else as the hub's account."""

    per_user_accounts = Bool(
        help="""
        Run each user's servers as their own system account (``c.LocalAccounts``:
        ``jupyter-<name>``, created on demand), in its home. Needs the hub to run as root;
        the default is True exactly then. False: every server runs as the hub's own
        account, in a home per user from ``home_dir_template``; users can then read each
        other's files. Set the same ``c.LocalAccounts`` in the scheduler service's
        configuration, so that a user's training jobs run as the same account.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @default("per_user_accounts")
    def _default_per_user_accounts(self):
        return running_as_root()

    _account = None
    _cgroup = None
    _resources: dict | None = None  # the admitted notebook's requests and limits
    _cgroup_name = ""
    _datasets: dict[str, str] = {}  # name -> folder, linked at datasets/<name> in the server's folder

    async def _ensure_account(self):
        if not running_as_root():
            raise SpawnException(
                "This hub runs servers as the users' own accounts (TenancyLocalSpawner.per_user_accounts), "
                "which needs the hub to run as root.", reason="account", status_code=500)
        try:
            self._account = await asyncio.to_thread(LocalAccounts(parent=self).ensure, self.user.name)
        except AccountError as err:
            raise SpawnException(f"{self.user.name}'s system account is not ready: {err}", reason="account",
                                 status_code=500) from None
        return self._account

    async def start(self):
        if self.per_user_accounts:
            await self._ensure_account()  # before queueing: a user who cannot run anything should not wait
        return await super().start()

    async def tenancy_admitted(self, wl) -> None:
        """The folders of the datasets it mounts: its account joins their groups (before its process takes
        its groups), and the server's folder gets ``datasets/<name>`` links to them."""
        self._resources, self._cgroup_name = wl.get("resources"), f"nb-{wl['id']}-"
        self._datasets = {d["name"]: d["volume"]["hostPath"]["path"] for d in wl.get("datasets") or []
                          if "hostPath" in (d.get("volume") or {})}
        if self.per_user_accounts:
            for name in self._datasets:
                try:
                    await asyncio.to_thread(grant, self._account.pw_name, name)
                except DatasetError as err:
                    self.log.warning("%s cannot join the group of dataset %s: %s", self._account.pw_name, name, err)

    def dataset_path(self, use: dict) -> str:
        home = self._account.pw_dir if self.per_user_accounts else self.home_dir
        return os.path.join(home, LINKS, use["name"])

    def make_preexec_fn(self, name):
        datasets = dict(self._datasets)
        join = self._make_cgroup()  # in the new process, first (still as root): all it starts is in there
        if not self.per_user_accounts:
            setup = super().make_preexec_fn(name)

            def shared():
                join()
                setup()
                _link(datasets)

            return shared
        become = set_user_setuid(self._account.pw_name)  # its uid, gid and own groups; then cd to its home

        def preexec():
            join()
            os.umask(0o077)
            become()
            _link(datasets)  # as the account, in its home: nothing of root's is followed there

        return preexec

    def _make_cgroup(self):
        where, why = cgroups.place()
        if where is None:
            self.log.warning("%s runs without a cgroup (%s): its CPU and memory are not enforced and a process it "
                             "starts in a session of its own (setsid) outlives it", self._log_name, why)
            return lambda: None
        try:
            self._cgroup = where.create(self._cgroup_name + secrets.token_hex(3), cgroups.limits_for(self._resources))
        except OSError as err:
            raise SpawnException(f"Your server could not be given its CPU and memory (its cgroup: {err}); ask an "
                                 "admin to look at the hub's log.", reason="cgroup", status_code=500) from None
        return self._cgroup.join

    async def stop(self, now=False):
        cg = self._cgroup or (cgroups.of_pid(self.pid) if self.pid else None)  # after a hub restart: found by pid
        try:
            return await super().stop(now=now)
        finally:
            await self._end_cgroup(cg)

    async def poll(self):
        if self._cgroup is None and self.pid:  # after a hub restart: found by its process
            self._cgroup = cgroups.of_pid(self.pid)
        cg = self._cgroup
        status = await super().poll()
        if status is not None:  # ended on its own: what it started goes too
            await self._end_cgroup(cg)
        return status

    async def _end_cgroup(self, cg) -> None:
        if cg is None:
            return
        self._cgroup = None
        try:
            await asyncio.to_thread(cg.end)
        except OSError as err:
            self.log.warning("could not remove the cgroup %s of %s: %s", cg.name, self._log_name, err)

    def user_env(self, env):
        if not self.per_user_accounts:
            return super().user_env(env)
        account = self._account
        env.update(USER=account.pw_name, LOGNAME=account.pw_name, HOME=account.pw_dir,
                   SHELL=account.pw_shell or "/bin/sh")
        return env

    def get_args(self):
        args = super().get_args()
        if not self.per_user_accounts and os.geteuid() == 0:
            # Servers run as the hub's user; when that is root (a container, CI), say it is intended.
            args.append("--ServerApp.allow_root=True")
        return args

    def move_certs(self, paths):
        if self.per_user_accounts:
            # LocalProcessSpawner writes them into the user's home as root, where the user could have
            # put links; not done here.
            raise SpawnException("internal_ssl is not supported with per-user accounts (TenancyLocalSpawner)",
                                 reason="internal-ssl", status_code=500)
        return super().move_certs(paths)


def _link(datasets: dict[str, str]) -> None:
    """In the server's process, in its folder: ``datasets/<name>`` links to the datasets' folders.
    A failure is printed to its log, never stops the server."""
    if not datasets:
        return
    try:
        os.makedirs(LINKS, 0o700, exist_ok=True)
        for name, folder in datasets.items():
            link = os.path.join(LINKS, name)
            if os.path.islink(link):
                os.unlink(link)
            if not os.path.exists(link):
                os.symlink(folder, link)
    except OSError as err:
        print(f"tenancy: could not link the datasets into {os.getcwd()}/{LINKS}: {err}", flush=True)
