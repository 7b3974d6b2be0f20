"""A real JupyterHub and the tenancy service (``tenancy serve`` with the Kubernetes backend) for the
cluster benchmark, each a process of its own on 127.0.0.1.

The hub runs with ``NullProxy`` (no configurable-http-proxy: the benchmark talks to the service
directly, as a notebook on the cluster network would), its users in one group (tenant) per
namespace, and hands out the users' API tokens; the service authenticates them against it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from jupyterhub.proxy import Proxy

from .kube import BenchError

PREFIX = "/services/tenancy/"
API = PREFIX + "api/v1"


class NullProxy(Proxy):
    """A proxy that routes nothing: the benchmark reaches the hub's API and the service directly."""

    should_start = False

    async def add_route(self, routespec, target, data):
        return None

    async def delete_route(self, routespec):
        return None

    async def get_all_routes(self):
        return {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(method: str, url: str, token: str, body=None, timeout: float = 30.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        err.close()
        return err.code, raw.decode(errors="replace")


class Process:
    def __init__(self, name: str, argv: list[str], workdir: Path, env: dict):
        self.name, self.log_path = name, workdir / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        self._log.close()


def _wait(proc: Process, check, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not proc.alive():
            raise BenchError(f"{proc.name} exited ({proc.proc.returncode}) while waiting for {what}; "
                             f"log {proc.log_path}:\n{proc.tail()}")
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}; log {proc.log_path}:\n{proc.tail()}")
        time.sleep(0.2)


class HubAndService:
    """The hub (with ``teams``: {group: namespace}, one user ``<group>-user`` each) and the service."""

    def __init__(self, workdir: Path, kubeconfig: str, run: str, teams: dict[str, str], backend: dict,
                 service: dict | None = None):
        self.workdir, self.kubeconfig, self.run, self.teams = workdir, kubeconfig, run, teams
        self.backend, self.service_traits = backend, service or {}
        self.hub_port, self.service_port = free_port(), free_port()
        self.admin_token, self.service_token = secrets.token_hex(32), secrets.token_hex(32)
        self.hub: Process | None = None
        self.service: Process | None = None
        self.tokens: dict[str, str] = {}  # user -> API token

    @property
    def hub_api(self) -> str:
        return f"http://127.0.0.1:{self.hub_port}/hub/api"

    @property
    def service_url(self) -> str:
        return f"http://127.0.0.1:{self.service_port}"

    def users(self) -> list[str]:
        return [f"{group}-user" for group in self.teams]

    def start(self) -> "HubAndService":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start_hub()
        self._start_service()
        for user in self.users():
            status, body = request("POST", f"{self.hub_api}/users/{user}/tokens", self.admin_token,
                                   {"note": "tenancy bench", "expires_in": 24 * 3600})
            if status != 201:
                raise BenchError(f"the hub did not make a token for {user} ({status}): {body}")
            self.tokens[user] = body["token"]
        return self

    def stop(self) -> None:
        for proc in (self.service, self.hub):
            if proc is not None:
                proc.stop()

    def _start_hub(self) -> None:
        groups = {group: {"users": [f"{group}-user"], "properties": {"tenancy.namespace": ns}}
                  for group, ns in self.teams.items()}
        config = f"""
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {free_port()}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.JupyterHub.proxy_class = "hub_ext.bench.hubproc.NullProxy"
c.JupyterHub.db_url = "sqlite:///{self.workdir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret = bytes.fromhex("{secrets.token_hex(32)}")
c.JupyterHub.authenticator_class = "null"
c.Authenticator.allowed_users = {set(self.users())!r}
c.JupyterHub.load_groups = {groups!r}
c.JupyterHub.custom_scopes = {{"custom:tenancy:use": {{"description": "use the tenancy service"}},
                              "custom:tenancy:admin": {{"description": "administer it"}}}}
c.JupyterHub.extra_user_scopes = {{"access:services!service=tenancy", "custom:tenancy:use!user"}}
c.JupyterHub.services = [
    {{"name": "tenancy", "url": "{self.service_url}", "api_token": "{self.service_token}"}},
    {{"name": "bench-admin", "api_token": "{self.admin_token}"}},
]
c.JupyterHub.load_roles = [
    {{"name": "tenancy-service", "services": ["tenancy"],
      "scopes": ["list:users", "read:users:name", "read:users:groups", "read:servers", "delete:servers",
                 "list:groups", "read:groups"]}},
    {{"name": "bench-admin", "services": ["bench-admin"], "scopes": ["admin:users", "tokens", "admin:groups"]}},
]
"""
        path = self.workdir / "jupyterhub_config.py"
        path.write_text(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
        self.hub = Process("jupyterhub", [sys.executable, "-m", "jupyterhub", "-f", str(path)], self.workdir, env)
        _wait(self.hub, lambda: request("GET", f"{self.hub_api}/", self.admin_token, timeout=2)[0] == 200,
              "the hub's API", 90)

    def _start_service(self) -> None:
        traits = {"backend_class": "hub_ext.backends.kubernetes.KubernetesBackend",
                  "db_url": f"sqlite:///{self.workdir / 'tenancy.sqlite'}",
                  "max_queued_per_user": 0, "max_workloads_per_team": 0, "history_interval_seconds": 60.0,
                  **self.service_traits}
        lines = ["c = get_config()  # noqa: F821"]
        lines += [f"c.TenancyService.{k} = {v!r}" for k, v in traits.items()]
        lines += [f"c.KubernetesBackend.{k} = {v!r}" for k, v in
                  {"kubeconfig": self.kubeconfig, "quota_tree_object": "", **self.backend}.items()]
        path = self.workdir / "tenancy_config.py"
        path.write_text("\n".join(lines) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
        env.update({"JUPYTERHUB_API_TOKEN": self.service_token, "JUPYTERHUB_API_URL": self.hub_api,
                    "JUPYTERHUB_SERVICE_NAME": "tenancy", "JUPYTERHUB_SERVICE_PREFIX": PREFIX,
                    "JUPYTERHUB_SERVICE_URL": self.service_url, "JUPYTERHUB_CLIENT_ID": "service-tenancy",
                    "JUPYTERHUB_OAUTH_ACCESS_SCOPES": json.dumps(["access:services!service=tenancy"]),
                    "PYTHONUNBUFFERED": "1"})
        argv = [sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(path), "--port", str(self.service_port)]
        self.service = Process("tenancy", argv, self.workdir, env)

        def healthy():
            status, _ = request("GET", f"{self.service_url}{API}/health", self.service_token, timeout=2)
            return status == 200

        _wait(self.service, healthy, "the tenancy service's /health", 120)

    @property
    def service_pid(self) -> int | None:
        return self.service.proc.pid if self.service is not None else None

    @property
    def hub_pid(self) -> int | None:
        return self.hub.proc.pid if self.hub is not None else None
