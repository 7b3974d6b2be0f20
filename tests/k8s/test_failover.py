"""High availability on the real control plane: two ``tenancy serve`` replicas, one PostgreSQL database,
leader election on a Lease.

- ``kill -9`` of the leader with work queued: a follower leads within 15 s; requests sent
  to it meanwhile are answered 503 with ``Retry-After`` (nothing acts, nothing is created);
  afterwards every workload runs, each as exactly one Job; the Jobs the old leader created
  all predate its death and those of the new one all follow its election (each Job's field
  manager names the replica that created it); the Lease moved once.
- A leader cut off from the API server stops acting (exits) within its renew deadline,
  before the follower may take the lease: never two leaders at once.

The replicas run as processes (``python -m hub_ext.cli serve``) with a stand-in for the
hub's API that knows one token, the service's own (an admin). Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from hub_ext.backends.kubernetes.objects import WORKLOAD_LABEL

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
from tcp_proxy import TcpProxy  # noqa: E402
from waiting import CALL_TIMEOUT, k8s, until  # noqa: E402

KEY = "tenancy-test/failover"
TOKEN = secrets.token_hex(16)  # the service's own hub token: the hub's spawner, an admin
PREFIX = "/services/tenancy"
#: short leases keep the module quick; the takeover bound is lease + 2 retry periods
LEASE = {"lease_duration_seconds": 8.0, "renew_deadline_seconds": 5.0, "retry_period_seconds": 1.0}


class FakeHub(BaseHTTPRequestHandler):
    """The hub API as the service uses it: ``/user`` (who a token is), no groups, no servers."""

    def do_GET(self):  # noqa: N802 - http.server's name
        token = self.headers.get("Authorization", "").partition(" ")[2]
        path = self.path.split("?")[0]
        if token != TOKEN:
            return self._send(403, {"status": 403, "message": "bad token"})
        if path == "/hub/api/user":
            return self._send(200, {"kind": "service", "name": "tenancy", "roles": [],
                                    "scopes": ["access:services!service=tenancy", "custom:tenancy:admin"]})
        if path in ("/hub/api/groups", "/hub/api/users"):
            return self._send(200, {"items": [], "_pagination": {"offset": 0, "limit": 200, "total": 0, "next": None}})
        return self._send(404, {"status": 404, "message": "not here"})

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hub/api"
    server.shutdown()


@pytest.fixture
def label(control_plane, api, seed_classes):
    value = uuid.uuid4().hex[:6]
    yield value
    core = client.CoreV1Api(api)
    for node in core.list_node(label_selector=f"{KEY}={value}", _request_timeout=CALL_TIMEOUT).items:
        with contextlib.suppress(ApiException):
            core.delete_node(node.metadata.name, _request_timeout=CALL_TIMEOUT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One ``tenancy serve`` process; its Kubernetes client's User-Agent (so each object's field
    manager) is its name."""

    def __init__(self, name: str, tmp_path: Path, *, db: str, hub: str, kubeconfig: Path, namespace: str,
                 label: str, lease: str):
        self.name, self.port = name, free_port()
        self.err = tmp_path / f"{name}.err"
        self.config = tmp_path / f"{name}_config.py"
        traits = {"backend_class": "hub_ext.backends.kubernetes.KubernetesBackend", "leader_election": True,
                  "identity": name, "advertise_url": f"http://127.0.0.1:{self.port}", "lease_name": lease,
                  "lease_namespace": namespace, "max_queued_per_user": 0, "max_workloads_per_team": 0,
                  "lock_wait_seconds": 20.0, **LEASE}
        backend = {"kubeconfig": str(kubeconfig), "node_label_selector": f"{KEY}={label}",
                   "node_selector": {KEY: label}, "quota_tree_object": "", "count_foreign_pods": False,
                   "sync_cluster_limits": False, "poll_seconds": 0.3, "checks_seconds": 2.0,
                   "health_check_seconds": 1.0}
        lines = ["c.TenancyService.log_level = 'INFO'"]  # the election's lines
        lines += [f"c.TenancyService.{k} = {v!r}" for k, v in traits.items()]
        lines += [f"c.KubernetesBackend.{k} = {v!r}" for k, v in backend.items()]
        lines += ["import kubernetes.client",
                  "_init = kubernetes.client.ApiClient.__init__",
                  "def _named(self, *args, **kwargs):",
                  "    _init(self, *args, **kwargs)",
                  f"    self.user_agent = '{name}/1.0'",
                  "kubernetes.client.ApiClient.__init__ = _named"]
        self.config.write_text("\n".join(lines) + "\n")
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")},
                    "JUPYTERHUB_API_URL": hub, "JUPYTERHUB_API_TOKEN": TOKEN, "JUPYTERHUB_SERVICE_NAME": "tenancy",
                    "PYTHONPATH": str(REPO)}
        self.argv = [sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(self.config), "--db", db,
                     "--port", str(self.port), "--ip", "127.0.0.1"]
        self.proc: subprocess.Popen | None = None
        self.exited_at: float | None = None

    def start(self) -> "Replica":
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                         cwd=self.err.parent, env=self.env)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.err.read_text()

    def alive(self, value=True):
        assert self.proc.poll() is None, f"{self.name} exited ({self.proc.returncode}):\n{self.log()[-3000:]}"
        return value

    def request(self, method: str, path: str, body=None) -> tuple[int, dict, dict]:
        """(status, JSON answer, headers) of one API call with the service's token."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{PREFIX}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}"), dict(r.headers)
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}"), dict(err.headers)
        except OSError:
            return 0, {}, {}

    async def call(self, method: str, path: str, body=None):
        return await asyncio.to_thread(self.request, method, path, body)

    async def health(self) -> dict:
        return (await self.call("GET", "/api/v1/health"))[1]


async def jobs_of(api, namespace):
    return (await k8s(client.BatchV1Api(api).list_namespaced_job, namespace)).items


async def running(api, namespace) -> int:
    pods = (await k8s(client.CoreV1Api(api).list_namespaced_pod, namespace)).items
    return sum(1 for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp)


def job(i: int, namespace: str) -> dict:
    return {"kind": "training", "namespace": namespace, "name": f"job{i}", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "1"}}}


def manager(obj) -> str:
    """Who created an object: the field manager of its spec (the client's User-Agent), not of its status."""
    [who] = {m.manager for m in obj.metadata.managed_fields if not m.subresource}
    return who


async def leads(replica: Replica) -> bool:
    report = await replica.health()
    return report.get("role") == "leader" and report.get("status") == "ok"


async def follows(replica: Replica, leader: str) -> dict | None:
    report = await replica.health()
    return report if report.get("leader") == leader else None


class Roles:
    """Samples every replica's /health role in the background: at no sample may two say leader."""

    def __init__(self, replicas):
        self.replicas, self.samples, self.task = replicas, [], None

    async def _run(self):
        while True:
            roles = await asyncio.gather(*(r.health() for r in self.replicas))
            self.samples.append(tuple(h.get("role") for h in roles))
            await asyncio.sleep(0.2)

    def __enter__(self):
        self.task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc):
        self.task.cancel()

    def check(self):
        both = [s for s in self.samples if s.count("leader") > 1]
        assert not both, f"two replicas said leader at once in {len(both)} sample(s)"
        assert len(self.samples) > 10


