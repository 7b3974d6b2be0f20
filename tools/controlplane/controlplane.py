"""A real, local Kubernetes control plane for tests.

Runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (a fake
kubelet: bound pods become Running, deleted pods go away) as child processes on
127.0.0.1, with certificates made by the ``openssl`` CLI. The binaries come from
``tools/controlplane/build.sh``.

kwok's pod stages come from ``kwok-stages.yaml``: a Running pod ends only when it is
annotated with ``EXIT_CODE_ANNOTATION`` ("0": Succeeded, else Failed with that exit
code). Container logs are served through the API server (``pods/log``) from files named
with ``ControlPlane.set_pod_logs`` and written with ``append_log`` (CRI log format).

    from controlplane import ControlPlane

    with ControlPlane("/tmp/cp") as cp:
        cp.add_node("node-1", {"cpu": "4", "memory": "16Gi"})
        api = cp.api_client()          # kubernetes.client.ApiClient (admin)
        ...

Only the standard library is needed to start and stop it; the helpers that talk to the
API (``api_client``, ``add_node``, ``create_namespace``) import the ``kubernetes`` client, and
``cpu_usage`` the project's CPU meter (``hub_ext.bench.cpu``).

Binary lookup (first match wins): ``ControlPlane(bin_dir=...)``, ``$TENANCY_K8S_BIN_DIR``,
``$TENANCY_K8S_CACHE/bin``, ``~/.cache/jupyterhub-tenancy/k8s-<version>/bin`` where
<version> is the k8s.io/kubernetes version in ``go/kube/go.mod`` (what build.sh uses).
"""

from __future__ import annotations

import atexit
import ctypes
import datetime
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

#: annotation kwok uses to pick the nodes it manages (see ``--manage-nodes-with-annotation-selector``)
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Pod IPs handed out by kwok. Loopback on purpose: nothing routes to fake pods, and a
#: test may bind a local server on a pod IP (Linux routes all of 127.0.0.0/8 to lo).
POD_CIDR = "127.20.0.1/16"  # kwok hands out IPs from the given address on: 127.20.0.1, .2, ...
SERVICE_CIDR = "10.96.0.0/16"
#: kwok's pod stages (``kwok --config``): ready, delete and the two exit stages below.
KWOK_STAGES = HERE / "kwok-stages.yaml"
#: Annotate a Running pod with this to end it: "0" makes it Succeed (containers
#: terminated with exitCode 0, reason Completed); any other integer makes it Fail with
#: that exitCode (reason Error; a non-integer value gives 1). Without it a pod keeps
#: running, Job pods included. No restarts are simulated, whatever the restartPolicy.
EXIT_CODE_ANNOTATION = "kwok.tenancy.test/exit-code"
#: kube-controller-manager's controllers: all but node IPAM (kwok hands out pod IPs) and node
#: lifecycle (no evictions or not-ready taints when a fake node's heartbeat is late on a loaded
#: machine); cloud controllers do not run without a cloud provider
CONTROLLERS = "*,-node-ipam-controller,-node-lifecycle-controller"
#: What tests/k8s/conftest.py passes to ControlPlane (and ``idle_cpu.py --tests``): arguments that
#: cut the CPU the control plane burns through the tier (issue 19: CI is CPU-bound on two cores)
#: without changing what the tests use. Not the defaults: the cluster benchmark
#: (tools/bench/cluster_bench.py) measures this control plane, and its figures are compared
#: across runs. Figures: tools/controlplane/README.md, "CPU in the tests".
TEST_ARGS: dict = {
    # Only the controllers that the project and its tests use: Jobs, garbage collection (a Job's
    # pods, deleted with propagationPolicy Background; a deleted node's Lease), namespace deletion,
    # each namespace's default ServiceAccount, ResourceQuota status, the Helm chart's Deployment
    # (Deployment, ReplicaSet) and its PodDisruptionBudget's status (disruption), claims bound to
    # static PersistentVolumes and their protection finalizers lifted on delete, and pod GC (the
    # pods of a node a test deleted, which nothing else removes). The rest (endpoints and slices,
    # attach/detach, StatefulSet, DaemonSet, CronJob, HPA, CSRs, TTLs, taint eviction, ...) watch
    # and handle pod and node events for nothing: the KCM idles at half the CPU without them.
    "controllers": ",".join((
        "job-controller", "garbage-collector-controller", "namespace-controller",
        "serviceaccount-controller", "resourcequota-controller", "deployment-controller",
        "replicaset-controller", "disruption-controller", "persistentvolume-binder-controller",
        "persistentvolume-protection-controller", "persistentvolumeclaim-protection-controller",
        "pod-garbage-collector-controller")),
    "extra_apiserver_args": [
        # no request classification and queueing per request (max-in-flight limits instead): no
        # test sends enough at once to be queued, and none asserts on a 429
        "--enable-priority-and-fairness=false",
        # metrics only (object counts and the database's size, polled from etcd)
        "--etcd-db-metric-poll-interval=0",
        "--etcd-count-metric-poll-period=0",
    ],
    # a fake node's Lease renewed every 150 s instead of 10 s: with node lifecycle off nothing
    # reads it, and kwok holds it (and so manages the node) as soon as the node is created
    "extra_kwok_args": ["--node-lease-duration-seconds=600"],
    # every component's Go garbage collector lets the heap grow 5x instead of 2x between
    # collections: fewer of them under the tier's load (the API server ~13% less CPU on the
    # cluster benchmark's test), for memory (RSS at the tier's end 1,339 MiB instead of 825);
    # drop it where memory is short
    "env": {"GOGC": "400"},
}
#: kwok resources watched as CRDs (``--enable-crds``), so logs can be set while it runs
KWOK_CRD_KINDS = ("Logs", "ClusterLogs")
KWOK_API_GROUP = "kwok.x-k8s.io"
KWOK_API_VERSION = "v1alpha1"


