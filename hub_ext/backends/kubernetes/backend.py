"""The Kubernetes backend: the engine decides, the cluster runs.

Capacity is the cluster's Nodes, followed by a watch: a node that joins adds
its room, one that is cordoned, not Ready or resized changes it at once, one
that is deleted takes its pods with it (they are queued again in their place,
not failed). An admitted training pod becomes a batch/v1 Job of one pod
(parallelism 1, backoffLimit 0) named after the engine's pod, with the
workload's PriorityClass, resources and command; where the server does not
serve Jobs, a bare Pod. Creates go through a bounded pool of concurrent calls,
and every call through a client-side rate limit (``api_qps``/``api_burst``).
The default kube-scheduler places it (no ``nodeName`` is set).

Our pods are followed by one watch (``follow``), not a poller per Job: the
cluster's word decides what a pod is (Running, waiting for kube-scheduler with
its message, ended with its exit code at once, lost with its node, stuck
terminating). Victims are evicted through the Eviction API (``policy/v1``; a
plain delete with the grace period where the server does not serve it) and
reported done once the pod is gone.

Notebook pods are created by the spawner; this backend only evicts them (it
deletes the pod labelled for the workload).

Pods without our workload label count as usage (``watch``); the namespaces'
ResourceQuotas and LimitRanges are copied into the engine; tenants are
provisioned from hub groups when ``provision`` is on. ``checks`` says at start
(and until fixed) what on the cluster would make admissions fail; ``informer``
says whether the API server answers at all. Either stops admissions while it
lasts, with one log line, not one per call.

API calls are made with the synchronous client in worker threads of the
backend's own pool, so the controller's loop never blocks.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor

from traitlets import Bool, Dict, Float, Int, List, TraitError, Unicode
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from ...scheduler.model import LIMIT_RANGE, RESOURCE_QUOTA, Reason
from .. import Backend
from .api import NODE, POD, Api, Kind, KubernetesError, RateLimiter
from .checks import check_priority_classes, check_quota_tree, check_rbac, needed_permissions
from .follow import JOB_NAME_LABEL, JOB_UID_LABEL, Followed, exit_code as _exit_code, judge, key_of
from .informer import ApiMonitor, Informer, outage_error
from .provision import Provisioner
from .quotatree import read_quota_tree
from .watch import apply_limits, holds_room, pod_spec_of, read_limits

JOB = Kind("Job", "batch/v1", "jobs", True)

WORKLOAD_LABEL = "tenancy.jupyter.org/workload"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "jupyterhub-tenancy"
#: the pods this backend made (training pods: of our Jobs, or bare)
OURS = f"{MANAGED_BY_LABEL}={MANAGED_BY},{WORKLOAD_LABEL}"
#: exit code reported for a pod deleted under us (as if killed by SIGKILL)
KILLED = 137
#: how often a failing start-up check is tried again
RECHECK_SECONDS = 5.0


class KubernetesBackend(LoggingConfigurable, Backend):
    image = Unicode(
        "python:3.11-slim",
        help="""
        The container image of training pods. The workload's ``command`` runs in it
        (a ``script`` is passed to ``python -c``).
        """,
    ).tag(config=True)

    poll_seconds = Float(
        0.5,
        help="""
        How often a pod whose end is awaited (an eviction, a stop) is read again when the watch
        cannot say (notebook pods), and the pace of retried creates.
        """,
    ).tag(config=True)

    stop_grace_seconds = Int(
        5, help="Grace period (seconds) when a training pod is deleted because its workload was cancelled.",
    ).tag(config=True)

    gone_timeout_seconds = Float(
        120.0,
        help="""
        How long an eviction waits, beyond the grace period, for the pod to disappear
        before it is deleted with a zero grace period (and then reported done anyway).
        """,
    ).tag(config=True)

    terminating_timeout_seconds = Float(
        60.0,
        help="""
        A training pod deleted under us (not by an eviction or a cancel of ours) that is still
        terminating this long after its grace period ended (its node's kubelet is gone, say) is
        reported stuck, deleted with a zero grace period, and its work is queued again: it no
        longer holds its workload Running.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    node_label_selector = Unicode(
        "",
        help="""
        A label selector (``key=value,...``) for the Nodes whose capacity workloads are
        admitted against. Empty: every Node of the cluster.
        """,
    ).tag(config=True)

    node_selector = Dict(
        help="``spec.nodeSelector`` of training pods (keep it in line with ``node_label_selector``).",
    ).tag(config=True)

    tolerations = List(
        Dict(), help="``spec.tolerations`` of training pods (plain dicts, as in a manifest).",
    ).tag(config=True)

    extra_labels = Dict(
        help="Extra labels put on training pods.",
    ).tag(config=True)

    kubeconfig = Unicode(
        "",
        help="""
        A kubeconfig file with the service's cluster credentials. Empty: the in-cluster
        ServiceAccount when running in a pod, else ``$KUBECONFIG`` or ``~/.kube/config``.
        """,
    ).tag(config=True)

    kube_context = Unicode("", help="The kubeconfig context to use (empty: its current context).").tag(config=True)

    request_timeout = Float(30.0, help="Timeout in seconds of each API request (0: none).").tag(config=True)

    api_qps = Float(
        50.0,
        help="""
        Requests per second this service sends the API server at most, on average (client-go's
        ``QPS``; watches count once when they start). 0: no limit. Raise it with
        ``api_burst`` for large queues; the kube-controller-manager's own ``--kube-api-qps``
        limits how fast the Job controller makes their pods (see the README).

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    api_burst = Int(
        100, help="Requests this service may send at once above ``api_qps`` (client-go's ``Burst``).",
    ).tag(config=True)

    create_concurrency = Int(
        16,
        help="""
        Creates of training Jobs (or Pods) in flight at once: admitted pods are created by this
        many workers, the rest wait their turn (a bounded pool, never one thread per pod).

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    health_check_seconds = Float(
        5.0,
        help="""
        How often the API server is probed with a read that needs etcd; one that does not answer
        within ``health_timeout_seconds`` pauses admissions and shows on ``/api/v1/health``.
        """,
    ).tag(config=True)

    health_timeout_seconds = Float(3.0, help="How long a health probe of the API server may take.").tag(config=True)

    checks_seconds = Float(
        60.0,
        help="""
        How often the start-up checks (RBAC by SelfSubjectAccessReview, PriorityClasses, the
        quota tree) run again once they pass; while one fails, every 5 seconds.
        """,
    ).tag(config=True)

    use_jobs = Bool(
        True,
        help="""
        Run training pods as batch/v1 Jobs (one per pod). Off, or where the server does not
        serve batch/v1 Jobs: bare Pods.
        """,
    ).tag(config=True)

    count_foreign_pods = Bool(
        True,
        help="""
        Count pods that no workload of ours created (no ``tenancy.jupyter.org/workload``
        label) as usage: of their node when it is one of ours, and of their namespace's
        quotas and quota-tree leaf. They are never evicted by us.
        """,
    ).tag(config=True)

    sync_cluster_limits = Bool(
        True,
        help="""
        Copy the cluster's ResourceQuotas and LimitRanges into the scheduler, so that a
        workload the API server would refuse is refused (with the reason) before it is created.
        """,
    ).tag(config=True)

    resync_seconds = Float(
        30.0, help="How often ResourceQuotas and LimitRanges are read again.",
    ).tag(config=True)

    relist_seconds = Float(
        300.0,
        help="""
        Pods and Nodes are watched; each watch is started again from a fresh list this often
        (or when the server ends it), in case an event was missed.
        """,
    ).tag(config=True)

    quota_tree_object = Unicode(
        "kube-system/",
        help="""
        ``namespace/name`` of the cluster's ``ElasticQuotaTree`` (``namespace/`` for the only
        one there), used when the service has no tree of its own (``TenancyService.tree_file``
        or ``tree``, or one saved by an admin). Empty: never read the tree from the cluster.
        With a name, the start-up checks require the CRD and the object.
        """,
    ).tag(config=True)

    provision = Bool(
        False,
        help="""
        Provision tenants on the cluster from hub groups (Namespace, Role and RoleBinding,
        ResourceQuota, LimitRange, PriorityClasses; configure with ``c.Provisioner.*``): at
        start, when groups change, and every ``provision_interval_seconds`` (drift repair).
        """,
    ).tag(config=True)

    provision_interval_seconds = Float(
        300.0, help="How often tenants are provisioned again to repair drift (with ``provision`` on).",
    ).tag(config=True)

    create_retry_seconds = Float(
        30.0,
        help="""
        How long creating a training pod's Job (or Pod) is retried when the API server does
        not answer, throttles (429), fails (5xx) or still counts a victim in a ResourceQuota,
        before the training pod fails with the API server's words.
        """,
    ).tag(config=True)

    create_failure_seconds = Float(
        5.0,
        help="""
        How long a Job may have no pod before its events are read for why: when the Job
        controller could not create the pod (a ResourceQuota or LimitRange the API server
        enforces, an invalid spec), the training pod fails with the API server's words.
        """,
    ).tag(config=True)

    def __init__(self, api_client=None, hub=None, **kwargs):
        super().__init__(**kwargs)
        self.hub = hub
        self._controller = None
        client = api_client if api_client is not None else self._default_client()
        self.api = Api(client, self.request_timeout, RateLimiter(self.api_qps, self.api_burst))
        self._executor = ThreadPoolExecutor(max_workers=max(4, self.create_concurrency + 4),
                                            thread_name_prefix="tenancy-k8s")
        self._create_slots: asyncio.Semaphore | None = None
        self.monitor = ApiMonitor(self.api, log=self.log, interval=self.health_check_seconds,
                                  timeout=self.health_timeout_seconds)
        self._policy_v1: bool | None = None
        self._jobs: bool | None = None
        # engine uid -> the object (Job or Pod) we made for it: its Kubernetes uid and kind
        self._k8s_uids: dict[int, str] = {}
        self._kinds: dict[int, Kind] = {}
        self._creating: dict[int, asyncio.Event] = {}  # set once start() made (or gave up making) it
        self._evicting: set[int] = set()  # evict() reports these; their followers stay quiet
        self._followed: dict[int, Followed] = {}  # engine uid -> what we follow of it
        self._follows: dict[tuple[str, str], Followed] = {}  # (namespace, object name) -> the same
        self._forgotten: dict[tuple[str, str], str] = {}  # objects of lost pods being deleted: never adopted
        self._our_pods: dict[tuple[str, str], dict] = {}  # (namespace, pod name) -> our pod as last seen
        # the same pods by (namespace, object name) and pod uid: a start finds its object's pods in O(1)
        self._by_object: dict[tuple[str, str], dict[str, dict]] = {}
        self._gone_waiters: dict[tuple[str, str], asyncio.Event] = {}
        self._ours: Informer | None = None
        self._ours_listed: asyncio.Event | None = None
        # Our Jobs as the watch last saw them ((namespace, name) -> the Job; a deleted one as a tombstone
        # {"_deleted": True, "metadata": ...}): why a Job has no pod is read here, not asked of the API
        # server once per Job and check (that GET went to etcd: ~2 per Job, the API server's busiest load).
        self._our_jobs: Informer | None = None
        self._job_objs: dict[tuple[str, str], dict] = {}
        self._jobs_listed = False
        self._node_watch: Informer | None = None
        self._node_objs: dict[str, dict] = {}
        # What was read of each node last: (its facts, its NodeSpec, usable). A kubelet's heartbeat changes
        # none of the facts; with a hundred nodes those events come several a second, each left unparsed.
        self._node_read: dict[str, tuple] = {}
        self._tenants = None  # the tenants last handed to tenants_changed (None: not known yet)
        self._tenant_key = None
        self._tree_unread = False  # the cluster's tree could not be read at start (the API server down)
        self._nodes_error: KubernetesError | None = None
        self._provisioner: Provisioner | None = None
        if self.provision:  # built now: a bad c.Provisioner.* option stops the start, in one line
            try:
                self._provisioner = Provisioner(api_client=self.api.api_client, parent=self)
            except TraitError as err:
                raise ValidationError(f"Provisioner: {' '.join(str(err).split())}") from None
        self._provision_lock = asyncio.Lock()
        self._pod_watch: Informer | None = None
        self._limits_applied: dict = {}
        self.synced = asyncio.Event()  # the first read of foreign pods and of quotas and limits is in
        self._listed = self._limits_read = False
        self.provisioned = None  # the last ProvisionResult
        self.checked = asyncio.Event()  # the start-up checks ran once

    @property
    def controller(self):
        return self._controller

    @controller.setter
    def controller(self, controller) -> None:
        self._controller = controller
        health = getattr(controller, "health", None)
        self.monitor.attach(health)
        if health is not None and self._tree_unread:
            health.set("quota-tree", "the cluster's ElasticQuotaTree is not read yet (the API server did not "
                                     "answer at start); nothing is admitted until it is")
        if health is not None and self._nodes_error is not None and not outage_error(self._nodes_error):
            health.set("nodes", f"cannot read the cluster's Nodes: {self._nodes_error}")

    def _default_client(self):
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            if self.kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_kube_config(config_file=self.kubeconfig or None, context=self.kube_context or None,
                                        client_configuration=configuration)
            else:
                config.load_incluster_config(client_configuration=configuration)
        except (config.ConfigException, OSError, TypeError, ValueError) as err:
            where = self.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise ValidationError(f"KubernetesBackend: no cluster credentials ({where}): {' '.join(str(err).split())}") from None
        configuration.retries = 0  # retried by us, with backoff and one line per outage (not urllib3's per call)
        # room for every create in flight, the watches and the probes
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0,
                                                    self.create_concurrency + 8)
        return client.ApiClient(configuration)

    def quota_tree(self):
        """(tree, manifest) of the cluster's ElasticQuotaTree, or (None, None) when it has none (or it
        cannot be read yet: the API server does not answer; it is read once it does)."""
        if not self.quota_tree_object:
            return None, None
        namespace, _, name = self.quota_tree_object.partition("/")
        try:
            return read_quota_tree(self.api.api_client, namespace=namespace or "kube-system", name=name or None)
        except KubernetesError as err:
            if not outage_error(err):
                raise
            self.monitor.failed(err, "reading the ElasticQuotaTree")
            self._tree_unread = True
            return None, None

    async def wait_ready(self) -> None:
        """Until the API server answers (the service starts while it is down, and waits: /health says
        so), probing with backoff; one line when it goes, one when it comes back."""
        await self.monitor.wait_up()

    # -- what the service tells us ------------------------------------------------------
    def tenants_changed(self, tenants) -> None:
        """Count the pods of new tenant namespaces; provision the tenants when they changed (``provision`` on)."""
        added = {t.namespace for t in tenants} - {t.namespace for t in self._tenants or []}
        self._tenants = list(tenants)
        if added and self._pod_watch is not None:
            # The watch saw their pods but did not count them (not ours then): count them now.
            self.controller._spawn(self._recount(sorted(added)))
        key = tuple(sorted(repr(t.to_dict()) for t in tenants))
        if not self.provision or key == self._tenant_key:
            return
        self._tenant_key = key
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving (a dry run): nothing to do on the cluster
        self.controller._spawn(self.provision_now(tenants))

    async def provision_now(self, tenants=None):
        """Reconcile the tenants (default: the last known) on the cluster now; the ``ProvisionResult``,
        or None while the tenants are not known (the hub not read yet: provisioning ``[]`` would
        delete every tenant's objects)."""
        if self._provisioner is None:
            self._provisioner = Provisioner(api_client=self.api.api_client, parent=self)
        tenants = self._tenants if tenants is None else list(tenants)
        if tenants is None:
            return None
        async with self._provision_lock:
            self.provisioned = await self._provisioner.reconcile_async(tenants)
        return self.provisioned

    async def run(self) -> None:
        """Background work while serving: probe the API server, run the start-up checks, watch nodes
        and foreign pods, copy quotas and limits, provision."""
        loop = asyncio.get_running_loop()
        self.monitor.loop = loop
        health = getattr(self.controller, "health", None)
        if health is not None:  # nothing is admitted before the checks ran once
            health.set("startup-checks", "the start-up checks of the cluster have not run yet", log=False)
        tasks = [asyncio.ensure_future(self.monitor.run()), asyncio.ensure_future(self._run_checks())]
        self._ensure_nodes_watched()
        self._ensure_following()
        if self.count_foreign_pods:
            self._pod_watch = Informer(self.api, POD, f"!{WORKLOAD_LABEL}", loop, self._foreign_event,
                                       timeout_seconds=self.relist_seconds, monitor=self.monitor, log=self.log,
                                       name="other pods").start()
        else:
            self._listed = True
        last_provision = loop.time()
        try:
            while True:
                if self.sync_cluster_limits:
                    try:
                        found = await self._call(read_limits, self.api)
                        self._limits_applied = apply_limits(found, self.controller, self._limits_applied, self.log)
                        self._limits_read = True
                    except KubernetesError as err:
                        if not outage_error(err):
                            self.log.warning("reading ResourceQuotas and LimitRanges: %s", err)
                else:
                    self._limits_read = True
                self._check_synced()
                now = loop.time()
                if self.provision and now - last_provision >= self.provision_interval_seconds:
                    last_provision = now
                    try:
                        await self.provision_now()
                    except Exception:  # noqa: BLE001 - drift repair is retried next time
                        self.log.exception("tenancy provisioning failed")
                await asyncio.sleep(self.resync_seconds if self._limits_read else 1.0)
        finally:
            for task in tasks:
                task.cancel()
            for watch in self._watches():
                watch.stop()

    def _watches(self) -> list[Informer]:
        return [w for w in (self._pod_watch, self._node_watch, self._ours, self._our_jobs) if w is not None]

    def _kick_watches(self) -> None:
        for watch in self._watches():
            watch.kick()

    def close(self) -> None:
        """The service is ending: stop the watches (their threads end at once) and the worker pool."""
        for watch in self._watches():
            watch.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- start-up checks ---------------------------------------------------------------
    async def _run_checks(self) -> None:
        while True:
            ok = await self.check_now()
            if not self.checked.is_set() and self.monitor.up:
                self.checked.set()
                self.controller.health.set("startup-checks", None, log=False)
            await asyncio.sleep(self.checks_seconds if ok else RECHECK_SECONDS)

    async def check_now(self) -> bool:
        """Run the start-up checks once; True when every one passes (each one's problem is on the
        controller's health, as one line)."""
        health = getattr(self.controller, "health", None)
        if health is None:
            return True
        ok = True

        async def one(name: str, fn, *args):
            nonlocal ok
            try:
                problem = await self._call(fn, *args)
            except KubernetesError as err:
                if outage_error(err):
                    ok = False
                    return None  # the API server is down: the monitor says so, the check waits
                problem = f"cannot check: {err}"
            except ValidationError as err:
                problem = str(err)
            health.set(name, problem)
            ok = ok and problem is None
            return problem

        denied = "rbac" in health.problems
        if await one("rbac", check_rbac, self.api, needed_permissions(self)) is None and denied and ok:
            self._kick_watches()  # refused until now: list again at once, not after their backoff
        classes = dict(self.controller.engine.classes.by_name)
        result = await one("priority-classes", lambda: self._priority_problem(classes))
        del result
        await one("quota-tree", self._quota_tree_problem)
        return ok

    def _priority_problem(self, classes) -> str | None:
        problem, warning = check_priority_classes(self.api, classes, self.provision)
        health = self.controller.health
        self.controller_call(health.set, "priority-class-values", warning, blocking=False)
        return problem

    def controller_call(self, fn, *args, **kwargs) -> None:
        """Run ``fn`` on the event loop (from a worker thread)."""
        loop = self.monitor.loop
        if loop is None:
            fn(*args, **kwargs)
        else:
            loop.call_soon_threadsafe(functools.partial(fn, *args, **kwargs))

    def _quota_tree_problem(self) -> str | None:
        if self._tree_unread:
            tree, manifest = self.quota_tree()
            if self._tree_unread and not self.monitor.up:
                return "the cluster's ElasticQuotaTree is not read yet (the API server does not answer)"
            self._tree_unread = False
            if tree is not None:
                self.controller_call(self._set_tree, tree, manifest)
        return check_quota_tree(self)

    def _set_tree(self, tree, manifest) -> None:
        controller = self.controller
        if controller.base_tree is None and not controller.store.setting("tree"):
            controller.tree_manifest = manifest
            controller.set_tree(tree)
            self.log.info("read the quota tree %s from the cluster", self.quota_tree_object)

    # -- nodes -----------------------------------------------------------------------------
    def nodes(self):
        """The Ready, schedulable Nodes matching ``node_label_selector`` now (empty when the API server
        does not answer: the node watch adds them once it does)."""
        query = {"labelSelector": self.node_label_selector or None}
        try:
            items = self.api.request("GET", NODE.path(), query=query).get("items") or []
        except KubernetesError as err:
            self._nodes_error = err
            if outage_error(err):
                self.monitor.failed(err, "reading nodes")
            return []
        self._nodes_error = None
        out = []
        for node in items:
            self._node_objs[node["metadata"]["name"]] = node
            spec = self._node_spec(node)
            if spec is not None and self._usable(node):
                out.append(spec)
        return out

    def _node_spec(self, node: dict):
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        allocatable = {k: v for k, v in (status.get("allocatable") or status.get("capacity") or {}).items()
                       if k != "pods" and not k.startswith("hugepages-")}
        try:
            return parse_node({"name": meta["name"], "allocatable": allocatable, "labels": meta.get("labels") or {}},
                              f"Node {meta.get('name')}")
        except ValidationError as err:
            self.log.warning("not counting node %s: %s", meta.get("name"), err)
            return None

    def _usable(self, node: dict) -> bool:
        """Ready, not cordoned, and no NoSchedule/NoExecute taint our pods do not tolerate."""
        spec, status = node.get("spec") or {}, node.get("status") or {}
        if spec.get("unschedulable"):
            return False
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") != "True":
            return False
        for taint in spec.get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                    _tolerates(t, taint) for t in self.tolerations):
                return False
        return True

    def _ensure_nodes_watched(self) -> None:
        if self._node_watch is None:
            self._node_watch = Informer(self.api, NODE, self.node_label_selector or None, asyncio.get_running_loop(),
                                        self._node_event, timeout_seconds=self.relist_seconds, monitor=self.monitor,
                                        log=self.log, name="nodes").start()

    def _node_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            now = {n["metadata"]["name"]: n for n in obj}
            for name in set(self._node_objs) - set(now):
                self._node_gone(name)
            self._node_objs = now
            for node in obj:
                self._node_seen(node)
        elif kind == "DELETED":
            name = obj["metadata"]["name"]
            self._node_objs.pop(name, None)
            self._node_gone(name)
        else:
            self._node_objs[obj["metadata"]["name"]] = obj
            self._node_seen(obj)
        self._report_nodes()

    def _node_seen(self, obj: dict) -> None:
        controller = self.controller
        name = obj["metadata"]["name"]
        facts = _node_facts(obj)
        read = self._node_read.get(name)
        if read is not None and read[0] == facts:
            spec, usable = read[1], read[2]
        else:
            spec = self._node_spec(obj)
            usable = self._usable(obj)
            self._node_read[name] = (facts, spec, usable)
        if spec is None:
            return
        known = controller.engine.cluster.nodes.get(spec.name)
        if known is None:
            if usable:
                controller.add_nodes([spec])
            return
        alloc = dict(spec.allocatable)
        alloc.pop("pods", None)
        if known.allocatable != alloc or known.labels != spec.labels or known.schedulable != usable:
            controller.node_changed(spec, usable)

    def _node_gone(self, name: str) -> None:
        self._node_read.pop(name, None)
        if name in self.controller.engine.cluster.nodes:
            self.controller.node_removed(name)

    def _report_nodes(self) -> None:
        health = getattr(self.controller, "health", None)
        if health is None:
            return
        if any(read[2] for read in self._node_read.values()):
            health.set("nodes", None)
            return
        which = f"match node_label_selector {self.node_label_selector!r}" if self.node_label_selector else "exist"
        health.set("nodes", f"no Ready, schedulable Node {'matches' if self.node_label_selector else 'exists'}"
                            f" ({len(self._node_objs)} {which}, none Ready, uncordoned and free of taints our "
                            "pods do not tolerate): label nodes for KubernetesBackend.node_label_selector, or fix it")

    async def _recount(self, namespaces: list[str]) -> None:
        for namespace in namespaces:
            try:
                pods = await self._call(self.api.list, POD, f"!{WORKLOAD_LABEL}", namespace)
            except KubernetesError as err:
                if not outage_error(err):
                    self.log.warning("listing pods of %s: %s", namespace, err)
                continue
            self._observe_all(pods)

    def _observe_all(self, pods: list[dict]) -> set:
        """Count each of these pods that holds room; the uids of those."""
        seen = set()
        for obj in pods:
            uid = (obj.get("metadata") or {}).get("uid")
            if uid and holds_room(obj):
                seen.add(uid)
                self._observe(uid, obj)
        return seen

    def _check_synced(self) -> None:
        if self._listed and self._limits_read:
            self.synced.set()

    def _foreign_event(self, kind: str, obj) -> None:
        controller = self.controller
        if kind == "LIST":
            self._listed = True
            self._check_synced()
            seen = self._observe_all(obj)
            for uid in set(controller.foreign) - seen:
                controller.forget_foreign(uid)
            return
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        if kind == "DELETED" or not holds_room(obj):
            controller.forget_foreign(uid)
        else:
            self._observe(uid, obj)

    def _observe(self, uid: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        controller, namespace = self.controller, meta.get("namespace")
        # Room on our nodes, or usage of a namespace we schedule for; nothing else concerns us.
        ours = (obj.get("spec") or {}).get("nodeName") in controller.engine.cluster.nodes
        if not (ours or namespace in controller.engine.quota.leaf_of
                or any(t.namespace == namespace for t in controller.tenants)):
            return
        try:
            spec = pod_spec_of(obj)
        except ValidationError as err:
            self.log.warning("not counting %s: %s", f"{meta.get('namespace')}/{meta.get('name')}", err)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        known = controller.engine.pods.get(controller.foreign.get(uid, -1))
        if known is not None:
            if known.requests == {r: a for r, a in spec.requests().items() if a}:
                return
            controller.forget_foreign(uid)  # resized in place: counted again with what it asks for now
        controller.observe_foreign(uid, namespace, meta.get("name"), spec, node)

    # -- helpers ----------------------------------------------------------------------
    async def _call(self, fn, *args, **kwargs):
        """``fn(*args)`` in the backend's worker pool; an outage is counted by the monitor (which logs
        it once) before the error is raised to the caller."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor,
                                                                    functools.partial(fn, *args, **kwargs))
        except KubernetesError as err:
            self.monitor.failed(err)
            raise

    def _warn(self, message: str, *args, err: KubernetesError) -> None:
        """Log a failed call, unless it is part of an outage (the monitor logs that, once)."""
        if not outage_error(err):
            self.log.warning(message, *args, err)

    async def _read(self, namespace: str, name: str) -> dict | None:
        return await self._call(self.api.read, POD, namespace, name)

    def _labels(self, row) -> dict:
        return {**self.extra_labels, WORKLOAD_LABEL: row.id, MANAGED_BY_LABEL: MANAGED_BY}

    def manifest(self, row, pod) -> dict:
        """The Pod for an admitted training pod."""
        spec = row.spec
        command = list(spec["command"]) if spec.get("command") else ["python", "-c", spec.get("script", "")]
        resources = {k: v for k, v in (spec.get("resources") or {}).items() if v}
        env = [{"name": k, "value": str(v)} for k, v in (spec.get("env") or {}).items()]
        env += [{"name": "TENANCY_WORKLOAD", "value": row.name}, {"name": "TENANCY_WORKLOAD_ID", "value": row.id},
                {"name": "TENANCY_NAMESPACE", "value": row.namespace}, {"name": "TENANCY_POD", "value": pod.name},
                {"name": "TENANCY_REPLICAS", "value": str(spec.get("replicas", 1))}]
        pod_spec = {
            "restartPolicy": "Never",
            "priorityClassName": spec["priorityClassName"],
            "containers": [{"name": row.kind, "image": self.image, "command": command,
                            "resources": resources, "env": env}],
        }
        if spec.get("gracePeriodSeconds") is not None:
            pod_spec["terminationGracePeriodSeconds"] = spec["gracePeriodSeconds"]
        if self.node_selector:
            pod_spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            pod_spec["tolerations"] = [dict(t) for t in self.tolerations]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod.name, "namespace": row.namespace, "labels": self._labels(row)},
                "spec": pod_spec}

    def job_manifest(self, row, pod) -> dict:
        """The Job for an admitted training pod: exactly one pod, never retried by the Job controller
        (the engine decides whether a pod runs again)."""
        template = self.manifest(row, pod)
        meta = template["metadata"]
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": pod.name, "namespace": row.namespace, "labels": dict(meta["labels"])},
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                         "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": template["spec"]}}}

    # -- training pods ------------------------------------------------------------------
    async def _jobs_served(self, retry_seconds: float = 0.0) -> bool:
        """Whether training pods are made as Jobs. A discovery error is retried for ``retry_seconds``
        (for as long as the API server does not answer at all), then raised: never guessed (a wrong
        guess would make a Pod that stop and evict look for as a Job)."""
        deadline = asyncio.get_running_loop().time() + retry_seconds
        while self._jobs is None:
            try:
                self._jobs = self.use_jobs and "jobs" in await self._call(self.api.served_resources, "batch/v1")
            except KubernetesError as err:
                if outage_error(err):
                    await self._until_up()
                    continue
                if asyncio.get_running_loop().time() > deadline:
                    raise
                self.log.warning("discovering batch/v1: %s; retrying", err)
                await asyncio.sleep(self.poll_seconds * 4)
        return self._jobs

    async def _until_up(self) -> None:
        """Wait while the API server does not answer (the monitor probes it)."""
        while not self.monitor.up:
            if self.monitor.loop is None:  # not serving (no probe runs): probe here
                await self._call(self.monitor.probe)
            await asyncio.sleep(max(self.poll_seconds, 1.0))

    def _slots(self) -> asyncio.Semaphore:
        if self._create_slots is None:
            self._create_slots = asyncio.Semaphore(max(1, self.create_concurrency))
        return self._create_slots

    async def _create(self, kind: Kind, body: dict, row):
        """Create our object, retrying what may pass a moment later; (object, None) or (None, Reason).

        While the API server does not answer at all the create waits (it is not refused for that);
        a throttle (429), a 5xx or a quota still counting a victim is retried for
        ``create_retry_seconds``."""
        name, namespace = body["metadata"]["name"], row.namespace
        deadline = asyncio.get_running_loop().time() + self.create_retry_seconds
        while True:
            try:
                async with self._slots():
                    return await self._call(self.api.create, kind, body), None
            except KubernetesError as err:
                if err.status == 409 and asyncio.get_running_loop().time() <= deadline:
                    existing = await self._existing(kind, namespace, name, row)
                    if existing is not None:
                        return existing, None
                    await asyncio.sleep(self.poll_seconds)
                    continue  # a leftover of ours, finished or deleting, is gone now: create again
                if err.status is None:
                    await self._until_up()
                    deadline = asyncio.get_running_loop().time() + self.create_retry_seconds
                    continue
                # Throttled, the server failing, or the quota's usage not yet updated after a victim
                # left (the engine checked the quota already): try again, for a while.
                transient = err.status == 429 or err.status >= 500 or \
                    (err.status == 403 and "exceeded quota" in str(err))
                if not transient or asyncio.get_running_loop().time() > deadline:
                    self.log.error("could not create %s %s/%s: %s", kind.name, namespace, name, err)
                    return None, _refusal(name, err)
                await asyncio.sleep(self.poll_seconds * 2)

    async def _existing(self, kind: Kind, namespace: str, name: str, row) -> dict | None:
        """The object of that name if it is ours and still running (a retried start: adopt it);
        otherwise, when it is ours but finished, deleting or left by a lost pod, delete it and wait
        until it is gone, and None. Someone else's: a refusal."""
        obj = await self._call(self.api.read, kind, namespace, name)
        if obj is None:
            return None
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
            raise KubernetesError(f"{kind.name} {namespace}/{name} exists and is not this workload's", 409)
        lost = self._forgotten.get((namespace, name)) == meta.get("uid")
        if not lost and not _ended(kind, obj) and not meta.get("deletionTimestamp"):
            return obj
        await self._delete(kind, namespace, name, 0, meta.get("uid"))
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            again = await self._call(self.api.read, kind, namespace, name)
            if again is None or again["metadata"].get("uid") != meta.get("uid"):
                self._forgotten.pop((namespace, name), None)
                return None
            await asyncio.sleep(self.poll_seconds)
        raise KubernetesError(f"{kind.name} {namespace}/{name}: an old one of ours is not gone after 30 s", 409)

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner creates the notebook pod
        self._ensure_following()
        created = self._creating[pod.uid] = asyncio.Event()
        f = None
        try:
            try:
                kind = JOB if await self._jobs_served(self.create_retry_seconds) else POD
                if kind is JOB:
                    self._ensure_jobs_followed()
                f = self._register(Followed(pod.uid, kind, row.namespace, pod.name))
                # admitted, not on the cluster yet: never shown Running before the cluster says so
                self._observed(f, "Pending", None, f"its {kind.name} is being created on the cluster")
                body = self.job_manifest(row, pod) if kind is JOB else self.manifest(row, pod)
                obj, refusal = await self._create(kind, body, row)
            except KubernetesError as err:
                obj, refusal = None, _refusal(pod.name, err)
            if obj is not None:
                self._k8s_uids[pod.uid], self._kinds[pod.uid] = obj["metadata"]["uid"], kind
                f.k8s_uid = obj["metadata"]["uid"]
        finally:
            created.set()
            self._creating.pop(pod.uid, None)
        if obj is None:
            if f is not None:
                self._unregister(f)
            self.controller.pod_exited(pod.uid, 127, refusal)
            return
        self.log.debug("created %s %s/%s for workload %s", kind.name, row.namespace, pod.name, row.id)
        await self._follow(f, asyncio.get_running_loop().time())

    async def _made(self, uid: int) -> None:
        """Wait until a start() in flight for ``uid`` has made its object (or given up)."""
        creating = self._creating.get(uid)
        if creating is not None:
            await creating.wait()

    async def _job_pods(self, namespace: str, job: str, job_uid: str | None = None) -> list[dict]:
        """The pods of our Job (by its uid when known: an older Job of the same name had others)."""
        selector = f"{JOB_UID_LABEL}={job_uid}" if job_uid else f"{JOB_NAME_LABEL}={job}"
        return await self._call(self.api.list, POD, selector, namespace)

    # -- following our pods --------------------------------------------------------------
    def _ensure_following(self) -> None:
        """Start the watch of our pods (once; at the first start or recover, or when serving)."""
        if self._ours is None:
            loop = asyncio.get_running_loop()
            if self.monitor.loop is None:
                self.monitor.loop = loop
            self._ours_listed = asyncio.Event()
            self._ours = Informer(self.api, POD, OURS, loop, self._our_event, timeout_seconds=self.relist_seconds,
                                  monitor=self.monitor, log=self.log, name="our pods").start()

    def _ensure_jobs_followed(self) -> None:
        """Start the watch of our Jobs (once, at the first Job made or adopted)."""
        if self._our_jobs is None:
            self._our_jobs = Informer(self.api, JOB, OURS, asyncio.get_running_loop(), self._job_event,
                                      timeout_seconds=self.relist_seconds, monitor=self.monitor, log=self.log,
                                      name="our jobs").start()

    def _job_event(self, kind: str, obj) -> None:
        # Only the Jobs someone follows are kept: a finished or deleted Job nobody follows is dropped
        # (a follower registered later asks the API server once if the watch has not spoken since).
        if kind == "LIST":
            jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in obj}
            self._job_objs = {key: _slim_job(jobs[key]) for key in self._follows if key in jobs}
            self._jobs_listed = True
            for f in self._follows.values():
                if f.kind is JOB:
                    f.changed.set()
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        f = self._follows.get(key)
        if f is None:
            self._job_objs.pop(key, None)
            return
        self._job_objs[key] = {"_deleted": True, "metadata": _slim_meta(obj)} if kind == "DELETED" else _slim_job(obj)
        # The Job is read only while it has no pod of its own (``_why_no_pod``); once it has one, its pod's
        # events tell everything (a Job deleted takes its pod along) and its status writes need not wake us.
        if kind == "DELETED" or f.current() is None:
            f.changed.set()

    def _watched_job(self, f: Followed) -> dict | None:
        """Our Job of ``f`` as the watch saw it (a tombstone when deleted); None when the watch has not
        seen this Job (not listed yet, or only just made): then ask the API server."""
        obj = self._job_objs.get((f.namespace, f.name)) if self._jobs_listed else None
        if obj is None or obj["metadata"].get("uid") != f.k8s_uid:
            return None
        return obj

    def _register(self, f: Followed) -> Followed:
        old = self._followed.get(f.uid)
        if old is not None:
            self._unregister(old)
        self._followed[f.uid] = f
        self._follows[(f.namespace, f.name)] = f
        for pod in self._by_object.get((f.namespace, f.name), {}).values():  # what the watch saw already
            f.pods[pod["metadata"]["uid"]] = pod
        return f

    def _unregister(self, f: Followed) -> None:
        if self._followed.get(f.uid) is f:
            del self._followed[f.uid]
        if self._follows.get((f.namespace, f.name)) is f:
            del self._follows[(f.namespace, f.name)]
            self._job_objs.pop((f.namespace, f.name), None)
        f.changed.set()  # its loop wakes and ends

    def _our_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            obj = [_slim_pod(p) for p in obj]
            now = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in obj}
            for key in set(self._our_pods) - set(now):
                self._wake_gone(key)
            self._our_pods = now
            by_object: dict = {}
            for pod in obj:
                by_object.setdefault(key_of(pod), {})[pod["metadata"]["uid"]] = pod
            self._by_object = {key: dict(pods) for key, pods in by_object.items()}
            for key, f in self._follows.items():
                fresh = by_object.get(key, {})
                for puid, old in f.pods.items():
                    if puid not in fresh and not old.get("_deleted"):  # deleted while we were not watching
                        fresh[puid] = {**old, "_deleted": True}
                f.pods = fresh
                f.changed.set()
            self._ours_listed.set()
            return
        obj = _slim_pod(obj)
        meta = obj["metadata"]
        key = (meta.get("namespace"), meta.get("name"))
        owner = key_of(obj)
        if kind == "DELETED":
            self._our_pods.pop(key, None)
            pods = self._by_object.get(owner)
            if pods is not None:
                pods.pop(meta.get("uid"), None)
                if not pods:
                    del self._by_object[owner]
            self._wake_gone(key)
            obj = {**obj, "_deleted": True}
        else:
            self._our_pods[key] = obj
            self._by_object.setdefault(owner, {})[meta.get("uid")] = obj
        f = self._follows.get(owner)
        if f is not None:
            f.pods[meta.get("uid")] = obj
            f.changed.set()

    def _wake_gone(self, key) -> None:
        waiter = self._gone_waiters.pop(key, None)
        if waiter is not None:
            waiter.set()

    def _observed(self, f: Followed, phase: str, node: str | None, message: str | None) -> None:
        """Tell the controller what the cluster says of the pod (when that changed)."""
        now = (phase, node, message)
        if f.observed == now:
            return
        f.observed = now
        observe = getattr(self.controller, "pod_observed", None)
        if observe is not None:
            observe(f.uid, phase, node, message)

    def _live(self, f: Followed) -> bool:
        """Whether ``f`` is still ours to report: not stopped, replaced or being evicted."""
        return self._followed.get(f.uid) is f and f.uid not in self._evicting and \
            self._k8s_uids.get(f.uid) == f.k8s_uid

    async def _follow(self, f: Followed, since: float | None) -> None:
        """Until the pod ended (its exit status, at once), was lost (queued again) or we stopped
        following it (a stop, an eviction: those report themselves); the watch wakes us."""
        loop = asyncio.get_running_loop()
        outcome = None  # ("ended", code, reason) or ("lost", why)
        checks = 0  # times we asked why its Job has no pod
        while self._live(f):
            if not self._ours_listed.is_set():
                await _wait_event(self._ours_listed, 1.0)
                continue
            state, detail = _judge_safely(f)
            timeout = None
            if state == "ended":
                outcome = ("ended", detail, None)
                break
            if state == "lost":
                outcome = ("lost", detail)
                break
            if state == "running":
                self._observed(f, "Running", detail, None)
            elif state == "pending":
                node, message = detail
                self._observed(f, "Pending", node, message)
            elif state == "terminating":
                deadline = detail + self.terminating_timeout_seconds
                pod = f.current()
                if time.time() >= deadline:
                    outcome = ("lost", await self._stuck(f, pod, detail))
                    break
                self._observed(f, "Terminating", (pod.get("spec") or {}).get("nodeName"),
                               f"its pod {pod['metadata']['name']} is terminating (due to end by "
                               f"{time.strftime('%H:%M:%S', time.localtime(detail))})")
                timeout = deadline - time.time() + 0.5
            else:  # no pod yet: the Job controller has not made it (or could not)
                self._observed(f, "Pending", None, "waiting for the Job controller to create its pod")
                waited = None if since is None else loop.time() - since
                if waited is None or waited > self.create_failure_seconds * (2 ** checks - 1):
                    # Asked after create_failure_seconds, then at doubling intervals (at most a minute
                    # apart): a Job controller behind on a long queue is not polled once per Job and second.
                    checks += 1
                    try:
                        found = await self._why_no_pod(f, waited)
                    except KubernetesError as err:
                        self._warn("reading %s %s/%s: %s", f.kind.name, f.namespace, f.name, err=err)
                        found = None
                    if found is not None:
                        outcome = found
                        break
                timeout = min(self.create_failure_seconds * 2 ** max(checks - 1, 0), 60.0)
            f.changed.clear()
            if self._live(f):
                await _wait_event(f.changed, timeout)
        if outcome is None or not self._live(f):
            return  # stopped, replaced, or being evicted: someone else reports it
        self._unregister(f)
        k8s_uid, kind = self._k8s_uids.pop(f.uid, None), self._kinds.pop(f.uid, None)
        if outcome[0] == "ended":
            code, reason = outcome[1], outcome[2]
            self.controller.pod_exited(f.uid, code, reason)
            return
        lost = getattr(self.controller, "pod_lost", None)
        if lost is None:
            self.controller.pod_exited(f.uid, KILLED)
            return
        lost(f.uid, outcome[1])
        # Whoever takes the object's kind from _kinds discards what is left of it: here, since forget()
        # (which the controller calls for the lost pod) finds nothing to take now. Left alone, the old
        # Job stayed on the cluster until the work was started again and adopted it.
        if kind is not None:
            await self._discard(kind, f.namespace, f.name, k8s_uid)

    async def _why_no_pod(self, f: Followed, waited: float | None):
        """A Job without a pod: ended (Complete, or refused by the API server: its FailedCreate events),
        lost (deleted, or failed with its pod gone before we saw it), or None (still waiting)."""
        obj = self._watched_job(f) if f.kind is JOB else None
        if obj is None and f.kind is JOB and self._jobs_listed and waited is not None \
                and waited < self.create_failure_seconds:
            return None  # only just made: the watch brings it (asking would cost a read per Job)
        if obj is None:
            obj = await self._call(self.api.read, f.kind, f.namespace, f.name)
        if obj is None or obj.get("_deleted") or obj["metadata"].get("uid") != f.k8s_uid:
            return ("lost", f"its {f.kind.name} {f.namespace}/{f.name} was deleted")
        if f.kind is POD:
            code = _exit_code(obj)
            return None if code is None else ("ended", code, None)
        conditions = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        if conditions & {"Complete", "SuccessCriteriaMet"}:
            return ("ended", 0, None)
        if conditions & {"Failed", "FailureTarget"}:
            pods = await self._job_pods(f.namespace, f.name, f.k8s_uid)
            codes = [c for c in (_exit_code(p) for p in pods) if c is not None]
            if codes:
                return ("ended", codes[-1], None)
            return ("lost", f"the pod of Job {f.namespace}/{f.name} was deleted before it ended")
        status = obj.get("status") or {}
        # No pod yet, and the Job controller has looked at it (a startTime; it writes one even when it
        # could not make the pod): it may be refused (a LimitRange, a ResourceQuota, an invalid spec).
        # Not looked at yet: it is behind, and its events would say nothing (listing them for every Job
        # of a long queue slows the API server, and so the Job controller, further).
        if waited is not None and status.get("startTime") and \
                not (status.get("active") or status.get("succeeded") or status.get("failed")):
            uid = obj["metadata"].get("uid")
            events = await self._call(self.api.request, "GET", f"/api/v1/namespaces/{f.namespace}/events",
                                      query={"fieldSelector": f"involvedObject.uid={uid},reason=FailedCreate"})
            for event in events.get("items") or []:
                # e.g. 'Error creating: pods "x" is forbidden: exceeded quota: ...' or '... is invalid: ...'
                message = " ".join((event.get("message") or "").split()).removeprefix("Error creating: ")
                # A quota may free up (the Job controller retries); the rest will not.
                if "exceeded quota" not in message or waited > self.create_retry_seconds:
                    await self._delete(f.kind, f.namespace, f.name, 0, f.k8s_uid)
                    return ("ended", 1, _refusal(f.name, KubernetesError(message, None)))
        return None

    async def _stuck(self, f: Followed, pod: dict, due: float) -> str:
        """A pod of ours deleted under us is still terminating long after its grace period: report it,
        delete it with a zero grace period, and let its work be queued again."""
        meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
        why = (f"its pod {meta['name']} was stuck terminating on {node or 'no node'} for "
               f"{time.time() - due:.0f} s past its grace period (its kubelet does not answer?); deleted with a "
               "zero grace period")
        self.log.warning("%s/%s: %s; its work is queued again", f.namespace, f.name, why)
        try:
            await self._delete(POD, f.namespace, meta["name"], 0, meta.get("uid"))
        except KubernetesError as err:
            self._warn("deleting %s/%s: %s", f.namespace, meta["name"], err=err)
        return why

    async def forget(self, row, pod, prow) -> None:
        """A pod the controller queued again because it was lost: delete what is left of its object
        with a zero grace period (never adopted by the next start), quietly."""
        await self._made(pod.uid)
        kind, k8s_uid = self._kinds.pop(pod.uid, None), self._k8s_uids.pop(pod.uid, None)
        f = self._followed.get(pod.uid)
        if f is not None:
            self._unregister(f)
        if kind is None or row.kind == "notebook":
            return  # nothing of ours made, or _follow took it and discards it
        await self._discard(kind, row.namespace, pod.name, k8s_uid)

    async def _discard(self, kind: Kind, namespace: str, name: str, k8s_uid: str | None) -> None:
        """Delete the object of a lost pod, and its Job's pods, with a zero grace period; never adopted."""
        self._forgotten[(namespace, name)] = k8s_uid
        try:
            await self._delete(kind, namespace, name, 0, k8s_uid)
            if kind is JOB:
                for obj in await self._job_pods(namespace, name, k8s_uid):
                    await self._delete(POD, namespace, obj["metadata"]["name"], 0, obj["metadata"].get("uid"))
        except KubernetesError as err:
            self._warn("deleting %s/%s: %s", namespace, name, err=err)

    # -- evictions and stops ----------------------------------------------------------------
    async def _policy_served(self) -> bool:
        if self._policy_v1 is None:
            try:
                served = await self._call(self.api.served_resources, "policy/v1")
            except KubernetesError:
                served = set()
            self._policy_v1 = bool(served)  # policy/v1 is served: pods/eviction takes an Eviction of that version
        return self._policy_v1

    async def _evict_pod(self, namespace: str, name: str, grace: int) -> None:
        """Evict through the Eviction API, or delete where it is not served; a pod already gone is fine."""
        if await self._policy_served():
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                    "deleteOptions": {"gracePeriodSeconds": grace}}
            try:
                await self._call(self.api.request, "POST", POD.path(namespace, name) + "/eviction", body=body)
                return
            except KubernetesError as err:
                if err.status == 404:
                    return
                # 429: a PodDisruptionBudget refuses it. The engine's decision stands: delete.
                self._warn("eviction of %s/%s refused (%s); deleting it", namespace, name, err=err)
        await self._delete(POD, namespace, name, grace)

    async def _delete(self, kind: Kind, namespace: str, name: str, grace: int, k8s_uid: str | None = None) -> None:
        body = {"gracePeriodSeconds": grace, "propagationPolicy": "Background"}
        if k8s_uid:
            body["preconditions"] = {"uid": k8s_uid}
        try:
            await self._call(self.api.request, "DELETE", kind.path(namespace, name), body=body)
        except KubernetesError as err:
            if err.status not in (404, 409):
                raise

    async def _wait_gone(self, namespace: str, name: str, k8s_uid: str | None, timeout: float) -> bool:
        """Whether the pod is gone within ``timeout``: told by the watch for pods of ours, read again
        every ``poll_seconds`` for others (notebook pods)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        key = (namespace, name)
        watched = self._ours_listed is not None and self._ours_listed.is_set() and key in self._our_pods
        while True:
            if watched:
                obj = self._our_pods.get(key)
            else:
                try:
                    obj = await self._read(namespace, name)
                except KubernetesError as err:
                    self._warn("reading pod %s/%s: %s", namespace, name, err=err)
                    obj = {"metadata": {"uid": k8s_uid}}
            if obj is None or (k8s_uid and obj["metadata"].get("uid") != k8s_uid):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            if watched:
                waiter = self._gone_waiters.setdefault(key, asyncio.Event())
                if not await _wait_event(waiter, min(left, 10.0)):
                    watched = False  # read it once (the watch may be away), then trust the watch again
                    continue
            else:
                await asyncio.sleep(self.poll_seconds)
                watched = self._ours_listed is not None and self._ours_listed.is_set() and key in self._our_pods

    async def _evict_all(self, namespace: str, pods: list[dict], grace: int) -> None:
        """Evict these pods with the grace period; whatever still runs after it (plus the timeout) is deleted now."""
        for obj in pods:
            await self._evict_pod(namespace, obj["metadata"]["name"], grace)
        for obj in pods:
            meta = obj["metadata"]
            if not await self._wait_gone(namespace, meta["name"], meta.get("uid"), grace + self.gone_timeout_seconds):
                await self._delete(POD, namespace, meta["name"], 0, meta.get("uid"))
                await self._wait_gone(namespace, meta["name"], meta.get("uid"), 30)

    async def evict(self, row, pod, prow, grace: float, reason) -> None:
        grace_s = max(0, int(round(grace)))
        self._evicting.add(pod.uid)
        f = self._followed.get(pod.uid)
        if f is not None:
            f.changed.set()  # its follower ends quietly: this reports
        try:
            if row.kind == "notebook":
                pods = await self._notebook_pods(row)
                await self._evict_all(row.namespace, pods, grace_s)
            else:
                await self._made(pod.uid)
                kind, k8s_uid = self._kinds.get(pod.uid), self._k8s_uids.get(pod.uid)
                if kind is JOB:
                    # The Job's pod goes through the Eviction API; the Job (backoffLimit 0) then fails
                    # without a new pod, and is deleted: the engine queues a new pod when it decides so.
                    await self._evict_all(row.namespace, await self._job_pods(row.namespace, pod.name, k8s_uid), grace_s)
                    await self._delete(JOB, row.namespace, pod.name, 0, k8s_uid)
                elif kind is POD:
                    await self._evict_all(row.namespace, [{"metadata": {"name": pod.name, "uid": k8s_uid}}], grace_s)
        except KubernetesError as err:  # the eviction completes either way: the engine already decided
            self.log.error("evicting %s/%s: %s", row.namespace, pod.name, err)
        finally:
            self._evicting.discard(pod.uid)
            self._k8s_uids.pop(pod.uid, None)
            self._kinds.pop(pod.uid, None)
            if f is not None:
                self._unregister(f)
        self.controller.eviction_done(pod.uid)

    async def stop(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            await self._stop_notebook(row)
            return
        await self._made(pod.uid)
        kind, k8s_uid = self._kinds.pop(pod.uid, None), self._k8s_uids.pop(pod.uid, None)
        f = self._followed.get(pod.uid)
        if f is not None:
            self._unregister(f)
        try:
            if kind is JOB:
                pods = await self._job_pods(row.namespace, pod.name, k8s_uid)
                await self._delete(JOB, row.namespace, pod.name, self.stop_grace_seconds, k8s_uid)
                for obj in pods:  # with the cancel's grace period, not the garbage collector's
                    await self._delete(POD, row.namespace, obj["metadata"]["name"], self.stop_grace_seconds)
            elif kind is POD:
                await self._delete(POD, row.namespace, pod.name, self.stop_grace_seconds, k8s_uid)
        except KubernetesError as err:
            self.log.error("deleting %s/%s: %s", row.namespace, pod.name, err)

    async def _notebook_pods(self, row) -> list[dict]:
        """The pods the spawner made for a notebook workload (labelled with its id)."""
        return await self._call(self.api.list, POD, f"{WORKLOAD_LABEL}={row.id}", row.namespace)

    async def _stop_notebook(self, row) -> None:
        """The notebook was cancelled through the API (or ended): its server goes too, or its room
        would be used twice. The hub stops it (and then knows); its pods are deleted in any case."""
        server = row.spec.get("serverName") or ""
        if self.hub is not None and self.hub.configured:
            try:
                await self.hub.stop_server(row.user, server)
            except Exception as err:  # noqa: BLE001 - the pods go below anyway
                self.log.warning("could not stop %s's server %r through the hub: %s", row.user, server, err)
        try:
            for obj in await self._notebook_pods(row):
                await self._delete(POD, row.namespace, obj["metadata"]["name"], self.stop_grace_seconds,
                                   obj["metadata"].get("uid"))
        except KubernetesError as err:
            self.log.error("deleting the pods of notebook %s/%s: %s", row.namespace, row.name, err)

    # -- restart --------------------------------------------------------------------------
    async def _status(self, kind: Kind, namespace: str, name: str, obj: dict):
        """The exit code of our Job or Pod once it ended (None while it runs): after a restart."""
        if kind is POD:
            return _exit_code(obj)
        conditions = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        if conditions & {"Complete", "SuccessCriteriaMet"}:
            return 0
        if conditions & {"Failed", "FailureTarget"}:
            pods = await self._job_pods(namespace, name, obj["metadata"].get("uid"))
            if any(_exit_code(p) is None for p in pods):
                return None  # its pod is still terminating: it holds its room until it is gone
            codes = [c for c in (_exit_code(p) for p in pods) if c is not None]
            return codes[-1] if codes else KILLED  # its pod was deleted under it: killed, not a program error
        return None

    async def recover(self, row, prow, pod):
        """``"running"``, ``("exited", code)`` or ``"gone"`` for a pod that ran before a restart.

        An API error is raised, not taken for "gone": the service then fails to start (and is
        started again) rather than forgetting workloads that still run."""
        if row.kind == "notebook":
            pods = await self._notebook_pods(row)
            live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")
                    and not p["metadata"].get("deletionTimestamp")]
            return "running" if live else "gone"
        # A pod started before an upgrade to Jobs is a bare Pod: look for both.
        for kind in ((JOB, POD) if await self._jobs_served(self.create_retry_seconds) else (POD,)):
            obj = await self._call(self.api.read, kind, row.namespace, prow.name)
            if obj is None or (obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
                continue
            if obj["metadata"].get("deletionTimestamp"):
                return "gone"
            code = await self._status(kind, row.namespace, prow.name, obj)
            if code is not None:
                return ("exited", code)
            if kind is POD and (obj.get("status") or {}).get("phase") not in ("Running", "Pending"):
                return "gone"
            self._k8s_uids[pod.uid], self._kinds[pod.uid] = obj["metadata"]["uid"], kind
            self._ensure_following()
            if kind is JOB:
                self._ensure_jobs_followed()
            known = self._followed.get(pod.uid)
            if known is None or known.k8s_uid != obj["metadata"]["uid"]:  # not followed already
                f = self._register(Followed(pod.uid, kind, row.namespace, prow.name, obj["metadata"]["uid"]))
                self.controller._spawn(self._follow(f, None))
            return "running"
        return "gone"

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        """What the training pod printed, read from the cluster (``kubectl logs``)."""
        if row.kind == "notebook" or not prow.name:
            return ""
        name = prow.name
        try:
            if self.use_jobs and self._jobs is not False:
                pods = self.api.list(POD, f"{JOB_NAME_LABEL}={prow.name}", row.namespace)
                if pods:
                    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
                    name = pods[-1]["metadata"]["name"]
            resp = self.api.api_client.call_api(
                *self.api.api_client.param_serialize(
                    method="GET", resource_path=POD.path(row.namespace, name) + "/log",
                    query_params=[("limitBytes", tail_bytes)], header_params={"Accept": "*/*"},
                    auth_settings=["BearerToken"]))
            return resp.read().decode("utf-8", "replace") if 200 <= resp.status < 300 else ""
        except Exception as err:  # noqa: BLE001 - logs are best effort
            self.log.warning("logs of %s/%s: %s", row.namespace, name, " ".join(str(err).split())[:200])
            return ""


async def _wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Whether ``event`` is set within ``timeout`` seconds (None: no limit). Unlike ``asyncio.wait_for``
    before Python 3.12, a cancellation is never swallowed when the event is set at the same moment (the
    follower or the service would then go on after being told to stop)."""
    if event.is_set():
        return True
    if timeout is None:  # a cancellation reaches a plain wait as it is; no task of its own (one per pod event)
        return await event.wait()
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)


