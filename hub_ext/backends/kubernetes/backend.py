"""The Kubernetes backend: the engine decides, the cluster runs.

Capacity is the cluster's Nodes. An admitted training pod becomes a batch/v1
Job of one pod (parallelism 1, backoffLimit 0) named after the engine's pod,
with the workload's PriorityClass, resources and command; where the server
does not serve Jobs, a bare Pod. The default kube-scheduler places it (no
``nodeName`` is set). A watcher polls it until it completed, failed or was
deleted and reports the exit to the controller. Victims are evicted through the
Eviction API (``policy/v1``; a plain delete with the grace period where the
server does not serve it) and reported done once the pod is gone.

Notebook pods are created by the spawner; this backend only evicts them (it
deletes the pod labelled for the workload).

Pods without our workload label count as usage (``watch.PodWatch``); the
namespaces' ResourceQuotas and LimitRanges are copied into the engine; tenants
are provisioned from hub groups when ``provision`` is on.

Every API call is made with the synchronous client in a worker thread
(``asyncio.to_thread``), so that the controller's loop never blocks.
"""

from __future__ import annotations

import asyncio
import os

from traitlets import Bool, Dict, Float, Int, List, TraitError, Unicode
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from ...scheduler.model import LIMIT_RANGE, RESOURCE_QUOTA, Reason
from .. import Backend
from .api import POD, Api, Kind, KubernetesError
from .provision import Provisioner
from .quotatree import read_quota_tree
from .watch import PodWatch, apply_limits, holds_room, pod_spec_of, read_limits

JOB = Kind("Job", "batch/v1", "jobs", True)
# The Job controller's labels on its pods; these (unprefixed) names are set by every version
# (the batch.kubernetes.io/ ones only since 1.27).
JOB_NAME_LABEL = "job-name"
JOB_UID_LABEL = "controller-uid"

WORKLOAD_LABEL = "tenancy.jupyter.org/workload"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "jupyterhub-tenancy"
#: exit code reported for a pod deleted under us (as if killed by SIGKILL)
KILLED = 137