SHM_PREFIX = "tenancy-etcd-"


def _remove_stale_shm_dirs() -> None:
    """Remove etcd data dirs in /dev/shm (~120 MB each: etcd preallocates its WAL) left
    by a process that was killed before stop(); their name holds the owner's pid."""
    for d in Path("/dev/shm").glob(SHM_PREFIX + "*"):
        try:
            pid = int(d.name[len(SHM_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


class ControlPlaneError(RuntimeError):
    pass


def _kwok_logs_crd(kind: str) -> dict:
    """The CustomResourceDefinition of kwok's ``Logs`` (namespaced: one pod, by name) or
    ``ClusterLogs`` (selector by namespaces and names), the schema of kwok v0.7.0's
    kustomize/crd/bases without descriptions."""
    strings = {"type": "array", "items": {"type": "string"}}
    spec = {
        "type": "object",
        "required": ["logs"],
        "properties": {"logs": {"type": "array", "items": {"type": "object", "properties": {
            "containers": strings,
            "follow": {"type": "boolean"},
            "logsFile": {"type": "string"},
            "previousLogsFile": {"type": "string"},
        }}}},
    }
    if kind == "ClusterLogs":
        spec["properties"]["selector"] = {"type": "object", "properties": {
            "matchNames": strings, "matchNamespaces": strings}}
    plural = kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{KWOK_API_GROUP}"},
        "spec": {
            "group": KWOK_API_GROUP,
            "names": {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": plural},
            "scope": "Cluster" if kind.startswith("Cluster") else "Namespaced",
            "versions": [{
                "name": KWOK_API_VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"}, "spec": spec,
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }}},
            }],
        },
    }


def append_log(path, text: str = "", stream: str = "stdout") -> Path:
    """Append ``text`` to a container log file in the CRI format that kwok (like a
    kubelet) reads: one ``<RFC3339 time> <stream> F <line>`` record per line of text.
    Creates the file (and its directory); ``append_log(path)`` just creates it.
    ``stream`` is "stdout" or "stderr"."""
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"stream must be stdout or stderr, not {stream!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    records = "".join(f"{now} {stream} F {line}\n" for line in text.splitlines())
    with open(path, "a", encoding="utf-8") as f:
        f.write(records)
    return path


