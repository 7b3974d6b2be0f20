"""The life of a local training pod's process: launched, watched, ended, read back.

A pod's command runs under ``python -m hub_ext.backends.local.runner`` (which records
its exit status in ``<pod>.exit``) as the pod's account, in the workload's work folder,
in a process group of its own and, where one can be made, a cgroup of its own; what it
prints goes to ``<pod>.log``. It is watched until it ends: then everything left in its
cgroup is killed, the cgroup removed, and its exit status reported to the controller
(with the kernel's words when it was stopped for its memory). Ending it early is
SIGTERM to its group, the grace period, then SIGKILL. After a restart, a process still
running is watched again, and what a dead one left in its cgroups is ended.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import secrets
import signal
import subprocess
from pathlib import Path

from ...scheduler.model import Reason
from . import cgroups
from .accounts import groups_of
from .datasets import link_datasets
from .workdir import make_workdir, open_owned, read_owned, write_owned

POLL_SECONDS = 0.2
#: Never handed down to a pod, whatever the service's environment holds.
SECRET_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "TENANCY_HUB_TOKEN_FD")
#: ``python script.py``, as __main__, opening the script by its relative path (see ``command``).
RUN_SCRIPT = ("import sys; sys.argv[0] = __file__ = 'script.py'; "
              "exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))")
REPLACED_LOG = "tenancy: this pod's log file was replaced by something that is not its own file; it is not shown\n"


class Processes:
    """How a ``LocalBackend`` runs, watches and ends the processes of its training pods."""

    def __init__(self, backend):
        # its configuration (python, data_dir, env, burst_cpu), per_user, cgroups, controller and log
        self.backend = backend
        self.procs: dict[int, subprocess.Popen | None] = {}  # a pod's uid -> its process (None: adopted)
        self.cgroups: dict[int, cgroups.Cgroup] = {}  # a runner's pid -> its pod's cgroup

    def watched(self, uid: int) -> bool:
        """Whether a process of the pod ``uid`` is watched (its watcher reports its end)."""
        return uid in self.procs

    def command(self, row, workdir: Path, owner: pwd.struct_passwd) -> list[str]:
        spec = row.spec
        if "command" in spec:
            return list(spec["command"])
        write_owned(workdir, "script.py", spec["script"], owner.pw_uid, owner.pw_gid)
        # Not `python script.py`: Python opens a script by its absolute path, which the account may
        # not be able to walk (a DATA_DIR below a folder only root enters); this opens it relatively.
        return [self.backend.python, "-c", RUN_SCRIPT]

    def env(self, row, pod, owner: pwd.struct_passwd, datasets: dict | None = None) -> dict:
        backend = self.backend
        # The service's environment, without what makes it the hub's service (a pod is not).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
        if backend.per_user:
            env.update(HOME=owner.pw_dir, USER=owner.pw_name, LOGNAME=owner.pw_name,
                       SHELL=owner.pw_shell or "/bin/sh",
                       PATH=os.path.dirname(backend.python) + os.pathsep + env.get("PATH", os.defpath))
        env.update(backend.env)
        env.update(row.spec.get("env", {}))
        env.update({"TENANCY_WORKLOAD": row.name, "TENANCY_WORKLOAD_ID": row.id, "TENANCY_NAMESPACE": row.namespace,
                    "TENANCY_POD": pod.name, "TENANCY_REPLICAS": str(row.spec.get("replicas", 1)),
                    "TENANCY_NODE": pod.node or "", "PYTHONUNBUFFERED": "1",
                    # name -> the absolute path of its link in the work folder: code never hard-codes one
                    "TENANCY_DATASETS": json.dumps(datasets or {}, sort_keys=True)})
        for secret in SECRET_ENV:
            env.pop(secret, None)
        return env

    def identity(self, owner: pwd.struct_passwd) -> dict:
        """Popen arguments that drop to ``owner`` (its uid, its group, its own groups only)."""
        if not self.backend.per_user:
            return {}
        return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": groups_of(owner)}

    def cgroup_name(self, row, pod) -> str:
        """``<service>-<workload>-<pod>-``: what the names of this pod's cgroups start with."""
        return f"{cgroups.service_prefix(self.backend.data_dir)}{row.id}-{pod.name}-"

    def launch(self, row, pod, prow, owner: pwd.struct_passwd, uses=()):
        """Start the pod's process as ``owner``; (its Popen, the path of its exit file)."""
        backend = self.backend
        uid, gid = owner.pw_uid, owner.pw_gid
        workdir = make_workdir(Path(backend.data_dir).absolute(), row.id, uid, gid)
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
            user_command = self.command(row, workdir, owner)
            cg, fds = None, []
            if backend.cgroups is not None:  # a new one each launch: an old process's end never kills a new one
                cg = backend.cgroups.create(self.cgroup_name(row, pod) + secrets.token_hex(3),
                                            cgroups.limits_for(row.spec.get("resources"), backend.burst_cpu))
                fds = cg.join_fds()
            command = [backend.python, "-m", "hub_ext.backends.local.runner", exit_name,
                       *(["--cgroup", ",".join(map(str, fds))] if fds else []), "--", *user_command]
            try:
                proc = subprocess.Popen(
                    command, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                    env=self.env(row, pod, owner, datasets), start_new_session=True, umask=0o077, pass_fds=fds,
                    **self.identity(owner),
                )
            except OSError as err:
                if cg is not None:
                    cg.remove()
                why = f"{owner.pw_name} cannot run {backend.python}: {err.strerror or err}"
                if isinstance(err, PermissionError) and backend.per_user:
                    why += " (LocalBackend.python must be a Python every user's account can run)"
                os.write(log_fd, f"tenancy: could not start this pod: {why}\n".encode())
                raise OSError(why) from None
            finally:
                for fd in fds:
                    os.close(fd)
        finally:
            os.close(log_fd)
        if cg is not None:
            self.cgroups[proc.pid] = cg
        prow.pid = proc.pid
        # Durable at once: a service that dies now must find this process again, not start another.
        backend.controller.store.commit()
        self.procs[pod.uid] = proc
        backend.log.info("started %s/%s (pid %s, as %s) on %s", row.namespace, pod.name, proc.pid, owner.pw_name,
                         pod.node)
        return proc, workdir / exit_name

    async def watch(self, uid: int, pid: int, exit_path: Path, proc=None) -> None:
        """Until the process ``pid`` ends; then report the pod's exit to the controller."""
        while True:
            if proc is not None:
                if proc.poll() is not None:
                    break
            elif not _alive(pid):
                break
            await asyncio.sleep(POLL_SECONDS)
        # Its command has ended: so does everything it started (setsid or not), and its cgroup goes.
        oom = await self.end_cgroup(pid, exit_path)  # what to say when the kernel stopped it for its memory
        if uid in self.procs and self.procs[uid] is not proc:
            return  # a newer process of this pod is running now; this one's end is old news
        self.procs.pop(uid, None)
        code = _read_exit(exit_path)
        if code is None:
            code = proc.returncode if proc is not None and proc.returncode is not None else 137
            code = 128 - code if code < 0 else code
        reason = Reason("failed", oom, {"exitCode": code, "oomKilled": True}) if oom and code else None
        self.backend.controller.pod_exited(uid, code, reason)

    async def end_cgroup(self, pid: int, exit_path: Path | None) -> str | None:
        """Kill what is left in the cgroup of the runner ``pid`` and remove it; if the kernel killed one
        of its processes for its memory, the sentence that says so (also written to the pod's log)."""
        cg = self.cgroups.pop(pid, None)
        if cg is None:
            return None
        try:
            kills = await asyncio.to_thread(cg.oom_kills)
            await asyncio.to_thread(cg.end)
        except OSError as err:
            self.backend.log.warning("could not remove the cgroup %s of pod process %s: %s", cg.name, pid, err)
            return None
        if not kills or exit_path is None:
            return None
        memory = cg.limits.memory if cg.limits else None
        size = f" of {_mebibytes(memory)}" if memory else ""
        message = (f"{exit_path.stem} went over its memory limit{size}, so the kernel stopped it (out of memory): "
                   "ask for more memory (resources.limits.memory), or use less")
        self.append_log(exit_path.with_suffix(".log"), f"tenancy: {message}\n")
        return message

    def append_log(self, path: Path, line: str) -> None:
        try:
            fd = open_owned(path.parent, path.name, os.O_WRONLY | os.O_APPEND, _folder_owner(path),
                            os.lstat(path.parent).st_gid)
        except OSError as err:
            self.backend.log.warning("could not write to %s: %s", path, err)
            return
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def terminate(self, pid: int | None, grace: float) -> None:
        """SIGTERM to the process group of ``pid``; SIGKILL if it is still there ``grace`` seconds later."""
        if not pid or not _alive(pid):
            return
        _signal_group(pid, signal.SIGTERM)
        deadline = asyncio.get_running_loop().time() + max(grace, 0)
        while _alive(pid) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)

    async def stop(self, prow, grace: float) -> None:
        """End a cancelled pod's process, and everything in its cgroup."""
        cg = self.cgroups.get(prow.pid) if prow.pid else None
        if cg is not None:  # those that left its process group (setsid) are asked too
            await asyncio.to_thread(cg.signal, signal.SIGTERM, prow.pid)
        await self.terminate(prow.pid, grace)
        if cg is not None:
            await asyncio.to_thread(_end_quietly, cg, self.backend.log)

    async def recover(self, row, prow, pod):
        """``"running"`` (watched again), ``("exited", code)`` or ``"gone"`` for a pod's process that
        ran before a restart."""
        backend = self.backend
        exit_path = Path(prow.log_path or "").with_suffix(".exit") if prow.log_path else None
        if prow.pid and _alive(prow.pid) and not (exit_path and os.path.lexists(exit_path)):
            cg = backend.cgroups.of_pid(prow.pid) if backend.cgroups is not None else None
            if cg is not None:
                self.cgroups[prow.pid] = cg
            asyncio.ensure_future(self.watch(pod.uid, prow.pid, exit_path))
            self.procs[pod.uid] = None
            return "running"
        if backend.cgroups is not None:  # what its processes left running while the service was down
            for cg in backend.cgroups.all(self.cgroup_name(row, pod)):
                await asyncio.to_thread(_end_quietly, cg, backend.log)
        code = _read_exit(exit_path) if exit_path else None
        return ("exited", code) if code is not None else "gone"

    def logs(self, prow, tail_bytes: int) -> str:
        """What the pod's process printed (its last ``tail_bytes``), if its log is still its own file."""
        if not prow.log_path or not os.path.lexists(prow.log_path):
            return ""
        data = read_owned(prow.log_path, _folder_owner(prow.log_path), tail_bytes=tail_bytes)
        return REPLACED_LOG if data is None else data.decode("utf-8", "replace")


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
