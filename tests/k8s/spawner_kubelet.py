"""A stand-in kubelet for notebook pods: runs the pod's command as a local process on the pod's IP.

kwok (the fake kubelet of the test control plane) makes bound pods Running and
gives them an IP from 127.20.0.0/16, but runs nothing, so the hub would wait for
a server that never answers. ``StandInKubelet`` watches Running pods matching a
label selector and starts each one's container command (``jupyterhub-singleuser``
from this venv, or what the pod says) with the pod's environment, listening on
the pod's IP and container port, the way a container in its own network
namespace listens on ``0.0.0.0``. When the pod is deleted, the process is stopped.

Only processes it started are ever signalled (each in its own session).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse


class StandInKubelet:
    def __init__(self, api_client, label_selector: str, workdir: Path, *, poll_seconds: float = 0.2,
                 drop_env=("TENANCY_HUB_HARNESS",)):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.selector = label_selector
        self.workdir = Path(workdir)
        self.poll_seconds = poll_seconds
        # The hub harness stops every process carrying its marker; a pod outlives a hub restart.
        self.drop_env = set(drop_env)
        self.procs: dict[str, subprocess.Popen] = {}  # pod uid -> the process
        self.started: dict[str, str] = {}  # pod uid -> "namespace/name"
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stand-in-kubelet", daemon=True)

    def __enter__(self) -> "StandInKubelet":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        for uid in list(self.procs):
            self._kill(uid)

    # -- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.core.list_pod_for_all_namespaces(label_selector=self.selector).items
            except Exception as err:  # noqa: BLE001 - a failed list is retried
                self.errors.append(f"list: {err}")
                time.sleep(self.poll_seconds)
                continue
            live = set()
            for pod in pods:
                uid = pod.metadata.uid
                if pod.metadata.deletion_timestamp is not None:
                    continue
                live.add(uid)
                if uid not in self.procs and pod.status.phase == "Running" and pod.status.pod_ip:
                    try:
                        self.procs[uid] = self._launch(pod)
                        self.started[uid] = f"{pod.metadata.namespace}/{pod.metadata.name}"
                    except Exception as err:  # noqa: BLE001 - reported by the test
                        self.errors.append(f"{pod.metadata.name}: {err}")
                        self.procs[uid] = None
            for uid in [u for u in self.procs if u not in live]:
                self._kill(uid)
            time.sleep(self.poll_seconds)

    # -- one pod -------------------------------------------------------------------------
    def _launch(self, pod) -> subprocess.Popen:
        container = pod.spec.containers[0]
        ip = pod.status.pod_ip
        argv = list(container.command or []) + list(container.args or []) or ["jupyterhub-singleuser"]
        bindir = str(Path(sys.executable).parent)
        home = self.workdir / f"{pod.metadata.namespace}-{pod.metadata.name}"
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", os.defpath), "HOME": str(home),
               "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        for var in container.env or []:
            if var.value is not None and var.name not in self.drop_env:  # valueFrom (downward API, secrets) is not emulated
                env[var.name] = var.value
        # In a pod the server listens on 0.0.0.0 of its own network namespace; here, on the pod IP.
        if env.get("JUPYTERHUB_SERVICE_URL"):
            url = urlparse(env["JUPYTERHUB_SERVICE_URL"])
            env["JUPYTERHUB_SERVICE_URL"] = urlunparse(url._replace(netloc=f"{ip}:{url.port or 80}"))
        argv = [a.replace("--ip=0.0.0.0", f"--ip={ip}") for a in argv]
        log = open(home / "server.log", "ab")
        try:
            return subprocess.Popen(argv, env=env, cwd=str(home), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def _kill(self, uid: str) -> None:
        proc = self.procs.pop(uid, None)
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)  # its own session: only what it started
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def running(self, namespace: str, name: str) -> bool:
        """Whether a process runs for the pod ``namespace/name``."""
        return any(self.started.get(uid) == f"{namespace}/{name}" and proc is not None and proc.poll() is None
                   for uid, proc in list(self.procs.items()))
