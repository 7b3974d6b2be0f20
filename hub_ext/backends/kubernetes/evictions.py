"""Taking pods off the cluster: victims evicted, cancelled work stopped, what lost pods left deleted.

Victims are evicted through the Eviction API (``policy/v1``; a plain delete with
the grace period where the server does not serve it, or a PodDisruptionBudget
refuses it: the engine's decision stands) and reported done once the pod is gone
(told by the watch of our pods; notebook pods, which the spawner made, are read
again). A pod still there ``gone_timeout_seconds`` after its grace period is
deleted with a zero grace period. Notebook pods are only ever evicted or
stopped here: a cancelled notebook's server is stopped through the hub, and its
pods deleted in any case.
"""

from __future__ import annotations

import asyncio

from .api import JOB, POD, Kind, KubernetesError
from .follow import wait_event


class Evictions:
    """How a ``KubernetesBackend`` evicts, stops and forgets the pods of workloads."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller, hub, calls and ``ours``
        self.policy_v1: bool | None = None  # whether policy/v1 (the Eviction API) is served; None: not asked yet

    async def evict(self, row, pod, grace: float) -> None:
        """Evict the pod of a victim (a notebook's pods, or our Job's or Pod's) and report it done."""
        backend, ours = self.backend, self.backend.ours
        grace_s = max(0, int(round(grace)))
        ours.evicting.add(pod.uid)
        f = ours.followed.get(pod.uid)
        if f is not None:
            f.changed.set()  # its follower ends quietly: this reports
        try:
            if row.kind == "notebook":
                pods = await backend.calls.notebook_pods(row)
                await self._evict_all(row.namespace, pods, grace_s)
            else:
                await ours.made(pod.uid)
                kind, k8s_uid = ours.kinds.get(pod.uid), ours.k8s_uids.get(pod.uid)
                if kind is JOB:
                    # The Job's pod goes through the Eviction API; the Job (backoffLimit 0) then fails
                    # without a new pod, and is deleted: the engine queues a new pod when it decides so.
                    pods = await backend.calls.job_pods(row.namespace, pod.name, k8s_uid)
                    await self._evict_all(row.namespace, pods, grace_s)
                    await backend.calls.delete(JOB, row.namespace, pod.name, 0, k8s_uid)
                elif kind is POD:
                    await self._evict_all(row.namespace, [{"metadata": {"name": pod.name, "uid": k8s_uid}}], grace_s)
        except KubernetesError as err:  # the eviction completes either way: the engine already decided
            backend.log.error("evicting %s/%s: %s", row.namespace, pod.name, err)
        finally:
            ours.evicting.discard(pod.uid)
            ours.k8s_uids.pop(pod.uid, None)
            ours.kinds.pop(pod.uid, None)
            if f is not None:
                ours.unregister(f)
        backend.controller.eviction_done(pod.uid)

    async def stop(self, row, pod) -> None:
        """Delete a cancelled workload's pod now, with ``stop_grace_seconds``."""
        if row.kind == "notebook":
            await self._stop_notebook(row)
            return
        backend, ours, calls = self.backend, self.backend.ours, self.backend.calls
        await ours.made(pod.uid)
        kind, k8s_uid = ours.kinds.pop(pod.uid, None), ours.k8s_uids.pop(pod.uid, None)
        f = ours.followed.get(pod.uid)
        if f is not None:
            ours.unregister(f)
        grace = backend.stop_grace_seconds
        try:
            if kind is JOB:
                pods = await calls.job_pods(row.namespace, pod.name, k8s_uid)
                await calls.delete(JOB, row.namespace, pod.name, grace, k8s_uid)
                for obj in pods:  # with the cancel's grace period, not the garbage collector's
                    await calls.delete(POD, row.namespace, obj["metadata"]["name"], grace)
            elif kind is POD:
                await calls.delete(POD, row.namespace, pod.name, grace, k8s_uid)
        except KubernetesError as err:
            backend.log.error("deleting %s/%s: %s", row.namespace, pod.name, err)

    async def forget(self, row, pod) -> None:
        """A pod the controller queued again because it was lost: delete what is left of its object
        with a zero grace period (never adopted by the next start), quietly."""
        ours = self.backend.ours
        await ours.made(pod.uid)
        kind, k8s_uid = ours.kinds.pop(pod.uid, None), ours.k8s_uids.pop(pod.uid, None)
        f = ours.followed.get(pod.uid)
        if f is not None:
            ours.unregister(f)
        if kind is None or row.kind == "notebook":
            return  # nothing of ours made, or the follower took it and discards it
        await self.discard(kind, row.namespace, pod.name, k8s_uid)

    async def discard(self, kind: Kind, namespace: str, name: str, k8s_uid: str | None) -> None:
        """Delete the object of a lost pod, and its Job's pods, with a zero grace period; never adopted."""
        calls = self.backend.calls
        self.backend.ours.forgotten[(namespace, name)] = k8s_uid
        try:
            await calls.delete(kind, namespace, name, 0, k8s_uid)
            if kind is JOB:
                for obj in await calls.job_pods(namespace, name, k8s_uid):
                    await calls.delete(POD, namespace, obj["metadata"]["name"], 0, obj["metadata"].get("uid"))
        except KubernetesError as err:
            calls.warn("deleting %s/%s: %s", namespace, name, err=err)

    # -- one pod ---------------------------------------------------------------------------
    async def _policy_served(self) -> bool:
        if self.policy_v1 is None:
            try:
                served = await self.backend.calls.call(self.backend.api.served_resources, "policy/v1")
            except KubernetesError:
                served = set()
            self.policy_v1 = bool(served)  # policy/v1 is served: pods/eviction takes an Eviction of that version
        return self.policy_v1

    async def _evict_pod(self, namespace: str, name: str, grace: int) -> None:
        """Evict through the Eviction API, or delete where it is not served; a pod already gone is fine."""
        calls = self.backend.calls
        if await self._policy_served():
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                    "deleteOptions": {"gracePeriodSeconds": grace}}
            try:
                await calls.call(self.backend.api.request, "POST", POD.path(namespace, name) + "/eviction", body=body)
                return
            except KubernetesError as err:
                if err.status == 404:
                    return
                # 429: a PodDisruptionBudget refuses it. The engine's decision stands: delete.
                calls.warn("eviction of %s/%s refused (%s); deleting it", namespace, name, err=err)
        await calls.delete(POD, namespace, name, grace)

    async def _wait_gone(self, namespace: str, name: str, k8s_uid: str | None, timeout: float) -> bool:
        """Whether the pod is gone within ``timeout``: told by the watch for pods of ours, read again
        every ``poll_seconds`` for others (notebook pods)."""
        backend, ours = self.backend, self.backend.ours
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        key = (namespace, name)
        watched = ours.watching(key)
        while True:
            if watched:
                obj = ours.pods.get(key)
            else:
                try:
                    obj = await backend.calls.read_pod(namespace, name)
                except KubernetesError as err:
                    backend.calls.warn("reading pod %s/%s: %s", namespace, name, err=err)
                    obj = {"metadata": {"uid": k8s_uid}}
            if obj is None or (k8s_uid and obj["metadata"].get("uid") != k8s_uid):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            if watched:
                waiter = ours.gone_waiters.setdefault(key, asyncio.Event())
                if not await wait_event(waiter, min(left, 10.0)):
                    watched = False  # read it once (the watch may be away), then trust the watch again
                    continue
            else:
                await asyncio.sleep(backend.poll_seconds)
                watched = ours.watching(key)

    async def _evict_all(self, namespace: str, pods: list[dict], grace: int) -> None:
        """Evict these pods with the grace period; whatever still runs after it (plus the timeout) is deleted now."""
        backend = self.backend
        for obj in pods:
            await self._evict_pod(namespace, obj["metadata"]["name"], grace)
        for obj in pods:
            meta = obj["metadata"]
            if not await self._wait_gone(namespace, meta["name"], meta.get("uid"), grace + backend.gone_timeout_seconds):
                await backend.calls.delete(POD, namespace, meta["name"], 0, meta.get("uid"))
                await self._wait_gone(namespace, meta["name"], meta.get("uid"), 30)

    async def _stop_notebook(self, row) -> None:
        """The notebook was cancelled through the API (or ended): its server goes too, or its room
        would be used twice. The hub stops it (and then knows); its pods are deleted in any case."""
        backend = self.backend
        server = row.spec.get("serverName") or ""
        if backend.hub is not None and backend.hub.configured:
            try:
                await backend.hub.stop_server(row.user, server)
            except Exception as err:  # noqa: BLE001 - the pods go below anyway
                backend.log.warning("could not stop %s's server %r through the hub: %s", row.user, server, err)
        try:
            for obj in await backend.calls.notebook_pods(row):
                await backend.calls.delete(POD, row.namespace, obj["metadata"]["name"], backend.stop_grace_seconds,
                                           obj["metadata"].get("uid"))
        except KubernetesError as err:
            backend.log.error("deleting the pods of notebook %s/%s: %s", row.namespace, row.name, err)
