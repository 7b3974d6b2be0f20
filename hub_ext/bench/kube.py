"""The cluster side of the cluster benchmark: kwok nodes, namespaces, PriorityClasses, counting Running pods.

Everything made here carries the label ``tenancy-bench=<run id>`` and is removed again by ``Cluster.clean``.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUN_LABEL = "tenancy-bench"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: kube-controller-manager's and kube-scheduler's defaults of --kube-api-qps/--kube-api-burst (v1.37)
COMPONENT_DEFAULTS = {"kube-controller-manager": (20.0, 30), "kube-scheduler": (50.0, 100)}


class BenchError(Exception):
    """The benchmark cannot go on; the message says why (one line)."""


def api_client(kubeconfig: str):
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    cfg.retries = 3
    return client.ApiClient(cfg)


class Cluster:
    """Nodes and namespaces of one benchmark run on the cluster of ``kubeconfig``."""

    def __init__(self, kubeconfig: str, run: str):
        from kubernetes import client

        self.kubeconfig, self.run = kubeconfig, run
        self.api = api_client(kubeconfig)
        self.core, self.batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        self.sched = client.SchedulingV1Api(self.api)
        self.nodes: list[str] = []
        self.namespaces: list[str] = []
        self.classes: list[str] = []

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run}"

    # -- nodes ---------------------------------------------------------------------
    def add_kwok_nodes(self, count: int, cpu: str, memory: str, pods: int = 110, timeout: float = 120.0) -> None:
        """``count`` fake nodes run by kwok (the cluster's kwok must manage nodes annotated
        ``kwok.x-k8s.io/node=fake``), Ready and without the not-ready taint admission adds."""
        resources = {"cpu": cpu, "memory": memory, "pods": str(pods)}
        for i in range(count):
            name = f"bench-{self.run}-{i}"
            self.core.create_node({
                "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                             "labels": {RUN_LABEL: self.run, "type": "kwok", "kubernetes.io/hostname": name}},
                "status": {"allocatable": resources, "capacity": resources}})
            self.nodes.append(name)
        deadline = time.monotonic() + timeout
        waiting = set(self.nodes)
        while waiting:
            for node in self.core.list_node(label_selector=self.selector).items:
                if node.metadata.name not in waiting:
                    continue
                ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
                taints = node.spec.taints or []
                stale = [t for t in taints if t.key.startswith("node.kubernetes.io/")]
                if ready and stale:
                    keep = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints if t not in stale]
                    self.core.patch_node(node.metadata.name, {"spec": {"taints": keep or None}})
                elif ready:
                    waiting.discard(node.metadata.name)
            if waiting and time.monotonic() > deadline:
                raise BenchError(f"{len(waiting)} kwok node(s) not Ready after {timeout:.0f} s: is kwok running "
                                 f"and managing nodes annotated {KWOK_NODE_ANNOTATION}=fake?")
            if waiting:
                time.sleep(0.5)

    # -- namespaces and classes -----------------------------------------------------
    def add_namespaces(self, names: list[str], timeout: float = 60.0) -> None:
        for name in names:
            self.core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: self.run}}})
            self.namespaces.append(name)
        deadline = time.monotonic() + timeout
        for name in names:  # pods are refused until the namespace's default ServiceAccount exists
            while not self.core.list_namespaced_service_account(name, field_selector="metadata.name=default").items:
                if time.monotonic() > deadline:
                    raise BenchError(f"namespace {name}: no default ServiceAccount after {timeout:.0f} s "
                                     "(is kube-controller-manager running?)")
                time.sleep(0.2)

    def drain(self, names: list[str]) -> None:
        """Empty the namespaces at once: left to the namespace controller, thousands of Job pods go one
        by one (each waits for the Job controller to drop its tracking finalizer), 10 minutes for 5,000.
        Here the Jobs go first (orphaning their pods), then the pods' finalizers, then the pods."""
        from kubernetes.client.exceptions import ApiException

        for name in names:
            _quietly(lambda: self.batch.delete_collection_namespaced_job(name, propagation_policy="Orphan"))

        def unfinalize(pod) -> None:
            try:
                self.core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                                               [{"op": "remove", "path": "/metadata/finalizers"}])
            except ApiException as err:
                if err.status not in (404, 422):  # gone, or no finalizers left
                    raise

        with ThreadPoolExecutor(16) as pool:
            for name in names:
                pods = [p for p in self.core.list_namespaced_pod(name).items if p.metadata.finalizers]
                list(pool.map(unfinalize, pods))
        for name in names:
            _quietly(lambda: self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0))

    def delete_namespaces(self, names: list[str], timeout: float | None = None) -> None:
        """Drain, delete and wait until they are gone."""
        from kubernetes.client.exceptions import ApiException

        self.drain(names)
        for name in names:
            try:
                self.core.delete_namespace(name)
            except ApiException as err:
                if err.status != 404:
                    raise
        if timeout is None:
            pods = sum(len(self.core.list_namespaced_pod(n, limit=5000).items) for n in names)
            timeout = 600.0 + 0.5 * pods
        deadline = time.monotonic() + timeout
        while any(self.core.list_namespace(field_selector=f"metadata.name={n}").items for n in names):
            if time.monotonic() > deadline:
                raise BenchError(f"namespaces {', '.join(names)} not gone after {timeout:.0f} s")
            time.sleep(0.5)
        self.namespaces = [n for n in self.namespaces if n not in names]

    def ensure_priority_classes(self) -> None:
        """The three seed PriorityClasses (the service's start-up checks want them); those made here go at the end."""
        from kubernetes.client.exceptions import ApiException

        from ..quota.priorityclass import SEED_CLASSES

        for pc in SEED_CLASSES:
            try:
                self.sched.create_priority_class({"metadata": {"name": pc.name, "labels": {RUN_LABEL: self.run}},
                                                  "value": pc.value, "description": pc.description,
                                                  "preemptionPolicy": pc.preemption_policy})
                self.classes.append(pc.name)
            except ApiException as err:
                if err.status != 409:
                    raise

    def clean(self) -> None:
        """Remove everything this run made (best effort: a second failure does not hide the first)."""
        try:
            if self.namespaces:
                self.delete_namespaces(list(self.namespaces))
        finally:
            for name in self.nodes:
                _quietly(self.core.delete_node, name)
            for name in self.classes:
                _quietly(self.sched.delete_priority_class, name)
            self.nodes, self.classes = [], []
            self.api.close()


