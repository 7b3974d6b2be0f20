"""The local backend: a declared virtual capacity; training pods are real processes, notebooks real servers.

Training pods run as ``python -m hub_ext.backends.local.runner`` wrapping the
user's command, in their own process group, with stdout and stderr captured to
a log file. Eviction is SIGTERM to the group, the grace period, then SIGKILL.
Each pod runs in a cgroup of its own (``cgroups``): its CPU and memory as it asked, and
when its command ends (or it is cancelled) every process left in it is killed, ``setsid``
or not, and the cgroup removed. Where no cgroup can be made, one warning at start-up says
what is not enforced then.
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
import json
import os
import pwd
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from traitlets import Bool, Dict, Float, List, Unicode, default
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from ...scheduler.model import Reason
from .. import Backend
from . import cgroups
from .account_python import others_can_enter, others_can_run
from .accounts import AccountError, LocalAccounts, groups_of, running_as_root
from .datasets import DatasetError, ensure_group, folder_problem, grant, group_name, guard_folder, link_datasets, \
    set_members
from .workdir import make_workdir, open_owned, read_owned, write_owned

POLL_SECONDS = 0.2
#: Never handed down to a pod, whatever the service's environment holds.
SECRET_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "TENANCY_HUB_TOKEN_FD")
#: ``python script.py``, as __main__, opening the script by its relative path (see ``_command``).
RUN_SCRIPT = ("import sys; sys.argv[0] = __file__ = 'script.py'; "
              "exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))")
REPLACED_LOG = "tenancy: this pod's log file was replaced by something that is not its own file; it is not shown\n"


class LocalBackend(LoggingConfigurable, Backend):
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
        self._procs: dict[int, subprocess.Popen] = {}
        self._cgroups: dict[int, cgroups.Cgroup] = {}  # a runner's pid -> its pod's cgroup
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

    def _command(self, row, workdir: Path, owner: pwd.struct_passwd) -> list[str]:
        spec = row.spec
        if "command" in spec:
            return list(spec["command"])
        write_owned(workdir, "script.py", spec["script"], owner.pw_uid, owner.pw_gid)
        # Not `python script.py`: Python opens a script by its absolute path, which the account may
        # not be able to walk (a DATA_DIR below a folder only root enters); this opens it relatively.
        return [self.python, "-c", RUN_SCRIPT]

    def _env(self, row, pod, owner: pwd.struct_passwd, datasets: dict | None = None) -> dict:
        # The service's environment, without what makes it the hub's service (a pod is not).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
        if self.per_user:
            env.update(HOME=owner.pw_dir, USER=owner.pw_name, LOGNAME=owner.pw_name,
                       SHELL=owner.pw_shell or "/bin/sh",
                       PATH=os.path.dirname(self.python) + os.pathsep + env.get("PATH", os.defpath))
        env.update(self.env)
        env.update(row.spec.get("env", {}))
        env.update({"TENANCY_WORKLOAD": row.name, "TENANCY_WORKLOAD_ID": row.id, "TENANCY_NAMESPACE": row.namespace,
                    "TENANCY_POD": pod.name, "TENANCY_REPLICAS": str(row.spec.get("replicas", 1)),
                    "TENANCY_NODE": pod.node or "", "PYTHONUNBUFFERED": "1",
                    # name -> the absolute path of its link in the work folder: code never hard-codes one
                    "TENANCY_DATASETS": json.dumps(datasets or {}, sort_keys=True)})
        for secret in SECRET_ENV:
            env.pop(secret, None)
        return env

    def _identity(self, owner: pwd.struct_passwd) -> dict:
        """Popen arguments that drop to ``owner`` (its uid, its group, its own groups only)."""
        if not self.per_user:
            return {}
        return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": groups_of(owner)}

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner starts the server once it sees the admission
        try:
            owner = await asyncio.to_thread(self.account_of, row.user)
            uses = self.controller.datasets.uses(row)
            if self.per_user:  # its process has the datasets' groups from the start
                for use in uses:
                    await asyncio.to_thread(grant, owner.pw_name, use["name"])
            proc, exit_path = self._launch(row, pod, prow, owner, uses)
        except Exception as err:  # noqa: BLE001 - an unstartable pod ends, it does not hold quota
            self.log.error("could not start %s/%s: %s", row.namespace, pod.name, err)
            self.controller.pod_exited(pod.uid, 127)
            return
        await self._watch(pod.uid, proc.pid, exit_path, proc)

    def _cgroup_name(self, row, pod) -> str:
        """``<service>-<workload>-<pod>-``: what the names of this pod's cgroups start with."""
        return f"{cgroups.service_prefix(self.data_dir)}{row.id}-{pod.name}-"

    def _launch(self, row, pod, prow, owner: pwd.struct_passwd, uses=()):
        uid, gid = owner.pw_uid, owner.pw_gid
        workdir = make_workdir(Path(self.data_dir).absolute(), row.id, uid, gid)
        datasets = link_datasets(workdir, list(uses), uid, gid)
        log_name, exit_name = f"{pod.name}.log", f"{pod.name}.exit"
        try:
            os.unlink(workdir / exit_name)  # never follows a link
        except FileNotFoundError:
            pass
        log_fd = open_owned(workdir, log_name, os.O_WRONLY | os.O_APPEND, uid, gid)
        try:
            prow.log_path = str(workdir / log_name)
            # Paths relative to the work folder: the account may not be able to cross its ancestors.
            user_command = self._command(row, workdir, owner)
            cg, fds = None, []
            if self.cgroups is not None:  # a new one each launch: an old process's end never kills a new one
                cg = self.cgroups.create(self._cgroup_name(row, pod) + secrets.token_hex(3),
                                         cgroups.limits_for(row.spec.get("resources"), self.burst_cpu))
                fds = cg.join_fds()
            command = [self.python, "-m", "hub_ext.backends.local.runner", exit_name,
                       *(["--cgroup", ",".join(map(str, fds))] if fds else []), "--", *user_command]
            try:
                proc = subprocess.Popen(
                    command, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                    env=self._env(row, pod, owner, datasets), start_new_session=True, umask=0o077, pass_fds=fds,
                    **self._identity(owner),
                )
            except OSError as err:
                if cg is not None:
                    cg.remove()
                why = f"{owner.pw_name} cannot run {self.python}: {err.strerror or err}"
                if isinstance(err, PermissionError) and self.per_user:
                    why += " (LocalBackend.python must be a Python every user's account can run)"
                os.write(log_fd, f"tenancy: could not start this pod: {why}\n".encode())
                raise OSError(why) from None
            finally:
                for fd in fds:
                    os.close(fd)
        finally:
            os.close(log_fd)
        if cg is not None:
            self._cgroups[proc.pid] = cg
        prow.pid = proc.pid
        # Durable at once: a service that dies now must find this process again, not start another.
        self.controller.store.commit()
        self._procs[pod.uid] = proc
        self.log.info("started %s/%s (pid %s, as %s) on %s", row.namespace, pod.name, proc.pid, owner.pw_name,
                      pod.node)
        return proc, workdir / exit_name

    async def _watch(self, uid: int, pid: int, exit_path: Path, proc=None) -> None:
        while True:
            if proc is not None:
                if proc.poll() is not None:
                    break
            elif not _alive(pid):
                break
            await asyncio.sleep(POLL_SECONDS)
        # Its command has ended: so does everything it started (setsid or not), and its cgroup goes.
        oom = await self._end_cgroup(pid, exit_path)  # what to say when the kernel stopped it for its memory
        if uid in self._procs and self._procs[uid] is not proc:
            return  # a newer process of this pod is running now; this one's end is old news
        self._procs.pop(uid, None)
        code = _read_exit(exit_path)
        if code is None:
            code = proc.returncode if proc is not None and proc.returncode is not None else 137
            code = 128 - code if code < 0 else code
        reason = Reason("failed", oom, {"exitCode": code, "oomKilled": True}) if oom and code else None
        self.controller.pod_exited(uid, code, reason)

    async def _end_cgroup(self, pid: int, exit_path: Path | None) -> str | None:
        """Kill what is left in the cgroup of the runner ``pid`` and remove it; if the kernel killed one
        of its processes for its memory, the sentence that says so (also written to the pod's log)."""
        cg = self._cgroups.pop(pid, None)
        if cg is None:
            return None
        try:
            kills = await asyncio.to_thread(cg.oom_kills)
            await asyncio.to_thread(cg.end)
        except OSError as err:
            self.log.warning("could not remove the cgroup %s of pod process %s: %s", cg.name, pid, err)
            return None
        if not kills or exit_path is None:
            return None
        memory = cg.limits.memory if cg.limits else None
        size = f" of {_mebibytes(memory)}" if memory else ""
        message = (f"{exit_path.stem} went over its memory limit{size}, so the kernel stopped it (out of memory): "
                   "ask for more memory (resources.limits.memory), or use less")
        self._append_log(exit_path.with_suffix(".log"), f"tenancy: {message}\n")
        return message

    def _append_log(self, path: Path, line: str) -> None:
        try:
            fd = open_owned(path.parent, path.name, os.O_WRONLY | os.O_APPEND, _folder_owner(path),
                            os.lstat(path.parent).st_gid)
        except OSError as err:
            self.log.warning("could not write to %s: %s", path, err)
            return
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def _terminate(self, pid: int | None, grace: float) -> None:
        if not pid or not _alive(pid):
            return
        _signal_group(pid, signal.SIGTERM)
        deadline = asyncio.get_running_loop().time() + max(grace, 0)
        while _alive(pid) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)

    async def evict(self, row, pod, prow, grace: float, reason) -> None:
        if row.kind == "notebook":
            await self._evict_notebook(row, pod, grace, reason)
            return
        await self._terminate(prow.pid, grace)
        # the watcher reports the exit; a pod we no longer watch is done now
        if pod.uid not in self._procs:
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
        cg = self._cgroups.get(prow.pid) if prow.pid else None
        if cg is not None:  # those that left its process group (setsid) are asked too
            await asyncio.to_thread(cg.signal, signal.SIGTERM, prow.pid)
        await self._terminate(prow.pid, self.stop_grace_seconds)
        if cg is not None:
            await asyncio.to_thread(_end_quietly, cg, self.log)

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
        exit_path = Path(prow.log_path or "").with_suffix(".exit") if prow.log_path else None
        if prow.pid and _alive(prow.pid) and not (exit_path and os.path.lexists(exit_path)):
            cg = self.cgroups.of_pid(prow.pid) if self.cgroups is not None else None
            if cg is not None:
                self._cgroups[prow.pid] = cg
            asyncio.ensure_future(self._watch(pod.uid, prow.pid, exit_path))
            self._procs[pod.uid] = None
            return "running"
        if self.cgroups is not None:  # what its processes left running while the service was down
            for cg in self.cgroups.all(self._cgroup_name(row, pod)):
                await asyncio.to_thread(_end_quietly, cg, self.log)
        code = _read_exit(exit_path) if exit_path else None
        return ("exited", code) if code is not None else "gone"

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        if not prow.log_path or not os.path.lexists(prow.log_path):
            return ""
        data = read_owned(prow.log_path, _folder_owner(prow.log_path), tail_bytes=tail_bytes)
        return REPLACED_LOG if data is None else data.decode("utf-8", "replace")