@contextlib.contextmanager
def replicas(*rs):
    try:
        yield rs
    finally:
        for r in rs:
            r.stop()


def lease_of(api, namespace, name):
    return client.CoordinationV1Api(api).read_namespaced_lease(name, namespace, _request_timeout=CALL_TIMEOUT)


@pytest.mark.asyncio
async def test_kill_9_of_the_leader_mid_queue_loses_nothing_and_doubles_nothing(
        control_plane, api, namespace, label, postgres_url, hub, tmp_path):
    # one node: which node a pod goes to is not in question (the engine's choice is kube-scheduler's)
    await asyncio.to_thread(control_plane.add_node, f"fo-{label}-0", {"cpu": "16", "memory": "64Gi"},
                            labels={KEY: label})
    common = {"db": postgres_url, "hub": hub, "kubeconfig": control_plane.kubeconfig, "namespace": namespace,
              "label": label, "lease": f"tenancy-{label}"}
    a, b = Replica("replica-a", tmp_path, **common), Replica("replica-b", tmp_path, **common)
    with replicas(a.start(), b), Roles([a, b]) as roles:
        await until(lambda: leads(a), "replica-a to lead", timeout=60, show=a.log)
        b.start()
        report = await until(lambda: follows(b, "replica-a"), "replica-b to follow replica-a", timeout=60,
                             show=b.log)
        assert (report["role"], report["leader"], report["status"]) == ("follower", "replica-a", "ok"), report

        # 30 jobs through the follower (forwarded to the leader): 16 fit, 14 wait in the queue
        answers = [await b.call("POST", "/api/v1/workloads", job(i, namespace)) for i in range(30)]
        assert [status for status, _, _ in answers] == [201] * 30, answers[:3]
        ids = {body["id"] for _, body, _ in answers}
        await until(async_eq(lambda: running(api, namespace), 16), "16 jobs running", timeout=60,
                    show=lambda: a.log()[-2000:])
        async def counts():
            status, listing, _ = await b.call("GET", "/api/v1/workloads?limit=500")  # forwarded, read by the leader
            return status == 200 and sorted(collections.Counter(w["state"] for w in listing["workloads"]).items())
        await until(async_eq(counts, [("Pending", 14), ("Running", 16)]), "16 Running and 14 Pending in the service",
                    timeout=30, show=counts)

        a.kill()
        killed = time.monotonic()
        killed_wall = dt.datetime.now(dt.timezone.utc)
        # no leader: the follower says so, and nothing acts while the work waits for capacity
        status, body, headers = await b.call("POST", "/api/v1/workloads", job(99, namespace))
        assert status == 503 and headers.get("Retry-After") == "2", (status, body)
        assert "does not answer" in body["error"], body
        before = await jobs_of(api, namespace)
        shown = "\n".join(str((j.metadata.name, j.metadata.labels.get(WORKLOAD_LABEL), manager(j),
                                j.metadata.creation_timestamp, j.metadata.deletion_timestamp, j.status.active))
                           for j in before)
        assert len({j.metadata.labels[WORKLOAD_LABEL] for j in before}) == len(before) == 16, shown
        assert {manager(j) for j in before} == {"replica-a"}, shown
        # room for the queue (the new leader admits it; the Jobs' creators and times are checked below)
        await asyncio.to_thread(control_plane.add_node, f"fo-{label}-1", {"cpu": "24", "memory": "64Gi"},
                                labels={KEY: label})

        await until(lambda: leads(b), "replica-b to lead", timeout=30, show=b.log)
        took = time.monotonic() - killed
        elected_wall = dt.datetime.now(dt.timezone.utc)
        assert took < 15, f"the follower led {took:.1f} s after the leader was killed"
        report = await b.health()
        assert (report["role"], report["leader"]) == ("leader", "replica-b"), report

        # 10 more, now to the new leader itself: every one of the 40 runs, each as one Job
        answers = [await b.call("POST", "/api/v1/workloads", job(30 + i, namespace)) for i in range(10)]
        assert [status for status, _, _ in answers] == [201] * 10, answers[:3]
        ids |= {body["id"] for _, body, _ in answers}
        await until(async_eq(lambda: running(api, namespace), 40), "40 jobs running", timeout=60,
                    show=lambda: b.log()[-2000:])

        async def all_running():
            status, listing, _ = await b.call("GET", "/api/v1/workloads?limit=500")
            return status == 200 and {w["id"]: w["state"] for w in listing["workloads"]}
        states = await until(lambda: _all(all_running(), "Running"), "all 40 workloads Running", timeout=30,
                             show=all_running)
        assert set(states) == ids and len(ids) == 40

        jobs = await jobs_of(api, namespace)
        per_workload = {}
        for j in jobs:
            per_workload.setdefault(j.metadata.labels[WORKLOAD_LABEL], []).append(j.metadata.name)
        assert len(jobs) == 40 and all(len(names) == 1 for names in per_workload.values()), per_workload
        by = {}
        for j in jobs:
            by.setdefault(manager(j), []).append(j.metadata.creation_timestamp)
        assert sorted(by) == ["replica-a", "replica-b"] and len(by["replica-a"]) == len(before), \
            {k: len(v) for k, v in by.items()}
        second = dt.timedelta(seconds=1)  # creationTimestamp has whole seconds
        assert max(by["replica-a"]) <= killed_wall + second
        assert min(by["replica-b"]) >= elected_wall - dt.timedelta(seconds=took) - second  # not before its election
        assert min(by["replica-b"]) > killed_wall - second

        lease = await asyncio.to_thread(lease_of, api, namespace, f"tenancy-{label}")
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("replica-b", 1)
        assert lease.metadata.annotations["tenancy.jupyter.org/advertise-url"] == f"http://127.0.0.1:{b.port}"
        assert b.log().count("leader election: replica-b leads (lease") == 1
        assert a.log().count("leader election: replica-a leads (lease") == 1
        roles.check()


