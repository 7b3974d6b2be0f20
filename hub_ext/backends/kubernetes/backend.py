"""The Kubernetes backend: the engine decides, the cluster runs.

Capacity is the cluster's Nodes. An admitted training pod becomes a bare Pod in
the workload's namespace, named after the engine's pod, with the workload's
PriorityClass, resources and command; the default kube-scheduler places it (no
``nodeName`` is set). A watcher polls the pod until it Succeeded, Failed or was
deleted and reports the exit to the controller. Victims are evicted through the
Eviction API (``policy/v1``; a plain delete with the grace period where the
server does not serve it) and reported done once the pod is gone.

Notebook pods are created by the spawner; this backend only evicts them (it
deletes the pod labelled for the workload).

Every API call is made with the synchronous client in a worker thread
(``asyncio.to_thread``), so that the controller's loop never blocks.
"""

from __future__ import annotations

import asyncio

from traitlets import Dict, Float, Int, List, Unicode
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.nodes import parse_node
from .. import Backend
from .api import POD, Api, KubernetesError

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

    def __init__(self, api_client=None, **kwargs):
        super().__init__(**kwargs)
        if api_client is None:
            raise ValidationError("KubernetesBackend needs a kubernetes.client.ApiClient")
        self.api = Api(api_client)
        self._policy_v1: bool | None = None
        # engine uid -> Kubernetes uid of the pod we created for it
        self._k8s_uids: dict[int, str] = {}

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

    # -- training pods ------------------------------------------------------------------
    async def start(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner creates the notebook pod
        try:
            created = await self._call(self.api.create, POD, self.manifest(row, pod))
        except KubernetesError as err:
            if err.status == 409:  # a pod of that name is there already (a retried start): adopt it if ours
                created = await self._read(row.namespace, pod.name)
                labels = ((created or {}).get("metadata") or {}).get("labels") or {}
                if labels.get(WORKLOAD_LABEL) != row.id:
                    created = None
            else:
                created = None
            if created is None:
                self.log.error("could not create pod %s/%s: %s", row.namespace, pod.name, err)
                self.controller.pod_exited(pod.uid, 127)
                return
        uid = created["metadata"]["uid"]
        self._k8s_uids[pod.uid] = uid
        self.log.info("created pod %s/%s for workload %s", row.namespace, pod.name, row.id)
        await self._watch(pod.uid, row.namespace, pod.name, uid)

    async def _watch(self, uid: int, namespace: str, name: str, k8s_uid: str) -> None:
        """Poll until the pod ended or is gone; then tell the controller."""
        while True:
            try:
                obj = await self._read(namespace, name)
            except KubernetesError as err:
                self.log.warning("reading pod %s/%s: %s", namespace, name, err)
                await asyncio.sleep(self.poll_seconds)
                continue
            if obj is None or obj["metadata"].get("uid") != k8s_uid:
                code = KILLED
                break
            code = _exit_code(obj)
            if code is not None:
                break
            await asyncio.sleep(self.poll_seconds)
        if self._k8s_uids.get(uid) == k8s_uid:
            self._k8s_uids.pop(uid, None)
        self.controller.pod_exited(uid, code)

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
        await self._delete(namespace, name, grace)

    async def _delete(self, namespace: str, name: str, grace: int, k8s_uid: str | None = None) -> None:
        body = {"gracePeriodSeconds": grace, "propagationPolicy": "Background"}
        if k8s_uid:
            body["preconditions"] = {"uid": k8s_uid}
        try:
            await self._call(self.api.request, "DELETE", POD.path(namespace, name), body=body)
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

    async def evict(self, row, pod, prow, grace: float, reason) -> None:
        grace_s = max(0, int(round(grace)))
        try:
            if row.kind == "notebook":
                await self._evict_notebook(row, grace_s)
            else:
                k8s_uid = self._k8s_uids.get(pod.uid)
                await self._evict_pod(row.namespace, pod.name, grace_s)
                if not await self._wait_gone(row.namespace, pod.name, k8s_uid, grace_s + self.gone_timeout_seconds):
                    await self._delete(row.namespace, pod.name, 0, k8s_uid)
                    await self._wait_gone(row.namespace, pod.name, k8s_uid, 30)
        except KubernetesError as err:  # the eviction completes either way: the engine already decided
            self.log.error("evicting %s/%s: %s", row.namespace, pod.name, err)
        self.controller.eviction_done(pod.uid)

    async def _evict_notebook(self, row, grace: int) -> None:
        selector = f"{WORKLOAD_LABEL}={row.id}"
        pods = await self._call(self.api.list, POD, selector, row.namespace)
        for obj in pods:
            meta = obj["metadata"]
            await self._evict_pod(row.namespace, meta["name"], grace)
        for obj in pods:
            meta = obj["metadata"]
            await self._wait_gone(row.namespace, meta["name"], meta.get("uid"), grace + self.gone_timeout_seconds)

    async def stop(self, row, pod, prow) -> None:
        if row.kind == "notebook":
            return  # the spawner stops notebook pods
        try:
            await self._delete(row.namespace, pod.name, self.stop_grace_seconds, self._k8s_uids.get(pod.uid))
        except KubernetesError as err:
            self.log.error("deleting %s/%s: %s", row.namespace, pod.name, err)

    async def recover(self, row, prow, pod):
        """``"running"``, ``("exited", code)`` or ``"gone"`` for a pod that ran before a restart."""
        if row.kind == "notebook":
            selector = f"{WORKLOAD_LABEL}={row.id}"
            try:
                pods = await self._call(self.api.list, POD, selector, row.namespace)
            except KubernetesError:
                return "gone"
            live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                    and not p["metadata"].get("deletionTimestamp")]
            return "running" if live else "gone"
        obj = await self._read(row.namespace, prow.name)
        if obj is None or (obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
            return "gone"
        phase = (obj.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return ("exited", 0)
        if phase == "Failed":
            code = _exit_code(obj)
            return ("exited", code if code else 1)
        if obj["metadata"].get("deletionTimestamp"):
            return "gone"
        if phase in ("Running", "Pending"):
            self._k8s_uids[pod.uid] = obj["metadata"]["uid"]
            self.controller._spawn(self._watch(pod.uid, row.namespace, prow.name, obj["metadata"]["uid"]))
            return "running"
        return "gone"

    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        if row.kind == "notebook" or not prow.name:
            return ""
        try:
            data = self.api.api_client.call_api(
                *self.api.api_client.param_serialize(
                    method="GET", resource_path=POD.path(row.namespace, prow.name) + "/log",
                    query_params=[("limitBytes", tail_bytes)], header_params={"Accept": "*/*"},
                    auth_settings=["BearerToken"]))
            return data.read().decode("utf-8", "replace") if 200 <= data.status < 300 else ""
        except Exception:  # noqa: BLE001 - logs are best effort (kwok runs no containers)
            return ""


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