def kubernetes_version() -> str:
    """The k8s.io/kubernetes version pinned in go/kube/go.mod, e.g. ``v1.37.2``."""
    for line in (HERE / "go" / "kube" / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["require"]:
            parts = parts[1:]
        if len(parts) >= 2 and parts[0] == "k8s.io/kubernetes":
            return parts[1]
    raise ControlPlaneError("k8s.io/kubernetes not found in go/kube/go.mod")


def default_bin_dir() -> Path:
    if os.environ.get("TENANCY_K8S_BIN_DIR"):
        return Path(os.environ["TENANCY_K8S_BIN_DIR"])
    if os.environ.get("TENANCY_K8S_CACHE"):
        return Path(os.environ["TENANCY_K8S_CACHE"]) / "bin"
    return Path.home() / ".cache" / "jupyterhub-tenancy" / f"k8s-{kubernetes_version()}" / "bin"


def missing_binaries(bin_dir: Path | None = None) -> list[str]:
    bin_dir = Path(bin_dir or default_bin_dir())
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():  # preexec_fn: SIGKILL the child if the forking thread dies
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Component:
    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own process group: killpg reaches any children
            preexec_fn=_die_with_parent,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            # the leader exited; make sure nothing else is left in its group
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._log.close()

    def cpu_seconds(self) -> float | None:
        """User + system CPU of the process (all its threads) so far, or None once it is gone:
        read from /proc so that it can be taken while it runs, before stop() reaps it, by the
        cluster benchmark's meter (the project's package, as ``api_client`` needs the kubernetes client)."""
        from hub_ext.bench.cpu import process_cpu_seconds

        return process_cpu_seconds(self.proc.pid)

    def rss_mib(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok.

    ``workdir`` receives ``pki/``, ``*.kubeconfig`` and ``logs/<component>.log``.
    etcd's data dir goes to /dev/shm when it is writable (and etcd runs with
    --unsafe-no-fsync either way); it is removed by ``stop()``.
    """

    def __init__(
        self,
        workdir,
        bin_dir=None,
        *,
        start_timeout: float = 120.0,
        openssl: str = "openssl",
        extra_apiserver_args: list[str] | None = None,
        extra_controller_manager_args: list[str] | None = None,
        extra_scheduler_args: list[str] | None = None,
        extra_etcd_args: list[str] | None = None,
        extra_kwok_args: list[str] | None = None,
        controllers: str = CONTROLLERS,
        env: dict[str, str] | None = None,
    ):
        self.workdir = Path(workdir).resolve()
        self.bin_dir = Path(bin_dir) if bin_dir else default_bin_dir()
        self.start_timeout = start_timeout
        self.openssl = openssl
        self.extra_apiserver_args = list(extra_apiserver_args or [])
        # e.g. ["--kube-api-qps=500", "--kube-api-burst=1000"]: the defaults (20/30 for the
        # controller-manager) hold the Job controller to about 8 pods/s
        self.extra_controller_manager_args = list(extra_controller_manager_args or [])
        self.extra_scheduler_args = list(extra_scheduler_args or [])
        self.extra_etcd_args = list(extra_etcd_args or [])
        self.extra_kwok_args = list(extra_kwok_args or [])
        # its own argument, not an extra one: a second --controllers would add to the first
        self.controllers = controllers
        self.extra_env = dict(env or {})  # e.g. {"GOGC": "400"}: for every component
        self.pki = self.workdir / "pki"
        self.logs = self.workdir / "logs"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.apiserver_port: int | None = None
        self.server: str | None = None
        self.etcd_url: str | None = None
        self.etcd_data_dir: Path | None = None
        self.kwok_port: int | None = None  # kwok's kubelet-like HTTPS server (the nodes' kubelet port)
        self._components: dict[str, _Component] = {}
        self._started = False
        self._atexit_registered = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "ControlPlane":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "ControlPlane":
        if self._started:
            return self
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(
                f"missing binaries in {self.bin_dir}: {', '.join(missing)}; "
                "run tools/controlplane/build.sh (or set TENANCY_K8S_BIN_DIR)"
            )
        if shutil.which(self.openssl) is None:
            raise ControlPlaneError(f"'{self.openssl}' not found: the openssl CLI is needed for certificates")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        (self.workdir / "home").mkdir(exist_ok=True)
        self._started = True
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        deadline = time.monotonic() + self.start_timeout
        try:
            self._make_pki()
            self._start_etcd(deadline)
            self._start_apiserver(deadline)
            self._start_controllers(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop everything: apiserver, then scheduler/KCM/kwok, then etcd. Idempotent."""
        for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "etcd"):
            comp = self._components.pop(name, None)
            if comp is not None:
                comp.stop(timeout=15.0 if name == "kube-apiserver" else 10.0)
        for comp in list(self._components.values()):  # anything unexpected
            comp.stop()
        self._components.clear()
        if self.etcd_data_dir is not None and str(self.etcd_data_dir).startswith("/dev/shm/"):
            shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
        self.etcd_data_dir = None
        self._started = False

    @property
    def running(self) -> bool:
        return bool(self._components) and all(c.alive() for c in self._components.values())

    def pids(self) -> dict[str, int]:
        return {n: c.pid for n, c in self._components.items()}

    def memory_usage(self) -> dict[str, float]:
        """RSS in MiB of each component."""
        return {n: c.rss_mib() for n, c in self._components.items()}

    def cpu_usage(self) -> dict[str, float]:
        """CPU seconds (user + system) each running component has used since it started."""
        return {n: cpu for n, c in self._components.items() if (cpu := c.cpu_seconds()) is not None}

    def log_path(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    # ------------------------------------------------------------------ processes
    def _env(self) -> dict:
        env = dict(os.environ)
        env["HOME"] = str(self.workdir / "home")  # kwok reads ~/.kwok/kwok.yaml
        for k in ("KUBECONFIG", "KWOK_WORKDIR"):
            env.pop(k, None)
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, args: list[str]) -> _Component:
        argv = [str(self.bin_dir / name), *args]
        log_path = self.log_path(name)
        with open(log_path, "ab") as f:
            f.write(("\n=== " + time.strftime("%Y-%m-%dT%H:%M:%S") + " " + " ".join(argv) + "\n").encode())
        comp = _Component(name, argv, log_path, self._env())
        self._components[name] = comp
        return comp

    def _wait(self, comp: _Component, check, deadline: float, what: str) -> None:
        last_err = None
        while True:
            if not comp.alive():
                raise ControlPlaneError(
                    f"{comp.name} exited with {comp.proc.returncode} while waiting for {what}; "
                    f"log {comp.log_path}:\n{comp.log_tail()}"
                )
            try:
                if check():
                    return
            except Exception as e:  # noqa: BLE001 - any failure means "not yet"
                last_err = e
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"timed out waiting for {what} (last error: {last_err!r}); "
                    f"log {comp.log_path}:\n{comp.log_tail()}"
                )
            time.sleep(0.25)

    @staticmethod
    def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(url, timeout=5) as r:
                r.read()
                return r.status == 200
        except urllib.error.HTTPError as e:  # not ready yet (e.g. 500 from /readyz, 404)
            e.close()
            return False

    def _admin_ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    @staticmethod
    def _insecure_context() -> ssl.SSLContext:
        # the scheduler's and KCM's /healthz use self-signed serving certs
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _start_etcd(self, deadline: float) -> None:
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            _remove_stale_shm_dirs()
            self.etcd_data_dir = Path(tempfile.mkdtemp(prefix=f"{SHM_PREFIX}{os.getpid()}-", dir="/dev/shm"))
        else:
            self.etcd_data_dir = self.workdir / "etcd-data"
            self.etcd_data_dir.mkdir(exist_ok=True)
        for attempt in range(3):
            client, peer = free_port(), free_port()
            comp = self._spawn("etcd", [
                "--name=default",
                f"--data-dir={self.etcd_data_dir}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
                *self.extra_etcd_args,
            ])
            try:
                self._wait(comp, lambda: self._http_ok(f"http://127.0.0.1:{client}/health"), deadline, "etcd /health")
                self.etcd_url = f"http://127.0.0.1:{client}"
                return
            except ControlPlaneError:
                if comp.alive() or attempt == 2 or "address already in use" not in comp.log_tail(200):
                    raise
                self._components.pop("etcd").stop()
                shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
                self.etcd_data_dir.mkdir()

    def _start_apiserver(self, deadline: float) -> None:
        p = self.pki
        for attempt in range(3):
            port = free_port()
            comp = self._spawn("kube-apiserver", [
                "--advertise-address=127.0.0.1",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--etcd-servers={self.etcd_url}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--service-account-issuer=https://127.0.0.1:{port}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                f"--requestheader-client-ca-file={p / 'front-proxy-ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={p / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={p / 'front-proxy-client.key'}",
                "--allow-privileged=true",
                # reach kwok's kubelet-like server (pods/log) as a kubelet: HTTPS on the
                # node's InternalIP and daemonEndpoints port, its cert checked
                f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={p / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP",
                "--endpoint-reconciler-type=none",
                "--enable-admission-plugins=NodeRestriction",
                "--profiling=false",
                # close open watches (KCM, scheduler, kwok, tests) on SIGTERM instead of
                # waiting for them up to the 60 s request timeout
                "--shutdown-watch-termination-grace-period=2s",
                *self.extra_apiserver_args,
            ])
            self.apiserver_port = port
            self.server = f"https://127.0.0.1:{port}"
            try:
                ctx = self._admin_ssl_context()
                self._wait(comp, lambda: self._http_ok(f"{self.server}/readyz", ctx), deadline, "kube-apiserver /readyz")
                break
            except ControlPlaneError:
                if comp.alive() or attempt == 2 or "address already in use" not in comp.log_tail(200):
                    raise
                self._components.pop("kube-apiserver").stop()
        for user, cert in (("admin", "admin"), ("kcm", "kube-controller-manager"),
                           ("scheduler", "kube-scheduler"), ("kwok", "kwok")):
            path = self.kubeconfig if user == "admin" else self.workdir / f"{user}.kubeconfig"
            self._write_kubeconfig(path, user, p / f"{cert}.crt", p / f"{cert}.key")

    def _start_controllers(self, deadline: float) -> None:
        p = self.pki
        kcm_port, sched_port, kwok_port = free_port(), free_port(), free_port()
        kcm_kc = self.workdir / "kcm.kubeconfig"
        kcm = self._spawn("kube-controller-manager", [
            f"--kubeconfig={kcm_kc}",
            f"--authentication-kubeconfig={kcm_kc}",
            f"--authorization-kubeconfig={kcm_kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={kcm_port}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--cluster-signing-cert-file={p / 'ca.crt'}",
            f"--cluster-signing-key-file={p / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--controllers={self.controllers}",
            "--concurrent-gc-syncs=5",
            "--profiling=false",
            *self.extra_controller_manager_args,
        ])
        sched_kc = self.workdir / "scheduler.kubeconfig"
        sched = self._spawn("kube-scheduler", [
            f"--kubeconfig={sched_kc}",
            f"--authentication-kubeconfig={sched_kc}",
            f"--authorization-kubeconfig={sched_kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={sched_port}",
            "--leader-elect=false",
            "--profiling=false",
            *self.extra_scheduler_args,
        ])
        # kwok watches Logs/ClusterLogs (--enable-crds): their CRDs must be served first
        self._install_kwok_crds(sched, deadline)
        self.kwok_port = kwok_port
        kwok = self._spawn("kwok", [
            f"--kubeconfig={self.workdir / 'kwok.kubeconfig'}",
            f"--config={KWOK_STAGES}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--cidr={POD_CIDR}",
            "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",
            # one HTTPS server (TLS and plain HTTP share the port): its port is every
            # node's kubelet port (daemonEndpoints), so the API server reaches it
            f"--server-address=127.0.0.1:{kwok_port}",
            f"--node-port={kwok_port}",
            f"--tls-cert-file={p / 'kwok-serving.crt'}",
            f"--tls-private-key-file={p / 'kwok-serving.key'}",
            f"--enable-crds={','.join(KWOK_CRD_KINDS)}",
            *self.extra_kwok_args,
        ])
        insecure = self._insecure_context()
        self._wait(kcm, lambda: self._http_ok(f"https://127.0.0.1:{kcm_port}/healthz", insecure),
                   deadline, "kube-controller-manager /healthz")
        self._wait(sched, lambda: self._http_ok(f"https://127.0.0.1:{sched_port}/healthz", insecure),
                   deadline, "kube-scheduler /healthz")
        kwok_ctx = ssl.create_default_context(cafile=str(p / "ca.crt"))
        self._wait(kwok, lambda: self._http_ok(f"https://127.0.0.1:{kwok_port}/healthz", kwok_ctx),
                   deadline, "kwok /healthz")
        # the service account controller works: pods can be created in "default"
        ctx = self._admin_ssl_context()
        self._wait(kcm, lambda: self._http_ok(
            f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", ctx),
            deadline, "the default ServiceAccount (kube-controller-manager)")

    def _request(self, method: str, path: str, body=None, context: ssl.SSLContext | None = None):
        """An admin request to the API server (standard library only); returns
        (status, decoded JSON or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.server}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=context or self._admin_ssl_context()))
        try:
            with opener.open(req, timeout=10) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
            e.close()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def _install_kwok_crds(self, comp: _Component, deadline: float) -> None:
        ctx = self._admin_ssl_context()
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for kind in KWOK_CRD_KINDS:
            status, body = self._request("POST", base, _kwok_logs_crd(kind), ctx)
            if status not in (201, 409):
                raise ControlPlaneError(f"creating the CRD of kwok's {kind} failed ({status}): {body}")

        def established():
            for kind in KWOK_CRD_KINDS:
                status, body = self._request("GET", f"{base}/{kind.lower()}.{KWOK_API_GROUP}", context=ctx)
                conds = {c["type"]: c["status"] for c in (body.get("status", {}).get("conditions") or [])} \
                    if status == 200 else {}
                if conds.get("Established") != "True":
                    return False
            # and discovery serves the group (kwok's client lists through it)
            return self._request("GET", f"/apis/{KWOK_API_GROUP}/{KWOK_API_VERSION}", context=ctx)[0] == 200

        self._wait(comp, established, deadline, "kwok's Logs and ClusterLogs CRDs Established")

    # ------------------------------------------------------------------ certificates
    def _ssl(self, *args) -> None:
        r = subprocess.run([self.openssl, *map(str, args)], capture_output=True, text=True)
        if r.returncode != 0:
            raise ControlPlaneError(f"openssl {' '.join(map(str, args))} failed:\n{r.stderr}")

    def _make_pki(self) -> None:
        p = self.pki
        p.mkdir(parents=True, exist_ok=True)
        # "ca" signs serving and client certs; "front-proxy-ca" only the aggregator's
        # proxy client cert (request-header authentication), as kubeadm does
        for ca, cn in (("ca", "tenancy-test-ca"), ("front-proxy-ca", "tenancy-test-front-proxy-ca")):
            if (p / f"{ca}.crt").exists():
                continue
            (p / f"{ca}.cnf").write_text(
                "[req]\ndistinguished_name=dn\nprompt=no\nx509_extensions=v3\n"
                f"[dn]\nCN={cn}\n"
                "[v3]\nbasicConstraints=critical,CA:TRUE\n"
                "keyUsage=critical,keyCertSign,cRLSign,digitalSignature\n"
                "subjectKeyIdentifier=hash\n"
            )
            self._ssl("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
                      "ec_paramgen_curve:prime256v1", "-keyout", p / f"{ca}.key", "-out",
                      p / f"{ca}.crt", "-days", "3650", "-config", p / f"{ca}.cnf")
        if not (p / "sa.key").exists():
            self._ssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                      "-out", p / "sa.key")
            self._ssl("pkey", "-in", p / "sa.key", "-pubout", "-out", p / "sa.pub")
        self._leaf("apiserver", "/CN=kube-apiserver", server=True,
                   sans=["IP:127.0.0.1", "DNS:localhost", "DNS:kubernetes",
                         "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
                         "DNS:kubernetes.default.svc.cluster.local", "IP:10.96.0.1"])
        self._leaf("admin", "/O=system:masters/CN=admin")
        self._leaf("kube-controller-manager", "/CN=system:kube-controller-manager")
        self._leaf("kube-scheduler", "/CN=system:kube-scheduler")
        self._leaf("kwok", "/O=system:masters/CN=kwok")
        # kwok's kubelet-like server, and the API server's client cert towards it
        self._leaf("kwok-serving", "/CN=kwok-serving", server=True, sans=["IP:127.0.0.1", "DNS:localhost"])
        self._leaf("apiserver-kubelet-client", "/CN=kube-apiserver-kubelet-client")
        self._leaf("front-proxy-client", "/CN=front-proxy-client", ca="front-proxy-ca")

    def _leaf(self, name: str, subject: str, server: bool = False, sans=(), ca: str = "ca") -> None:
        p = self.pki
        if (p / f"{name}.crt").exists():
            return
        cnf = p / f"{name}.cnf"
        ext = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               f"extendedKeyUsage={'serverAuth' if server else 'clientAuth'}"]
        if sans:
            ext.append("subjectAltName=" + ",".join(sans))
        cnf.write_text("[req]\ndistinguished_name=dn\n[dn]\n[v3]\n" + "\n".join(ext) + "\n")
        self._ssl("req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-keyout", p / f"{name}.key", "-out", p / f"{name}.csr", "-subj", subject,
                  "-config", cnf)
        self._ssl("x509", "-req", "-in", p / f"{name}.csr", "-CA", p / f"{ca}.crt", "-CAkey", p / f"{ca}.key",
                  "-set_serial", "0x" + secrets.token_hex(16), "-days", "3650", "-sha256",
                  "-extfile", cnf, "-extensions", "v3", "-out", p / f"{name}.crt")

    def _write_kubeconfig(self, path: Path, user: str, cert: Path, key: Path) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "tenancy-test", "cluster": {
                "server": self.server, "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": user, "context": {"cluster": "tenancy-test", "user": user}}],
            "current-context": user,
        }
        path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML

    def user_kubeconfig(self, user: str, groups=()) -> Path:
        """A kubeconfig that authenticates as ``user`` in ``groups`` with a client
        certificate (CN=user, O=group for each group) signed by the cluster CA."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        name = f"user-{safe}-{secrets.token_hex(4)}"
        subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
        self._leaf(name, subject)
        path = self.workdir / f"{name}.kubeconfig"
        self._write_kubeconfig(path, user, self.pki / f"{name}.crt", self.pki / f"{name}.key")
        return path

    # ------------------------------------------------------------------ API helpers
    def api_client(self, kubeconfig=None):
        """A ``kubernetes.client.ApiClient`` for the admin (or another) kubeconfig."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig or self.kubeconfig), client_configuration=cfg)
        return client.ApiClient(cfg)

    def create_namespace(self, name: str, labels: dict | None = None, timeout: float = 30.0):
        """Create a namespace and wait for its ``default`` ServiceAccount (pods are
        rejected by ServiceAccount admission until the controller made it)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        _poll(lambda: core.read_namespaced_service_account("default", name), timeout,
              f"ServiceAccount {name}/default")
        return ns

    def add_node(self, name: str, allocatable: dict, labels: dict | None = None,
                 taints: list | None = None, timeout: float = 60.0):
        """Create a fake Node managed by kwok with the given allocatable (= capacity)
        resources, e.g. ``{"cpu": "4", "memory": "16Gi"}`` (``pods`` defaults to 110),
        wait until it is Ready and schedulable, and return it."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        resources = {"pods": "110", **{k: str(v) for k, v in allocatable.items()}}
        node = client.V1Node(
            metadata=client.V1ObjectMeta(
                name=name,
                annotations={KWOK_NODE_ANNOTATION: "fake"},
                labels={"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64", "type": "kwok", **(labels or {})},
            ),
            spec=client.V1NodeSpec(taints=taints),
            status=client.V1NodeStatus(allocatable=resources, capacity=resources),
        )
        core.create_node(node)

        def ready():
            n = core.read_node(name)
            conds = {c.type: c.status for c in (n.status.conditions or [])}
            if conds.get("Ready") != "True":
                return None
            # TaintNodesByCondition admission adds node.kubernetes.io/not-ready on create;
            # the node lifecycle controller (off here) would lift it once Ready.
            stale = [t for t in (n.spec.taints or []) if t.key.startswith("node.kubernetes.io/")]
            if stale:
                keep = [t for t in n.spec.taints if t not in stale]
                core.patch_node(name, {"spec": {"taints": [
                    {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
                    for t in keep] or None}})
                return None
            return n

        return _poll(ready, timeout, f"node {name} Ready and untainted")

    # ------------------------------------------------------------------ pod logs
    append_log = staticmethod(append_log)

    def _logs_object_path(self, namespace: str, pod: str | None) -> tuple[str, str]:
        base = f"/apis/{KWOK_API_GROUP}/{KWOK_API_VERSION}"
        if pod is None:
            return "ClusterLogs", f"{base}/clusterlogs/tenancy-logs-{namespace}"
        return "Logs", f"{base}/namespaces/{namespace}/logs/{pod}"

    def set_pod_logs(self, namespace: str, pod: str | None, path, *, container: str | None = None,
                     previous_path=None, timeout: float = 10.0) -> Path:
        """Serve the logs of ``container`` (default: every container without a rule of
        its own) of pod ``pod`` in ``namespace`` from the file ``path``: what
        ``GET /api/v1/namespaces/{namespace}/pods/{pod}/log`` (``kubectl logs``,
        ``CoreV1Api.read_namespaced_pod_log``, with tailLines, limitBytes, sinceTime,
        timestamps, follow) returns. ``pod=None`` means every pod of the namespace,
        including pods created later, except pods that have rules by name: those use
        only their own rules (a container without one gets "log target not found").
        ``previous_path``: what ``previous=true`` returns.

        The file is in the CRI log format: write it with ``append_log(path, text)``. It
        is created empty if missing, and may grow at any time (reads see the current
        contents; ``follow`` streams new lines). Pod names are exact (kwok's selectors
        have no prefix match): for a Job's pod, find its name first, or use ``pod=None``.

        Implemented with kwok's ``Logs`` (one pod, in its namespace; removed with the
        namespace) or a ``ClusterLogs`` named ``tenancy-logs-<namespace>`` (see
        ``clear_pod_logs``), which kwok watches; returns once kwok serves the rule."""
        if not (self._started and self.kwok_port):
            raise ControlPlaneError("the control plane is not running")
        path = Path(path).resolve()
        append_log(path)  # create it empty
        entry = {"logsFile": str(path)}
        if container:
            entry["containers"] = [container]
        if previous_path is not None:
            previous_path = Path(previous_path).resolve()
            append_log(previous_path)
            entry["previousLogsFile"] = str(previous_path)
        kind, obj_path = self._logs_object_path(namespace, pod)
        name = obj_path.rsplit("/", 1)[1]
        updated = False
        for _ in range(10):  # optimistic concurrency: retry on conflicts
            status, obj = self._request("GET", obj_path)
            if status == 404:
                spec = {"logs": [entry]}
                if pod is None:
                    spec["selector"] = {"matchNamespaces": [namespace]}
                meta = {"name": name} if pod is None else {"name": name, "namespace": namespace}
                body = {"apiVersion": f"{KWOK_API_GROUP}/{KWOK_API_VERSION}", "kind": kind,
                        "metadata": meta, "spec": spec}
                status, obj = self._request("POST", obj_path.rsplit("/", 1)[0], body)
            elif status == 200:
                keep = [e for e in obj["spec"].get("logs") or []
                        if (e.get("containers") or []) != ([container] if container else [])]
                obj["spec"]["logs"] = keep + [entry]
                status, obj = self._request("PUT", obj_path, obj)
                updated = True
            else:
                raise ControlPlaneError(f"reading {obj_path} failed ({status}): {obj}")
            if status in (200, 201):
                break
            if status != 409:
                raise ControlPlaneError(f"writing {kind} {name} failed ({status}): {obj}")
        else:
            raise ControlPlaneError(f"writing {kind} {name}: too many conflicts")

        # ask kwok's server directly (it does not check that the pod exists) until its
        # watch has the rule: a new rule answers 200 instead of "no logs found"
        probe = "/".join(urllib.parse.quote(x, safe="") for x in
                         (namespace, pod or "tenancy-logs-probe", container or "tenancy-logs-probe"))
        url = f"https://127.0.0.1:{self.kwok_port}/containerLogs/{probe}?tailLines=0"
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        _poll(lambda: self._http_ok(url, ctx), timeout, f"kwok serving the logs of {namespace}/{pod or '*'}",
              interval=0.02)
        if updated:
            # an updated rule answered 200 before too; kwok's watch sees the change in
            # well under this
            time.sleep(0.2)
        return path

    def clear_pod_logs(self, namespace: str, pod: str | None = None) -> None:
        """Remove the rules that ``set_pod_logs(namespace, pod, ...)`` made (all of that
        pod's containers, or with ``pod=None`` the namespace-wide rule)."""
        _, obj_path = self._logs_object_path(namespace, pod)
        status, body = self._request("DELETE", obj_path)
        if status not in (200, 202, 404):
            raise ControlPlaneError(f"deleting {obj_path} failed ({status}): {body}")


def _poll(fn, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            r = fn()
            if r:
                return r
        except Exception as e:  # noqa: BLE001
            last = e
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out waiting for {what} (last error: {last!r})")
        time.sleep(interval)


def main(argv=None) -> int:
    """``python tools/controlplane/controlplane.py [WORKDIR]``: run a control plane with
    one fake node until Ctrl-C, for poking at it with kubectl or the Python client."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("workdir", nargs="?", default=None)
    ap.add_argument("--node-cpu", default="4")
    ap.add_argument("--node-memory", default="16Gi")
    args = ap.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="tenancy-controlplane-")
    with ControlPlane(workdir) as cp:
        try:
            cp.add_node("kwok-node-0", {"cpu": args.node_cpu, "memory": args.node_memory})
        except ImportError:
            print("(the kubernetes client is not installed: no fake node added)")
        print(f"export KUBECONFIG={cp.kubeconfig}\nlogs: {cp.logs}\nCtrl-C to stop", flush=True)
        try:
            signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
            while cp.running:
                time.sleep(1)
            print("a component exited; see the logs", flush=True)
            return 1
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