def _quietly(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - cleaning up: already gone is fine
        pass


class RunningCounter:
    """Watches pods with a label selector (all namespaces) and notes when each first runs.

    ``wait(n)`` returns the time (``time.monotonic``) at which the n-th distinct pod was first seen Running."""

    def __init__(self, kubeconfig: str, selector: str):
        self.selector = selector
        self.api = api_client(kubeconfig)
        self.running: dict[str, float] = {}  # pod uid -> when first seen Running
        self.created: set[str] = set()  # (namespace/name of) every pod seen
        self.last_created: float | None = None  # when the last new pod was first seen (the Job controller's pace)
        # "namespace/job name" -> {"pod created", "pod bound", "Running": wall-clock time first seen} (stages.py)
        self.moments: dict[str, dict[str, float]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-pods", daemon=True)
        self._ready = threading.Event()
        self.error: Exception | None = None

    def start(self) -> "RunningCounter":
        self._thread.start()
        if not self._ready.wait(30):
            raise BenchError("the watch of the benchmark's pods did not start within 30 s")
        return self

    def _loop(self) -> None:
        # Plain JSON through the backend's own thin client, not the generated models: the measuring
        # instrument should take as little of the machine as it can (both sides pay for it alike).
        from ..backends.kubernetes.api import POD, Api

        api = Api(self.api)
        while not self._stop.is_set():
            try:
                items, version = api.list_with_version(POD, self.selector)
                for pod in items:
                    self._seen(pod)
                self._ready.set()
                for batch in api.watch(POD, label_selector=self.selector, resource_version=version,
                                       timeout_seconds=60, stop=self._stop.is_set):
                    for kind, pod in batch:
                        if kind in ("ADDED", "MODIFIED"):
                            self._seen(pod)
            except Exception as err:  # noqa: BLE001 - an expired watch: list again
                self.error = err
                time.sleep(0.2)

    def _seen(self, pod: dict) -> None:
        now, wall = time.monotonic(), time.time()
        meta = pod.get("metadata") or {}
        running = (pod.get("status") or {}).get("phase") == "Running"
        with self._cond:
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            if key not in self.created:
                self.created.add(key)
                self.last_created = now
            job = (meta.get("labels") or {}).get("job-name") or meta.get("name")
            moments = self.moments.setdefault(f"{meta.get('namespace')}/{job}", {})
            moments.setdefault("pod created", wall)
            if (pod.get("spec") or {}).get("nodeName"):
                moments.setdefault("pod bound", wall)
            if running:
                moments.setdefault("Running", wall)
            if running and meta.get("uid") not in self.running:
                self.running[meta.get("uid")] = now
                self._cond.notify_all()

    def wait(self, n: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.running) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(f"only {len(self.running)} of {n} pods Running after {timeout:.0f} s")
                self._cond.wait(min(left, 1.0))
            return sorted(self.running.values())[n - 1]

    def seen(self) -> dict[str, dict[str, float]]:
        """A copy of ``moments``."""
        with self._cond:
            return {key: dict(m) for key, m in self.moments.items()}

    def stop(self) -> None:
        self._stop.set()
        self.api.close()


def component_qps(kubeconfig: str) -> dict:
    """``--kube-api-qps``/``--kube-api-burst`` of kube-controller-manager and kube-scheduler, read from
    their command lines: local processes (a control plane on this machine) or kube-system pods
    (kubeadm's static pods). Unknown: ``{"source": "unknown"}``."""
    out: dict = {}
    server = _server_of(kubeconfig)
    for name, args in _local_components():
        theirs = next((a.split("=", 1)[1] for a in args if a.startswith("--kubeconfig=")), None)
        if server and theirs and _server_of(theirs) == server:  # this cluster's, not another's on this machine
            out[name] = {**_qps_of(name, args), "source": "local process"}
    if len(out) < 2:
        try:
            from kubernetes import client

            with api_client(kubeconfig) as api:
                for pod in client.CoreV1Api(api).list_namespaced_pod("kube-system").items:
                    for container in pod.spec.containers:
                        argv = (container.command or []) + (container.args or [])
                        for name in COMPONENT_DEFAULTS:
                            if name not in out and any(name in a for a in argv[:1]):
                                out[name] = {**_qps_of(name, argv), "source": f"pod kube-system/{pod.metadata.name}"}
        except Exception:  # noqa: BLE001 - no right to list kube-system: reported as unknown
            pass
    for name in COMPONENT_DEFAULTS:
        out.setdefault(name, {"source": "unknown"})
    return out


def _server_of(kubeconfig: str) -> str | None:
    try:
        import yaml

        with open(kubeconfig, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        current = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg.get("current-context"))
        return next(c["cluster"]["server"] for c in cfg["clusters"] if c["name"] == current["cluster"])
    except Exception:  # noqa: BLE001 - unreadable: unknown
        return None


def _local_components():
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        exe = os.path.basename(argv[0].decode(errors="replace")) if argv and argv[0] else ""
        if exe in COMPONENT_DEFAULTS:
            yield exe, [a.decode(errors="replace") for a in argv if a]


def _qps_of(name: str, argv: list[str]) -> dict:
    qps, burst = COMPONENT_DEFAULTS[name]
    for arg in argv:
        if arg.startswith("--kube-api-qps="):
            qps = float(arg.split("=", 1)[1])
        elif arg.startswith("--kube-api-burst="):
            burst = int(arg.split("=", 1)[1])
    return {"qps": qps, "burst": burst}
