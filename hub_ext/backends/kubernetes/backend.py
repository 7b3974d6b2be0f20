"""The Kubernetes backend: the engine decides, the cluster runs.

``KubernetesBackend`` is what the service configures (``c.KubernetesBackend.*``)
and calls; it holds the configuration and the API client, and hands every
duty to one room, each a module of this package:

- ``nodes.Nodes``: the cluster's Nodes as capacity, watched (joins, cordons,
  resizes, deletions) and reported on the health when none is usable;
- ``training.Training``: the manifests and creates of training pods (a batch/v1
  Job of one pod each, or a bare Pod), and what they printed;
- ``follow.Follower``: each training pod followed until it ends, is lost or is
  stuck terminating, on the word of the watches in ``ours.Ours`` (what we made,
  and what the watches of our pods and Jobs last saw);
- ``evictions.Evictions``: victims evicted, cancelled work stopped, lost pods'
  leftovers deleted;
- ``recovery.Recovery``: what became of the pods after a restart;
- ``foreign.Foreign``: pods we did not make counted as usage, and the
  namespaces' ResourceQuotas and LimitRanges copied into the engine;
- ``checks.Checks`` and ``quotatree.ClusterTree``: the start-up checks, and the
  cluster's ElasticQuotaTree; ``tenants.Tenants``: tenants provisioned from hub
  groups when ``provision`` is on;
- ``datasets.Datasets``: each dataset's claim and volume per namespace that may
  use it, followed until Bound; ``datasetcrd.ClusterDatasets``: the cluster's
  ``Dataset`` objects handed to the service; ``fluid.Fluid``: accelerated datasets
  (a Fluid Dataset and AlluxioRuntime per namespace) where Fluid's CRDs are served;
- ``calls.Calls``: every API call, made in the backend's own worker pool so the
  controller's loop never blocks, through a client-side rate limit
  (``api_qps``/``api_burst``); ``informer.ApiMonitor`` says whether the API
  server answers at all. An outage, or a failing check, stops admissions while
  it lasts, with one log line, not one per call.

Notebook pods are created by the spawner; this backend only evicts and stops
them. The labels and names of everything we make are in ``objects``.

Why it is over 500 lines: half of it is ``KubernetesBackend``'s configurable traits with
their help text (the configuration reference is made from them, and ``c.KubernetesBackend.*``
names are a public contract), which belong on the one class the service configures; the
rest is the Backend contract's methods, each handing its duty to a room, and the loop
that runs the rooms' background work.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from traitlets import Bool, Dict, Float, Int, List, Unicode
from traitlets.config import LoggingConfigurable

from .. import Backend
from ...threadnames import name_this_thread
from .api import Api, RateLimiter, cluster_client
from .calls import Calls
from .checks import Checks
from .datasetcrd import ClusterDatasets
from .datasets import Datasets
from .evictions import Evictions
from .fluid import Fluid
from .follow import Follower
from .foreign import Foreign
from .informer import ApiMonitor, Informer
from .leader import lease_elector
from .nodes import Nodes
from .ours import Ours
from .quotatree import ClusterTree
from .recovery import Recovery
from .tenants import Tenants
from .training import Training


class KubernetesBackend(LoggingConfigurable, Backend):
    """The service's backend for a cluster: its configuration (``c.KubernetesBackend.*``) and the
    methods the controller calls, each handed to the room that does it."""

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

    stage_log = Unicode(
        "",
        help="""
        A file to which every training create appends one JSON line: when its task began, got a
        create slot, was sent and was answered (wall-clock seconds). For the cluster benchmark
        (``tenancy bench --cluster``), which joins it with what the cluster's watches saw; empty
        (the default): nothing is recorded.
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

    dataset_recheck_seconds = Float(
        5.0,
        help="""
        How often a dataset's claim that is not Bound yet, or one no longer wanted that a running
        workload still mounts, is looked at again (besides every change the watches see).

        .. versionadded:: 0.4
        """,
    ).tag(config=True)

    fluid_check_seconds = Float(
        60.0,
        help="""
        How often the cluster is asked whether Fluid is installed (its ``data.fluid.io`` Dataset and
        AlluxioRuntime CRDs served): datasets can be accelerated only then.

        .. versionadded:: 0.4
        """,
    ).tag(config=True)

    fluid_cache_memory = Unicode(
        "1Gi",
        help="""
        The memory tier of each accelerated dataset's Fluid AlluxioRuntime (``tieredstore`` level
        ``MEM`` at ``/dev/shm``), per namespace that uses it: a Kubernetes quantity.

        .. versionadded:: 0.4
        """,
    ).tag(config=True)

    fluid_replicas = Int(
        1,
        help="""
        The cache workers of each accelerated dataset's Fluid AlluxioRuntime (``spec.replicas``).

        .. versionadded:: 0.4
        """,
    ).tag(config=True)

    follow_dataset_objects = Bool(
        True,
        help="""
        Follow the cluster's ``Dataset`` objects (``datasets.tenancy.jupyter.org``, which the chart
        installs) and hand them to the service, as datasets of origin ``cluster``. Where the CRD is
        not installed nothing is followed (it is looked for again every ``checks_seconds``).

        .. versionadded:: 0.4
        """,
    ).tag(config=True)

    def __init__(self, api_client=None, hub=None, **kwargs):
        super().__init__(**kwargs)
        self.hub = hub
        self._controller = None
        client = api_client if api_client is not None else self._default_client()
        self.api = Api(client, self.request_timeout, RateLimiter(self.api_qps, self.api_burst))
        self._executor = ThreadPoolExecutor(max_workers=max(4, self.create_concurrency + 4),
                                            thread_name_prefix="tenancy-k8s", initializer=name_this_thread)
        self.monitor = ApiMonitor(self.api, log=self.log, interval=self.health_check_seconds,
                                  timeout=self.health_timeout_seconds)
        # The rooms, each one duty (see the module's docstring); they read the configuration from here.
        self.calls = Calls(self)
        self.tree = ClusterTree(self)
        self.checks = Checks(self)
        self.cluster_nodes = Nodes(self)  # not "nodes": that is the method the controller calls
        self.foreign = Foreign(self)
        self.tenants = Tenants(self)
        self.ours = Ours(self)
        self.training = Training(self)
        self.follower = Follower(self)
        self.evictions = Evictions(self)
        self.recovery = Recovery(self)
        self.datasets = Datasets(self)
        self.fluid = Fluid(self)
        self.dataset_objects = ClusterDatasets(self)

    @property
    def controller(self):
        return self._controller

    @property
    def datasets_room(self):
        """The service's datasets room, or None for a controller without one (the benches' and some
        tests' controllers): the one place the backend's datasets parts ask for it."""
        return getattr(self._controller, "datasets", None)

    @controller.setter
    def controller(self, controller) -> None:
        self._controller = controller
        health = getattr(controller, "health", None)
        self.monitor.attach(health)
        if health is not None:  # what went wrong before there was a controller to tell
            self.tree.tell(health)
            self.cluster_nodes.tell(health)

    def _default_client(self):
        # room in its connection pool for every create in flight, the watches and the probes
        return cluster_client(self.kubeconfig, self.kube_context, self.create_concurrency + 8)

    # -- what the service reads ----------------------------------------------------------------
    @property
    def synced(self) -> asyncio.Event:
        """Set once the first read of foreign pods and of quotas and limits is in."""
        return self.foreign.synced

    @property
    def checked(self) -> asyncio.Event:
        """Set once the start-up checks ran."""
        return self.checks.checked

    @property
    def provisioned(self):
        """The last ``ProvisionResult`` (None before the first)."""
        return self.tenants.provisioned

    def quota_tree(self):
        """(tree, manifest) of the cluster's ElasticQuotaTree, or (None, None) when it has none (or it
        cannot be read yet: the API server does not answer; it is read once it does)."""
        return self.tree.read()

    def nodes(self):
        """The Ready, schedulable Nodes matching ``node_label_selector`` now (empty when the API server
        does not answer: the node watch adds them once it does)."""
        return self.cluster_nodes.now()

    def manifest(self, row, pod) -> dict:
        """The Pod for an admitted training pod (a subclass may change it: training pods are made from this)."""
        return self.training.manifest(row, pod)

    def job_manifest(self, row, pod) -> dict:
        """The Job for an admitted training pod, around ``manifest``'s pod (a subclass may change it too)."""
        return self.training.job_manifest(row, pod)

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        """What the training pod printed, read from the cluster (``kubectl logs``)."""
        return self.training.logs(row, prow, tail_bytes)

    # -- what the service tells us -------------------------------------------------------------
    async def wait_ready(self) -> None:
        """Until the API server answers (the service starts while it is down, and waits: /health says
        so), probing with backoff; one line when it goes, one when it comes back."""
        await self.monitor.wait_up()

    def tenants_changed(self, tenants) -> None:
        """Count the pods of new tenant namespaces; provision the tenants when they changed (``provision`` on)."""
        added = {t.namespace for t in tenants} - {t.namespace for t in self.tenants.known or []}
        if added and self.foreign.watch is not None:
            # The watch saw their pods but did not count them (not ours then): count them now.
            self.controller._spawn(self.foreign.recount(sorted(added)))
        self.tenants.changed(tenants)

    def acceleration(self) -> str | None:
        """None where Fluid's Dataset and AlluxioRuntime CRDs are served (as last read), else why not."""
        return self.fluid.why

    def acceleration_objects(self, dataset, namespace: str) -> list[dict]:
        """The Fluid Dataset and AlluxioRuntime accelerating ``dataset`` makes in ``namespace``."""
        return self.fluid.manifests(dataset, namespace)

    def datasets_changed(self, wanted) -> None:
        """Make each wanted (dataset, namespace) pair on the cluster and report its state; remove the
        pairs no longer wanted once nothing mounts them (``datasets.Datasets``, in the background)."""
        self.datasets.changed(wanted)

    async def provision_now(self, tenants=None):
        """Reconcile the tenants (default: the last known) on the cluster now; the ``ProvisionResult``,
        or None while the tenants are not known (the hub not read yet: provisioning ``[]`` would
        delete every tenant's objects)."""
        return await self.tenants.provision_now(tenants)

    async def check_now(self) -> bool:
        """Run the start-up checks once; True when every one passes (each one's problem is on the
        controller's health, as one line)."""
        return await self.checks.now()

    def admitted(self, row, pod, prow) -> None:
        if row.kind != "notebook":  # the spawner makes a notebook's pod; nothing follows it here
            self.training.admitted(pod)

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner creates the notebook pod
        await self.training.start(row, pod)

    async def evict(self, row, pod, prow, grace: float, reason) -> None:
        await self.evictions.evict(row, pod, grace)

    async def stop(self, row, pod, prow) -> None:
        await self.evictions.stop(row, pod)

    async def forget(self, row, pod, prow) -> None:
        """A pod the controller queued again because it was lost: delete what is left of its object
        with a zero grace period (never adopted by the next start), quietly."""
        await self.evictions.forget(row, pod)

    async def recover(self, row, prow, pod):
        """``"running"``, ``("exited", code)`` or ``"gone"`` for a pod that ran before a restart.

        An API error is raised, not taken for "gone": the service then fails to start (and is
        started again) rather than forgetting workloads that still run."""
        return await self.recovery.recover(row, prow, pod)

    # -- serving -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Background work while serving: probe the API server, run the start-up checks, watch nodes
        and foreign pods, copy quotas and limits, provision."""
        loop = asyncio.get_running_loop()
        self.monitor.loop = loop
        health = getattr(self.controller, "health", None)
        if health is not None:  # nothing is admitted before the checks ran once
            health.set("startup-checks", "the start-up checks of the cluster have not run yet", log=False)
        tasks = [asyncio.ensure_future(self.monitor.run()), asyncio.ensure_future(self.checks.run()),
                 asyncio.ensure_future(self.dataset_objects.run()), asyncio.ensure_future(self.fluid.follow())]
        self.cluster_nodes.ensure_watched()
        self.ours.watch_pods()
        self.foreign.start(loop)
        last_provision = loop.time()
        try:
            while True:
                await self.foreign.read_limits()
                now = loop.time()
                if self.provision and now - last_provision >= self.provision_interval_seconds:
                    last_provision = now
                    await self.tenants.repair()
                await asyncio.sleep(self.resync_seconds if self.foreign.limits_read else 1.0)
        finally:
            for task in tasks:
                task.cancel()
            for watch in self._watches():
                watch.stop()

    def _watches(self) -> list[Informer]:
        return [w for w in (self.foreign.watch, self.cluster_nodes.watch, *self.ours.watches(),
                            *self.datasets.watches, self.dataset_objects.watch) if w is not None]

    def kick_watches(self) -> None:
        """List again at once (what refused them may have passed), not after their backoff."""
        for watch in self._watches():
            watch.kick()

    @classmethod
    def leader_elector(cls, service, on_started_leading, on_change):
        """With ``TenancyService.leader_election``: a Lease on this backend's cluster (``leader.py``)."""
        return lease_elector(service, on_started_leading, on_change)

    def close(self) -> None:
        """The service is ending: stop the watches (their threads end at once) and the worker pool."""
        for watch in self._watches():
            watch.stop()
        self.datasets.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.training.close()
