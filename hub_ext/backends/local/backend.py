"""The local backend: a declared virtual capacity; training pods are real processes, notebooks real servers.

Training pods run as ``python -m hub_ext.backends.local.runner`` wrapping the
user's command, in their own process group, with stdout and stderr captured to
a log file. Eviction is SIGTERM to the group, the grace period, then SIGKILL.
Notebook servers are started by the spawner once admitted; evicting one warns
its user (an event on the workload) and then stops the server through the hub
API, recording who preempted it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from traitlets import Dict, Float, List, Unicode
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from .. import Backend

POLL_SECONDS = 0.2


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
        help="Where training pods run and write their logs (one folder per workload).",
    ).tag(config=True)

    notebook_warning_seconds = Float(
        10.0,
        help="""
        How long a preempted notebook's user is warned before the server is stopped
        (capped by the grace period). The warning is an event on the workload, shown on
        the spawn page, in the API and in the lab extension.
        """,
    ).tag(config=True)

    stop_grace_seconds = Float(
        5.0, help="Grace period when a training job is cancelled (SIGTERM, then SIGKILL).",
    ).tag(config=True)

    env = Dict(
        help="Extra environment for training pods (values are strings).",
    ).tag(config=True)

    def __init__(self, hub=None, **kwargs):
        super().__init__(**kwargs)
        self.hub = hub
        self._procs: dict[int, subprocess.Popen] = {}

    def nodes(self):
        out = []
        for i, raw in enumerate(self.nodes_config):
            out.append(parse_node(raw, f"LocalBackend.nodes_config[{i}]"))
        if not out:
            raise ValidationError("LocalBackend.nodes_config: declare at least one node")
        return out

    # -- training pods -----------------------------------------------------------
    def _dir(self, row) -> Path:
        path = Path(self.data_dir).absolute() / "workloads" / row.id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _command(self, row, workdir: Path) -> list[str]:
        spec = row.spec
        if "command" in spec:
            return list(spec["command"])
        script = workdir / "script.py"
        script.write_text(spec["script"])
        return [sys.executable, str(script)]

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner starts the server once it sees the admission
        try:
            proc, exit_path = self._launch(row, pod, prow)
        except Exception as err:  # noqa: BLE001 - an unstartable pod ends, it does not hold quota
            self.log.error("could not start %s/%s: %s", row.namespace, pod.name, err)
            self.controller.pod_exited(pod.uid, 127)
            return
        await self._watch(pod.uid, proc.pid, exit_path, proc)

    def _launch(self, row, pod, prow):
        workdir = self._dir(row)
        log_path, exit_path = workdir / f"{pod.name}.log", workdir / f"{pod.name}.exit"
        exit_path.unlink(missing_ok=True)
        env = {**os.environ, **self.env, **row.spec.get("env", {}),
               "TENANCY_WORKLOAD": row.name, "TENANCY_WORKLOAD_ID": row.id, "TENANCY_NAMESPACE": row.namespace,
               "TENANCY_POD": pod.name, "TENANCY_REPLICAS": str(row.spec.get("replicas", 1)),
               "TENANCY_NODE": pod.node or "", "PYTHONUNBUFFERED": "1"}
        for secret in ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"):
            env.pop(secret, None)  # not handed down (the service drops it from its own environment too)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hub_ext.backends.local.runner", str(exit_path), "--",
                 *self._command(row, workdir)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir, env=env,
                start_new_session=True,
            )
        prow.pid, prow.log_path = proc.pid, str(log_path)
        # Durable at once: a service that dies now must find this process again, not start another.
        self.controller.store.commit()
        self._procs[pod.uid] = proc
        self.log.info("started %s/%s (pid %s) on %s", row.namespace, pod.name, proc.pid, pod.node)
        return proc, exit_path

    async def _watch(self, uid: int, pid: int, exit_path: Path, proc=None) -> None:
        while True:
            if proc is not None:
                if proc.poll() is not None:
                    break
            elif not _alive(pid):
                break
            await asyncio.sleep(POLL_SECONDS)
        if uid in self._procs and self._procs[uid] is not proc:
            return  # a newer process of this pod is running now; this one's end is old news
        self._procs.pop(uid, None)
        code = _read_exit(exit_path)
        if code is None:
            code = proc.returncode if proc is not None and proc.returncode is not None else 137
            code = 128 - code if code < 0 else code
        self.controller.pod_exited(uid, code)

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
        warn = max(0.0, min(self.notebook_warning_seconds, grace))
        server = row.spec.get("serverName") or ""
        self.controller.store.record(
            self.controller.clock(), "warning",
            f"your notebook server will be stopped in {warn:.0f}s: {reason.message}", row.id, reason.details)
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
        await self._terminate(prow.pid, self.stop_grace_seconds)

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
        if prow.pid and _alive(prow.pid) and not (exit_path and exit_path.exists()):
            asyncio.ensure_future(self._watch(pod.uid, prow.pid, exit_path))
            self._procs[pod.uid] = None
            return "running"
        code = _read_exit(exit_path) if exit_path else None
        return ("exited", code) if code is not None else "gone"

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        if not prow.log_path or not os.path.exists(prow.log_path):
            return ""
        with open(prow.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - tail_bytes))
            return f.read().decode("utf-8", "replace")


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


def _read_exit(path: Path | None) -> int | None:
    try:
        return int(path.read_text().strip()) if path else None
    except (OSError, ValueError):
        return None
