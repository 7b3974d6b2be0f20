"""Making training pods on the cluster: their manifests, their creates, and what they printed.

An admitted training pod becomes a batch/v1 Job of one pod (parallelism 1,
backoffLimit 0) named after the engine's pod, with the workload's
PriorityClass, resources and command, mounting the datasets the workload uses
(``controller.datasets.uses(row)``, with ``TENANCY_DATASETS``); where the server does not serve Jobs (or
``use_jobs`` is off), a bare Pod. The default kube-scheduler places it (no
``nodeName`` is set). Creates go through a bounded pool of ``create_concurrency``
at once and are retried while what refused them may pass a moment later; a
leftover of ours of the same name is adopted (still running) or deleted first.
Once made, the pod is followed (``follow.Follower``).

The manifests are made through the backend's ``manifest`` and ``job_manifest``:
a subclass changes them there (``replay.service.ReplayBackend`` does).
"""

from __future__ import annotations

import asyncio

from .api import JOB, POD, Kind, KubernetesError
from .follow import Followed, ended, refusal
from .informer import outage_error
from . import mounts
from .objects import JOB_NAME_LABEL, MANAGED_BY, MANAGER, WORKLOAD_LABEL
from .stagelog import StageLog


class Training:
    """How a ``KubernetesBackend`` makes training pods (Jobs or bare Pods)."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller, calls, ``ours`` and ``follower``
        self.jobs: bool | None = None  # whether training pods are made as Jobs (None: not discovered yet)
        self.slots: asyncio.Semaphore | None = None  # made on the loop, at the first create
        # the benchmark's record of each create, only where ``stage_log`` names its file
        self.stages = StageLog(backend.stage_log) if backend.stage_log else None

    # -- manifests -------------------------------------------------------------------------
    def labels(self, row) -> dict:
        return {**self.backend.extra_labels, WORKLOAD_LABEL: row.id, MANAGED_BY: MANAGER}

    def manifest(self, row, pod) -> dict:
        """The Pod for an admitted training pod."""
        backend, spec = self.backend, row.spec
        command = list(spec["command"]) if spec.get("command") else ["python", "-c", spec.get("script", "")]
        resources = {k: v for k, v in (spec.get("resources") or {}).items() if v}
        uses = self.uses(row)
        env = [{"name": k, "value": str(v)} for k, v in (spec.get("env") or {}).items() if k != mounts.ENV]
        env += [{"name": "TENANCY_WORKLOAD", "value": row.name}, {"name": "TENANCY_WORKLOAD_ID", "value": row.id},
                {"name": "TENANCY_NAMESPACE", "value": row.namespace}, {"name": "TENANCY_POD", "value": pod.name},
                {"name": "TENANCY_REPLICAS", "value": str(spec.get("replicas", 1))},
                {"name": mounts.ENV, "value": mounts.env_value(uses)}]
        container = {"name": row.kind, "image": backend.image, "command": command, "resources": resources, "env": env}
        pod_spec = {"restartPolicy": "Never", "priorityClassName": spec["priorityClassName"], "containers": [container]}
        if uses:
            pod_spec["volumes"] = mounts.volumes(uses)
            container["volumeMounts"] = mounts.volume_mounts(uses)
        if spec.get("gracePeriodSeconds") is not None:
            pod_spec["terminationGracePeriodSeconds"] = spec["gracePeriodSeconds"]
        if backend.node_selector:
            pod_spec["nodeSelector"] = dict(backend.node_selector)
        if backend.tolerations:
            pod_spec["tolerations"] = [dict(t) for t in backend.tolerations]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod.name, "namespace": row.namespace, "labels": self.labels(row)},
                "spec": pod_spec}

    def uses(self, row) -> list[dict]:
        """What the workload mounts (the service's word: ``controller.datasets.uses``)."""
        room = self.backend.datasets_room
        return list(room.uses(row)) if room is not None else []

    def job_manifest(self, row, pod) -> dict:
        """The Job for an admitted training pod: exactly one pod, never retried by the Job controller
        (the engine decides whether a pod runs again)."""
        template = self.backend.manifest(row, pod)  # as a subclass of the backend makes it
        meta = template["metadata"]
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": pod.name, "namespace": row.namespace, "labels": dict(meta["labels"])},
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                         "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": template["spec"]}}}

    # -- creating --------------------------------------------------------------------------
    async def jobs_served(self, retry_seconds: float = 0.0) -> bool:
        """Whether training pods are made as Jobs. A discovery error is retried for ``retry_seconds``
        (for as long as the API server does not answer at all), then raised: never guessed (a wrong
        guess would make a Pod that stop and evict look for as a Job)."""
        backend = self.backend
        deadline = asyncio.get_running_loop().time() + retry_seconds
        while self.jobs is None:
            try:
                self.jobs = backend.use_jobs and "jobs" in await backend.calls.call(backend.api.served_resources,
                                                                                   "batch/v1")
            except KubernetesError as err:
                if outage_error(err):
                    await backend.calls.until_up()
                    continue
                if asyncio.get_running_loop().time() > deadline:
                    raise
                backend.log.warning("discovering batch/v1: %s; retrying", err)
                await asyncio.sleep(backend.poll_seconds * 4)
        return self.jobs

    def admitted(self, pod) -> None:
        """Shown Pending from the moment it is admitted: never Running before the cluster says so."""
        kind = POD if self.jobs is False or not self.backend.use_jobs else JOB
        observe = getattr(self.backend.controller, "pod_observed", None)
        if observe is not None:
            # the pass tells the listeners of what it admitted, once (a view each here, mid-pass, would
            # work out the queue's positions again for every pod admitted)
            observe(pod.uid, "Pending", None, f"its {kind.name} is being created on the cluster", notify=False)

    async def start(self, row, pod) -> None:
        """Make the Job (or Pod) of an admitted training pod, then follow it until it ends; a create
        refused for good ends the pod with the API server's words."""
        backend, ours = self.backend, self.backend.ours
        if self.stages is not None:
            self.stages.started(row.namespace, pod.name)
        ours.watch_pods()
        created = ours.creating[pod.uid] = asyncio.Event()
        f = None
        try:
            try:
                kind = JOB if await self.jobs_served(backend.create_retry_seconds) else POD
                if kind is JOB:
                    ours.watch_jobs()
                f = ours.register(Followed(pod.uid, kind, row.namespace, pod.name))
                # admitted, not on the cluster yet: never shown Running before the cluster says so
                backend.follower.observed(f, "Pending", None, f"its {kind.name} is being created on the cluster")
                body = backend.job_manifest(row, pod) if kind is JOB else backend.manifest(row, pod)
                obj, refused = await self.create(kind, body, row)
            except KubernetesError as err:
                obj, refused = None, refusal(pod.name, err)
            if obj is not None:
                ours.k8s_uids[pod.uid], ours.kinds[pod.uid] = obj["metadata"]["uid"], kind
                f.k8s_uid = obj["metadata"]["uid"]
        finally:
            created.set()
            ours.creating.pop(pod.uid, None)
        if obj is None:
            if f is not None:
                ours.unregister(f)
            backend.controller.pod_exited(pod.uid, 127, refused)
            return
        backend.log.debug("created %s %s/%s for workload %s", kind.name, row.namespace, pod.name, row.id)
        await backend.follower.follow(f, asyncio.get_running_loop().time())

    def _slots(self) -> asyncio.Semaphore:
        if self.slots is None:
            self.slots = asyncio.Semaphore(max(1, self.backend.create_concurrency))
        return self.slots

    async def create(self, kind: Kind, body: dict, row):
        """Create our object, retrying what may pass a moment later; (object, None) or (None, Reason).

        While the API server does not answer at all the create waits (it is not refused for that);
        a throttle (429), a 5xx or a quota still counting a victim is retried for
        ``create_retry_seconds``."""
        backend, calls = self.backend, self.backend.calls
        name, namespace = body["metadata"]["name"], row.namespace
        deadline = asyncio.get_running_loop().time() + backend.create_retry_seconds
        while True:
            try:
                async with self._slots():
                    if self.stages is not None:
                        return await self.stages.create(calls, backend.api.create, kind, body), None
                    return await calls.call(backend.api.create, kind, body), None
            except KubernetesError as err:
                if err.status == 409 and asyncio.get_running_loop().time() <= deadline:
                    existing = await self.existing(kind, namespace, name, row)
                    if existing is not None:
                        return existing, None
                    await asyncio.sleep(backend.poll_seconds)
                    continue  # a leftover of ours, finished or deleting, is gone now: create again
                if err.status is None:
                    await calls.until_up()
                    deadline = asyncio.get_running_loop().time() + backend.create_retry_seconds
                    continue
                # Throttled, the server failing, or the quota's usage not yet updated after a victim
                # left (the engine checked the quota already): try again, for a while.
                transient = err.status == 429 or err.status >= 500 or \
                    (err.status == 403 and "exceeded quota" in str(err))
                if not transient or asyncio.get_running_loop().time() > deadline:
                    backend.log.error("could not create %s %s/%s: %s", kind.name, namespace, name, err)
                    return None, refusal(name, err)
                await asyncio.sleep(backend.poll_seconds * 2)

    async def existing(self, kind: Kind, namespace: str, name: str, row) -> dict | None:
        """The object of that name if it is ours and still running (a retried start: adopt it);
        otherwise, when it is ours but finished, deleting or left by a lost pod, delete it and wait
        until it is gone, and None. Someone else's: a refusal."""
        backend, calls, forgotten = self.backend, self.backend.calls, self.backend.ours.forgotten
        obj = await calls.call(backend.api.read, kind, namespace, name)
        if obj is None:
            return None
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
            raise KubernetesError(f"{kind.name} {namespace}/{name} exists and is not this workload's", 409)
        lost = forgotten.get((namespace, name)) == meta.get("uid")
        if not lost and not ended(kind, obj) and not meta.get("deletionTimestamp"):
            return obj
        await calls.delete(kind, namespace, name, 0, meta.get("uid"))
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            again = await calls.call(backend.api.read, kind, namespace, name)
            if again is None or again["metadata"].get("uid") != meta.get("uid"):
                forgotten.pop((namespace, name), None)
                return None
            await asyncio.sleep(backend.poll_seconds)
        raise KubernetesError(f"{kind.name} {namespace}/{name}: an old one of ours is not gone after 30 s", 409)

    # -- reading ---------------------------------------------------------------------------
    def logs(self, row, prow, tail_bytes: int = 1_000_000) -> str:
        """What the training pod printed, read from the cluster (``kubectl logs``)."""
        if row.kind == "notebook" or not prow.name:
            return ""
        backend, api = self.backend, self.backend.api
        name = prow.name
        try:
            if backend.use_jobs and self.jobs is not False:
                pods = api.list(POD, f"{JOB_NAME_LABEL}={prow.name}", row.namespace)
                if pods:
                    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
                    name = pods[-1]["metadata"]["name"]
            resp = api.api_client.call_api(
                *api.api_client.param_serialize(
                    method="GET", resource_path=POD.path(row.namespace, name) + "/log",
                    query_params=[("limitBytes", tail_bytes)], header_params={"Accept": "*/*"},
                    auth_settings=["BearerToken"]))
            return resp.read().decode("utf-8", "replace") if 200 <= resp.status < 300 else ""
        except Exception as err:  # noqa: BLE001 - logs are best effort
            backend.log.warning("logs of %s/%s: %s", row.namespace, name, " ".join(str(err).split())[:200])
            return ""

    def close(self) -> None:
        """The service is ending: the benchmark's record of creates, if any, is closed."""
        if self.stages is not None:
            self.stages.close()