def async_eq(fn, value):
    async def check():
        return (await fn()) == value
    return check


async def _all(awaitable, state):
    got = await awaitable
    return got if got and all(s == state for s in got.values()) else None


@pytest.mark.asyncio
async def test_a_leader_cut_off_from_the_api_server_stops_acting_before_the_lease_expires(
        control_plane, api, namespace, label, postgres_url, hub, tmp_path):
    await asyncio.to_thread(control_plane.add_node, f"fo-{label}-0", {"cpu": "4", "memory": "16Gi"},
                            labels={KEY: label})
    proxy = TcpProxy(int(str(control_plane.server).rsplit(":", 1)[1])).start()
    cut_config = tmp_path / "proxied.kubeconfig"
    import yaml
    cfg = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    for cluster in cfg["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    cut_config.write_text(yaml.safe_dump(cfg))
    common = {"db": postgres_url, "hub": hub, "namespace": namespace, "label": label, "lease": f"tenancy-{label}"}
    a = Replica("replica-a", tmp_path, kubeconfig=cut_config, **common)
    b = Replica("replica-b", tmp_path, kubeconfig=control_plane.kubeconfig, **common)
    try:
        with replicas(a.start(), b), Roles([a, b]) as roles:
            await until(lambda: leads(a), "replica-a to lead", timeout=60, show=a.log)
            b.start()
            await until(lambda: follows(b, "replica-a"), "replica-b to follow replica-a", timeout=60, show=b.log)
            status, body, _ = await b.call("POST", "/api/v1/workloads", job(0, namespace))
            assert status == 201, body
            await until(async_eq(lambda: running(api, namespace), 1), "the job running", timeout=60)

            proxy.cut()  # replica-a can no longer renew
            cut = time.monotonic()
            await until(lambda: a.proc.poll() is not None, "replica-a to exit", timeout=15, interval=0.05)
            exited = time.monotonic() - cut
            await until(lambda: leads(b), "replica-b to lead", timeout=30, show=b.log)
            led = time.monotonic() - cut
            # it stopped acting within its renew deadline (plus the request in flight), before the
            # lease could expire for the follower (its record unchanged for lease_duration)
            assert exited < LEASE["renew_deadline_seconds"] + 1.5, exited
            assert exited < led and led >= LEASE["lease_duration_seconds"] - LEASE["retry_period_seconds"], (exited, led)
            assert a.proc.returncode == 1
            assert "was not renewed for 5 s" in a.log() and "this replica stops acting now" in a.log(), a.log()[-2000:]
            # the work it started is adopted, not created again
            jobs = await jobs_of(api, namespace)
            assert [manager(j) for j in jobs] == ["replica-a"]
            status, listing, _ = await b.call("GET", "/api/v1/workloads")
            assert [w["state"] for w in listing["workloads"]] == ["Running"], listing
            roles.check()
    finally:
        proxy.cut()