def _me() -> pwd.struct_passwd:
    """This process's own account (a stand-in when its uid has no name, as in some containers)."""
    try:
        return pwd.getpwuid(os.geteuid())
    except KeyError:
        return pwd.struct_passwd((str(os.geteuid()), "x", os.geteuid(), os.getegid(), "",
                                  os.environ.get("HOME", "/"), "/bin/sh"))


def _mebibytes(n: int) -> str:
    return f"{n // 2**20}Mi" if n % 2**20 == 0 else f"{n} bytes"


def _end_quietly(cg: cgroups.Cgroup, log) -> None:
    try:
        cg.end()
    except OSError as err:
        log.warning("could not remove the cgroup %s: %s", cg.name, err)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _signal_group(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _folder_owner(path) -> int:
    """Whose a work folder's files must be: the folder's owner (its account; only root can change it)."""
    try:
        return os.lstat(os.path.dirname(os.path.abspath(path))).st_uid
    except OSError:
        return -1


def _read_exit(path: Path | None) -> int | None:
    """The exit status the runner recorded (as the pod's account) in ``path``, if it is that account's file."""
    if path is None:
        return None
    data = read_owned(path, _folder_owner(path), tail_bytes=64)
    try:
        return int(data.decode().strip()) if data is not None else None
    except ValueError:
        return None
