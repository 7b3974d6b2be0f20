"""The local backend: a declared virtual capacity; training pods are real processes, notebooks real servers.

Training pods run as ``python -m hub_ext.backends.local.runner`` wrapping the
user's command, in their own process group, with stdout and stderr captured to
a log file. Eviction is SIGTERM to the group, the grace period, then SIGKILL.
Each pod runs in a cgroup of its own (``cgroups``): its CPU and memory as it asked, and
when its command ends (or it is cancelled) every process left in it is killed, ``setsid``
or not, and the cgroup removed. Where no cgroup can be made, one warning at start-up says
what is not enforced then. The life of these processes is ``processes.Processes``'; this
module keeps the configuration and the Backend contract's methods, which hand it on.
Notebook servers are started by the spawner once admitted; evicting one warns
its user (an event on the workload) and then stops the server through the hub
API, recording who preempted it.

Who runs them: when the service runs as root, each user's pods run as that user's
own system account (``LocalAccounts``: ``jupyter-<name>``, made on demand), in a work
folder only that account may enter (``workdir``), with umask 077 and none of the
service's groups. Otherwise every pod runs as the service's own account: one log line
says so at start-up, and more than one user or tenant is refused unless
``allow_shared_account`` is set.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import sys

from traitlets import Bool, Dict, Float, List, Unicode, default
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from .. import Backend
from . import cgroups
from .account_python import others_can_enter, others_can_run
from .accounts import AccountError, LocalAccounts, running_as_root
from .datasets import DatasetError, ensure_group, folder_problem, grant, group_name, guard_folder, set_members
from .processes import Processes

class LocalBackend(LoggingConfigurable, Backend):
    """The service's backend for this machine: its configuration (``c.LocalBackend.*``), whom pods run
    as, datasets' folders, notebooks' evictions; training pods' processes are ``processes.Processes``'."""

    nodes_config = List(
        Dict(),
        default_value=[{"name": "local-1", "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}],
        help="""
        The virtual capacity workloads are admitted against: a list of nodes, each
        ``{"name": ..., "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}, "labels": {...}}``.
        Nothing checks that this machine really has it: it is the budget the scheduler shares out.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    data_dir = Unicode(
        "tenancy-data",
        help="""
        Where training pods run and write their logs: ``DATA_DIR/workloads/<id>``, one folder
        per workload, owned by the workload's account and private to it (mode 0700). The
        service makes ``DATA_DIR`` and ``DATA_DIR/workloads`` 0711, so that accounts reach
        their own folders without seeing anyone else's.
        """,
    ).tag(config=True)

    python = Unicode(
        help="""
        The Python that runs training pods (the runner that records their exit status, and
        their scripts); also first on their ``PATH``. Every user's account must be able to
        run it: when this service's own interpreter sits in a folder others cannot enter
        (pyenv under ``/root``), point this to one they can, as The Littlest JupyterHub's
        ``/opt/tljh/user`` (``hub_ext.backends.local.account_python.python_for_accounts()``
        makes one). Default: this service's own interpreter.
        """,
    ).tag(config=True)

    @default("python")
    def _default_python(self):
        return sys.executable

    allow_shared_account = Bool(
        False,
        help="""
        When the service does not run as root, every user's training jobs run as its own
        account. They can then read each other's files, logs and work folders, this
        service's database (every job's environment) and, from its process, its hub token
        and the scopes that come with it. The service refuses to work for more than one
        user or tenant that way unless this is True: set it only when every user is
        trusted with all of that (a demo on your laptop). Run the hub and the service as
        root instead to give each user an account of their own.
        """,
    ).tag(config=True)

    notebook_warning_seconds = Float(
        60.0,
        help="""
        How long a preempted notebook's user is warned before the server is stopped: time
        to save and wrap up. The warning is an event on the workload, and the workload's
        ``evictionDeadline`` while it lasts: JupyterLab (the tenancy lab extension) shows a
        countdown and saves every open document before it ends. The preemptor starts once
        the server is gone, so this is also how long it waits. Example:
        ``c.LocalBackend.notebook_warning_seconds = 120``.

        .. versionchanged:: 0.2
           Default 60 (was 10), and no longer capped by the pod's grace period.
        """,
    ).tag(config=True)

    stop_grace_seconds = Float(
        5.0, help="Grace period when a training job is cancelled (SIGTERM, then SIGKILL).",
    ).tag(config=True)

    env = Dict(
        help="Extra environment for training pods (values are strings).",
    ).tag(config=True)

    burst_cpu = Bool(
        False,
        help="""
        Whether a training pod that gives no CPU limit may use idle CPUs beyond its request.
        False (the default): its CPU request is also its cap (a CFS quota on its cgroup): this
        backend's capacity is a declared budget, so a pod above its request takes CPU time
        other admitted pods were promised. True: as on Kubernetes, only a limit caps it, and
        its request is its weight when CPUs are contended. Example:
        ``c.LocalBackend.burst_cpu = True``.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    def __init__(self, hub=None, **kwargs):
        super().__init__(**kwargs)
        self.hub = hub
        self._tenants: list = []
        self._guarded: set[str] = set()  # datasets whose folders' groups this service keeps
        self.processes = Processes(self)  # the training pods' processes (``processes.py``)
        self.cgroups, why = cgroups.place()
        if self.cgroups is None:
            self.log.warning("LocalBackend: no cgroup can be made here (%s): each training pod is only a process "
                             "group, so its CPU and memory are not enforced and a process it starts in a session of "
                             "its own (setsid) outlives its end", why)
        self.accounts = LocalAccounts(parent=self)
        self.per_user = running_as_root()
        if self.per_user:
            if not others_can_run(self.python):
                self.log.warning("LocalBackend.python %s is in a folder other users cannot enter: users' training "
                                 "jobs will not start; set c.LocalBackend.python to a Python every account can run",
                                 self.python)
            data = os.path.dirname(os.path.abspath(self.data_dir))
            if not others_can_enter(data):
                self.log.warning("LocalBackend.data_dir %s is in a folder other users cannot enter: training jobs "
                                 "start in their folders there, but cannot reach them by full path; put it where "
                                 "they can (e.g. /var/lib/jupyterhub-tenancy)", os.path.abspath(self.data_dir))
        else:
            self.log.warning(
                "LocalBackend: this service does not run as root, so every user's training jobs run as its own "
                "account (%s) and can read each other's files, this service's database and its hub token; run the "
                "hub and the service as root to give each user an account", _me().pw_name)
        self._private_database()

    def _private_database(self) -> None:
        """The service's SQLite file (with its -wal/-shm/-journal, which SQLite makes with the same mode): 0600."""
        url = getattr(self.parent, "db_url", "") or ""
        if not url.startswith("sqlite:///"):
            return
        path = url[len("sqlite:///"):].split("?")[0]
        for name in (path, path + "-wal", path + "-shm", path + "-journal"):
            try:
                os.chmod(name, 0o600)
            except FileNotFoundError:
                pass
            except OSError as err:
                self.log.warning("could not make %s private to this service: %s", name, err)

    def acceleration(self) -> str | None:
        """Datasets here are folders read in place: there is nothing to put a cache in front of."""
        return "the local backend reads datasets from folders; acceleration needs Fluid on Kubernetes"

    def datasets_changed(self, wanted) -> None:
        """A dataset is a folder (a ``path`` source); its group's members are the accounts of the members
        of the teams whose namespaces may use it, and only they may enter it (see ``datasets.py``)."""
        by_name: dict[str, tuple] = {}
        for (name, namespace), ds in wanted.items():
            by_name.setdefault(name, (ds, []))[1].append(namespace)
        for name, (ds, namespaces) in by_name.items():
            state, message = self._dataset_access(ds, namespaces)
            for namespace in namespaces:
                self.controller.dataset_state(name, namespace, state, message)
        for name in self._guarded - set(by_name):  # no longer wanted anywhere: its group loses everyone
            self._guarded.discard(name)
            try:
                set_members(group_name(name), set())
            except (DatasetError, KeyError) as err:
                self.log.warning("could not empty the group of dataset %s: %s", name, err)

    def _dataset_access(self, ds, namespaces) -> tuple[str, str | None]:
        if ds.source_kind != "path":
            return "Refused", (f"the local backend mounts folders only (a path source); dataset {ds.name}'s source "
                               f"is a {ds.source_kind}")
        folder = str(ds.source)
        problem = folder_problem(folder)
        if problem:
            return "Pending", problem
        if not self.per_user:
            return "Bound", (f"this service does not run as root, so who may read {folder} cannot be enforced: "
                             "every account reads it as its modes allow")
        users = {u for t in self._tenants if t.namespace in namespaces for u in (t.members or [])}
        accounts = set()
        for user in users:
            try:
                accounts.add(pwd.getpwnam(self.accounts.name(user)).pw_name)
            except (KeyError, AccountError):
                pass  # no account yet: it joins when its first workload starts (grant)
        try:
            group = ensure_group(group_name(ds.name))
            set_members(group.gr_name, accounts)
            self._guarded.add(ds.name)
            guard_folder(folder, group.gr_gid, ds.read_only)
        except (DatasetError, OSError) as err:
            return "Refused", f"cannot guard the folder {folder}: {err}"
        return "Bound", None

    def tenants_changed(self, tenants) -> None:
        """Refuse a multi-user configuration where all users would share the service's account."""
        self._tenants = list(tenants)
        if self.per_user or self.allow_shared_account:
            return
        users = {m for t in tenants for m in (t.members or [])}
        if len(tenants) > 1 or len(users) > 1:
            raise ValidationError(
                f"LocalBackend: the hub has {len(tenants)} tenant(s) and {len(users)} user(s) in them, but this service "
                f"does not run as root, so all their training jobs would run as one account ({_me().pw_name}) and could "
                "read each other's files and this service's hub token. Run the hub and the service as root (each user "
                "then gets an account of their own), or accept the risk with c.LocalBackend.allow_shared_account = True")

    def nodes(self):
        out = []
        for i, raw in enumerate(self.nodes_config):
            out.append(parse_node(raw, f"LocalBackend.nodes_config[{i}]"))
        if not out:
            raise ValidationError("LocalBackend.nodes_config: declare at least one node")
        return out

    # -- training pods -----------------------------------------------------------
    def account_of(self, user: str) -> pwd.struct_passwd:
        """Whom ``user``'s pods run as: their own account (made if need be), or the service's. Blocking."""
        return self.accounts.ensure(user) if self.per_user else _me()

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner starts the server once it sees the admission
        try:
            owner = await asyncio.to_thread(self.account_of, row.user)
            uses = self.controller.datasets.uses(row)
            if self.per_user:  # its process has the datasets' groups from the start
                for use in uses:
                    await asyncio.to_thread(grant, owner.pw_name, use["name"])
            proc, exit_path = self.processes.launch(row, pod, prow, owner, uses)
        except Exception as err:  # noqa: BLE001 - an unstartable pod ends, it does not hold quota
            self.log.error("could not start %s/%s: %s", row.namespace, pod.name, err)
            self.controller.pod_exited(pod.uid, 127)
            return
        await self.processes.watch(pod.uid, proc.pid, exit_path, proc)

    async def evict(self, row, pod, prow, grace: float, reason) -> None:
        if row.kind == "notebook":
            await self._evict_notebook(row, pod, grace, reason)
            return
        await self.processes.terminate(prow.pid, grace)
        # the watcher reports the exit; a pod we no longer watch is done now
        if not self.processes.watched(pod.uid):
            self.controller.eviction_done(pod.uid)

    async def _evict_notebook(self, row, pod, grace: float, reason) -> None:
        # The warning window is the user's time to save, on top of the stop's grace period.
        warn = max(0.0, self.notebook_warning_seconds)
        server = row.spec.get("serverName") or ""
        now = self.controller.clock()
        self.controller.warn_eviction(row.id, now + warn, reason.message)
        self.controller.store.record(
            now, "warning", f"your notebook server will be stopped in {warn:.0f}s: {reason.message}", row.id,
            reason.details)
        self.controller.store.commit()
        self.controller.notify([row.id])
        await asyncio.sleep(warn)
        if self.hub is not None and self.hub.configured:
            try:
                await self.hub.stop_server(row.user, server)
                deadline = asyncio.get_running_loop().time() + max(grace - warn, 1.0)
                while await self.hub.server_running(row.user, server):
                    if asyncio.get_running_loop().time() > deadline:
                        break
                    await asyncio.sleep(0.5)
            except Exception as err:  # noqa: BLE001 - the eviction completes either way
                self.log.warning("could not stop %s's server %r: %s", row.user, server, err)
        self.controller.eviction_done(pod.uid)

    async def stop(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            # Cancelled through the API: the server goes too, or its room would be used twice.
            # (When the hub itself stops the server, this asks again and the hub says it is stopping.)
            if self.hub is not None and self.hub.configured:
                try:
                    await self.hub.stop_server(row.user, row.spec.get("serverName") or "")
                except Exception as err:  # noqa: BLE001
                    self.log.warning("could not stop %s's server: %s", row.user, err)
            return
        await self.processes.stop(prow, self.stop_grace_seconds)

    async def recover(self, row, prow, pod):
        """``"running"``, ``("exited", code)`` or ``"gone"`` for a pod that ran before a restart."""
        if row.kind == "notebook":
            if self.hub is None or not self.hub.configured:
                return "gone"
            try:
                running = await self.hub.server_running(row.user, row.spec.get("serverName") or "")
            except Exception:  # noqa: BLE001
                return "gone"
            return "running" if running else "gone"
        return await self.processes.recover(row, prow, pod)

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        return self.processes.logs(prow, tail_bytes)


def _me() -> pwd.struct_passwd:
    """This process's own account (a stand-in when its uid has no name, as in some containers)."""
    try:
        return pwd.getpwuid(os.geteuid())
    except KeyError:
        return pwd.struct_passwd((str(os.geteuid()), "x", os.geteuid(), os.getegid(), "",
                                  os.environ.get("HOME", "/"), "/bin/sh"))