class KubernetesBackend(LoggingConfigurable, Backend):
    image = Unicode(
        "python:3.11-slim",
        help="""
        The container image of training pods. The workload's ``command`` runs in it
        (a ``script`` is passed to ``python -c``).
        """,
    ).tag(config=True)

    poll_seconds = Float(
        0.5, help="How often a running pod's phase is read from the API server.",
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
        30.0, help="How often ResourceQuotas, LimitRanges and Nodes are read again.",
    ).tag(config=True)

    relist_seconds = Float(
        300.0,
        help="""
        Pods we did not create are watched; the watch is started again from a fresh list
        this often (or when the server ends it), in case an event was missed.
        """,
    ).tag(config=True)

    quota_tree_object = Unicode(
        "kube-system/",
        help="""
        ``namespace/name`` of the cluster's ``ElasticQuotaTree`` (``namespace/`` for the only
        one there), used when the service has no tree of its own (``TenancyService.tree_file``
        or ``tree``, or one saved by an admin). Empty: never read the tree from the cluster.
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
        self.api = Api(api_client if api_client is not None else self._default_client(), self.request_timeout)
        self._policy_v1: bool | None = None
        self._jobs: bool | None = None
        # engine uid -> the object (Job or Pod) we made for it: its Kubernetes uid and kind
        self._k8s_uids: dict[int, str] = {}
        self._kinds: dict[int, Kind] = {}
        self._creating: dict[int, asyncio.Event] = {}  # set once start() made (or gave up making) it
        self._evicting: set[int] = set()  # evict() reports these; their watchers stay quiet
        self._tenants = None  # the tenants last handed to tenants_changed (None: not known yet)
        self._tenant_key = None
        self._provisioner: Provisioner | None = None
        if self.provision:  # built now: a bad c.Provisioner.* option stops the start, in one line
            try:
                self._provisioner = Provisioner(api_client=self.api.api_client, parent=self)
            except TraitError as err:
                raise ValidationError(f"Provisioner: {' '.join(str(err).split())}") from None
        self._provision_lock = asyncio.Lock()
        self._pod_watch: PodWatch | None = None
        self._limits_applied: dict = {}
        self.synced = asyncio.Event()  # the first read of foreign pods and of quotas and limits is in
        self._listed = self._limits_read = False
        self.provisioned = None  # the last ProvisionResult

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
        return client.ApiClient(configuration)

    def quota_tree(self):
        """(tree, manifest) of the cluster's ElasticQuotaTree, or (None, None) when it has none."""
        if not self.quota_tree_object:
            return None, None
        namespace, _, name = self.quota_tree_object.partition("/")
        return read_quota_tree(self.api.api_client, namespace=namespace or "kube-system", name=name or None)

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
        """Background work while serving: watch foreign pods, copy quotas and limits, provision."""
        if self.count_foreign_pods:
            self._pod_watch = PodWatch(self.api, f"!{WORKLOAD_LABEL}", asyncio.get_running_loop(), self._foreign_event,
                                   timeout_seconds=self.relist_seconds,
                                   log=self.log).start()
        else:
            self._listed = True
        last_provision = asyncio.get_running_loop().time()
        try:
            while True:
                if self.sync_cluster_limits:
                    try:
                        found = await self._call(read_limits, self.api)
                        self._limits_applied = apply_limits(found, self.controller, self._limits_applied, self.log)
                        self._limits_read = True
                    except KubernetesError as err:
                        self.log.warning("reading ResourceQuotas and LimitRanges: %s", err)
                else:
                    self._limits_read = True
                self._check_synced()
                await self._add_new_nodes()
                now = asyncio.get_running_loop().time()
                if self.provision and now - last_provision >= self.provision_interval_seconds:
                    last_provision = now
                    try:
                        await self.provision_now()
                    except Exception:  # noqa: BLE001 - drift repair is retried next time
                        self.log.exception("tenancy provisioning failed")
                await asyncio.sleep(self.resync_seconds)
        finally:
            if self._pod_watch is not None:
                self._pod_watch.stop()

    async def _recount(self, namespaces: list[str]) -> None:
        for namespace in namespaces:
            try:
                pods = await self._call(self.api.list, POD, f"!{WORKLOAD_LABEL}", namespace)
            except KubernetesError as err:
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

    async def _add_new_nodes(self) -> None:
        """Nodes that joined (an autoscaler, an admin) add their capacity; others are kept as they are."""
        try:
            nodes = await self._call(self.nodes)
        except (KubernetesError, ValidationError) as err:
            self.log.warning("reading nodes: %s", err)
            return
        self.controller.add_nodes([n for n in nodes if n.name not in self.controller.engine.cluster.nodes])

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

    # -- capacity -------------------------------------------------------------------
    def nodes(self):
        query = {"labelSelector": self.node_label_selector or None}
        items = self.api.request("GET", "/api/v1/nodes", query=query).get("items") or []
        out = []
        for node in items:
            if (node.get("spec") or {}).get("unschedulable"):
                continue
            meta, status = node.get("metadata") or {}, node.get("status") or {}
            allocatable = {k: v for k, v in (status.get("allocatable") or status.get("capacity") or {}).items()
                           if k != "pods" and not k.startswith("hugepages-")}
            out.append(parse_node({"name": meta["name"], "allocatable": allocatable,
                                   "labels": meta.get("labels") or {}}, f"Node {meta.get('name')}"))
        if not out:
            raise ValidationError("KubernetesBackend: the cluster has no (matching) schedulable Node")
        return out

    # -- helpers ----------------------------------------------------------------------
    async def _call(self, fn, *args, **kwargs):
        return await asyncio.to_thread(fn, *args, **kwargs)

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
        """Whether training pods are made as Jobs. A discovery error is retried for ``retry_seconds``,
        then raised: never guessed (a wrong guess would make a Pod that stop and evict look for as a Job)."""
        deadline = asyncio.get_running_loop().time() + retry_seconds
        while self._jobs is None:
            try:
                self._jobs = self.use_jobs and "jobs" in await self._call(self.api.served_resources, "batch/v1")
            except KubernetesError as err:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                self.log.warning("discovering batch/v1: %s; retrying", err)
                await asyncio.sleep(self.poll_seconds * 4)
        return self._jobs

    async def _create(self, kind: Kind, body: dict, row):
        """Create our object, retrying what may pass a moment later; (object, None) or (None, Reason)."""
        name, namespace = body["metadata"]["name"], row.namespace
        deadline = asyncio.get_running_loop().time() + self.create_retry_seconds
        while True:
            try:
                return await self._call(self.api.create, kind, body), None
            except KubernetesError as err:
                if err.status == 409 and asyncio.get_running_loop().time() <= deadline:
                    existing = await self._existing(kind, namespace, name, row)
                    if existing is not None:
                        return existing, None
                    await asyncio.sleep(self.poll_seconds)
                    continue  # a leftover of ours, finished or deleting, is gone now: create again
                # No answer, throttled, the server failing, or the quota's usage not yet updated
                # after a victim left (the engine checked the quota already): try again, for a while.
                transient = err.status is None or err.status == 429 or err.status >= 500 or \
                    (err.status == 403 and "exceeded quota" in str(err))
                if not transient or asyncio.get_running_loop().time() > deadline:
                    self.log.error("could not create %s %s/%s: %s", kind.name, namespace, name, err)
                    return None, _refusal(name, err)
                await asyncio.sleep(self.poll_seconds * 2)

    async def _existing(self, kind: Kind, namespace: str, name: str, row) -> dict | None:
        """The object of that name if it is ours and still running (a retried start: adopt it);
        otherwise, when it is ours but finished or deleting (a pod queued again after a restart),
        delete it and wait until it is gone, and None. Someone else's: a refusal."""
        obj = await self._call(self.api.read, kind, namespace, name)
        if obj is None:
            return None
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
            raise KubernetesError(f"{kind.name} {namespace}/{name} exists and is not this workload's", 409)
        if not _ended(kind, obj) and not meta.get("deletionTimestamp"):
            return obj
        await self._delete(kind, namespace, name, 0, meta.get("uid"))
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            again = await self._call(self.api.read, kind, namespace, name)
            if again is None or again["metadata"].get("uid") != meta.get("uid"):
                return None
            await asyncio.sleep(self.poll_seconds)
        raise KubernetesError(f"{kind.name} {namespace}/{name}: an old one of ours is not gone after 30 s", 409)

    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner creates the notebook pod
        created = self._creating[pod.uid] = asyncio.Event()
        try:
            try:
                kind = JOB if await self._jobs_served(self.create_retry_seconds) else POD
                body = self.job_manifest(row, pod) if kind is JOB else self.manifest(row, pod)
                obj, refusal = await self._create(kind, body, row)
            except KubernetesError as err:
                obj, refusal = None, _refusal(pod.name, err)
            if obj is not None:
                self._k8s_uids[pod.uid], self._kinds[pod.uid] = obj["metadata"]["uid"], kind
        finally:
            created.set()
            self._creating.pop(pod.uid, None)
        if obj is None:
            self.controller.pod_exited(pod.uid, 127, refusal)
            return
        self.log.info("created %s %s/%s for workload %s", kind.name, row.namespace, pod.name, row.id)
        await self._watch(pod.uid, kind, row.namespace, pod.name, obj["metadata"]["uid"])

    async def _made(self, uid: int) -> None:
        """Wait until a start() in flight for ``uid`` has made its object (or given up)."""
        creating = self._creating.get(uid)
        if creating is not None:
            await creating.wait()

    async def _job_pods(self, namespace: str, job: str, job_uid: str | None = None) -> list[dict]:
        """The pods of our Job (by its uid when known: an older Job of the same name had others)."""
        selector = f"{JOB_UID_LABEL}={job_uid}" if job_uid else f"{JOB_NAME_LABEL}={job}"
        return await self._call(self.api.list, POD, selector, namespace)

    async def _status(self, kind: Kind, namespace: str, name: str, obj: dict, since: float | None):
        """The exit code of our Job or Pod once it ended (None while it runs), or a Reason it never ran for.

        ``since``: when we created it (None: do not look for creation failures)."""
        if kind is POD:
            return _exit_code(obj)
        conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        uid = obj["metadata"].get("uid")
        if "Complete" in conditions or "SuccessCriteriaMet" in conditions:
            return 0
        if "Failed" in conditions or "FailureTarget" in conditions:
            pods = await self._job_pods(namespace, name, uid)
            if any(_exit_code(p) is None for p in pods):
                return None  # its pod is still terminating: it holds its room until it is gone
            codes = [c for c in (_exit_code(p) for p in pods) if c is not None]
            return codes[-1] if codes else KILLED  # its pod was deleted under it: killed, not a program error
        status = obj.get("status") or {}
        waited = None if since is None else asyncio.get_running_loop().time() - since
        if waited is not None and waited > self.create_failure_seconds and \
                not (status.get("active") or status.get("succeeded") or status.get("failed")):
            # No pod yet: the Job controller may be refused (a LimitRange, a ResourceQuota, an invalid spec).
            events = await self._call(self.api.request, "GET", f"/api/v1/namespaces/{namespace}/events",
                                      query={"fieldSelector": f"involvedObject.uid={uid},reason=FailedCreate"})
            for event in events.get("items") or []:
                # e.g. 'Error creating: pods "x" is forbidden: exceeded quota: ...' or '... is invalid: ...'
                message = " ".join((event.get("message") or "").split()).removeprefix("Error creating: ")
                # A quota may free up (the Job controller retries); the rest will not.
                if "exceeded quota" not in message or waited > self.create_retry_seconds:
                    return _refusal(name, KubernetesError(message, None))
        return None

    async def _watch(self, uid: int, kind: Kind, namespace: str, name: str, k8s_uid: str) -> None:
        """Poll until the Job (or Pod) ended or is gone; then tell the controller (unless it is
        being evicted: evict() reports that, once the pod is really gone)."""
        since = asyncio.get_running_loop().time()
        reason = None
        while True:
            try:
                obj = await self._call(self.api.read, kind, namespace, name)
                if obj is None or obj["metadata"].get("uid") != k8s_uid:
                    code = KILLED
                    break
                code = await self._status(kind, namespace, name, obj, since)
                if isinstance(code, Reason):
                    code, reason = 1, code
                    await self._delete(kind, namespace, name, 0, k8s_uid)
            except KubernetesError as err:
                self.log.warning("reading %s %s/%s: %s", kind.name, namespace, name, err)
                if reason is None:  # not the delete after a refusal: the read failed, try again
                    code = None
            if code is not None:
                break
            await asyncio.sleep(self.poll_seconds)
        if uid in self._evicting or self._k8s_uids.get(uid) != k8s_uid:
            return  # evict() reports it; or stopped by us, or replaced (a pod queued again runs anew)
        self._k8s_uids.pop(uid, None)
        self._kinds.pop(uid, None)
        self.controller.pod_exited(uid, code, reason)

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
                self.log.warning("eviction of %s/%s refused (%s); deleting it", namespace, name, err)
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
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                obj = await self._read(namespace, name)
            except KubernetesError as err:
                self.log.warning("reading pod %s/%s: %s", namespace, name, err)
                obj = {"metadata": {"uid": k8s_uid}}
            if obj is None or (k8s_uid and obj["metadata"].get("uid") != k8s_uid):
                return True
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(self.poll_seconds)

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
        self.controller.eviction_done(pod.uid)

    async def stop(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            await self._stop_notebook(row)
            return
        await self._made(pod.uid)
        kind, k8s_uid = self._kinds.pop(pod.uid, None), self._k8s_uids.pop(pod.uid, None)
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
            code = await self._status(kind, row.namespace, prow.name, obj, None)
            if code is not None:
                return ("exited", code)
            if kind is POD and (obj.get("status") or {}).get("phase") not in ("Running", "Pending"):
                return "gone"
            self._k8s_uids[pod.uid], self._kinds[pod.uid] = obj["metadata"]["uid"], kind
            self.controller._spawn(self._watch(pod.uid, kind, row.namespace, prow.name, obj["metadata"]["uid"]))
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


def _exit_code(obj: dict) -> int | None:
    """The exit code of an ended pod (None while it has not ended)."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase not in ("Succeeded", "Failed"):
        return None
    for cs in status.get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            code = int(terminated["exitCode"])
            if phase == "Failed" and code == 0:
                return 1
            return code
    return 0 if phase == "Succeeded" else 1