def _judge_safely(f: Followed):
    try:
        return judge(f)
    except (KeyError, TypeError, ValueError):  # a pod object of an unexpected shape: wait for the next
        return "nopod", None


def _slim_meta(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {k: v for k, v in meta.items() if k != "managedFields"}


def _slim_job(job: dict) -> dict:
    """What ``_why_no_pod`` reads of a Job (thousands are kept: not their pod templates)."""
    return {"metadata": _slim_meta(job), "status": job.get("status") or {}}


def _slim_pod(pod: dict) -> dict:
    """What following a pod of ours reads (``follow.judge``): thousands are kept, each walked by the
    garbage collector; their specs and managed fields were most of their objects."""
    spec = pod.get("spec") or {}
    return {"metadata": _slim_meta(pod), "spec": {"nodeName": spec.get("nodeName")} if spec.get("nodeName") else {},
            "status": pod.get("status") or {}}


def _node_facts(node: dict) -> tuple:
    """What ``_node_spec`` and ``_usable`` read of a node: its size, labels, cordon, taints and Ready status."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (status.get("allocatable"), status.get("capacity"), meta.get("labels"), spec.get("unschedulable"),
            spec.get("taints"), ready)


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Whether a toleration (as in a pod spec) tolerates a node's taint."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


def _refusal(name: str, err: KubernetesError) -> Reason:
    """Why the API server would not create our object, as the reason the training pod failed."""
    text = str(err)
    code = RESOURCE_QUOTA if "exceeded quota" in text else LIMIT_RANGE if "LimitRange" in text or "per Container" in text \
        else "create-failed"
    return Reason(code, f"the API server refused to create {name}: {text}", {"status": err.status} if err.status else {})


def _ended(kind: Kind, obj: dict) -> bool:
    """Whether our Job (any final condition) or Pod (a final phase) has ended."""
    if kind is POD:
        return _exit_code(obj) is not None
    final = ("Complete", "SuccessCriteriaMet", "Failed", "FailureTarget")
    return any(c.get("type") in final and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])
