"""The Kubernetes backend's calls to the API server: blocking ones, made off the event loop.

The ``kubernetes`` client is synchronous; every call of the backend's rooms runs in
the backend's own worker pool (``Calls.call``), so the controller's loop never
blocks, and every failed call is told to the ``ApiMonitor``, which logs an outage
once, not once per call. The few calls several rooms make live here too: a delete
with the uid as a precondition, and the pods of one Job or one notebook.
"""

from __future__ import annotations

import asyncio
import functools

from .api import POD, Kind, KubernetesError
from .informer import outage_error
from .objects import JOB_NAME_LABEL, JOB_UID_LABEL, WORKLOAD_LABEL


class Calls:
    """The backend's worker pool, API and monitor, as every room calls through them."""

    def __init__(self, backend):
        self.backend = backend  # its worker pool, API, monitor, log and poll_seconds

    async def call(self, fn, *args, **kwargs):
        """``fn(*args)`` in the backend's worker pool; an outage is counted by the monitor (which logs
        it once) before the error is raised to the caller."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self.backend._executor,
                                                                    functools.partial(fn, *args, **kwargs))
        except KubernetesError as err:
            self.backend.monitor.failed(err)
            raise

    def warn(self, message: str, *args, err: KubernetesError) -> None:
        """Log a failed call, unless it is part of an outage (the monitor logs that, once)."""
        if not outage_error(err):
            self.backend.log.warning(message, *args, err)

    def on_loop(self, fn, *args, **kwargs) -> None:
        """Run ``fn`` on the event loop (from a worker thread)."""
        loop = self.backend.monitor.loop
        if loop is None:
            fn(*args, **kwargs)
        else:
            loop.call_soon_threadsafe(functools.partial(fn, *args, **kwargs))

    async def until_up(self) -> None:
        """Wait while the API server does not answer (the monitor probes it)."""
        monitor = self.backend.monitor
        while not monitor.up:
            if monitor.loop is None:  # not serving (no probe runs): probe here
                await self.call(monitor.probe)
            await asyncio.sleep(max(self.backend.poll_seconds, 1.0))

    async def read_pod(self, namespace: str, name: str) -> dict | None:
        return await self.call(self.backend.api.read, POD, namespace, name)

    async def delete(self, kind: Kind, namespace: str, name: str, grace: int, k8s_uid: str | None = None) -> None:
        """Delete in the background with this grace period (only that object, when ``k8s_uid`` is given);
        one already gone, or replaced, is fine."""
        body = {"gracePeriodSeconds": grace, "propagationPolicy": "Background"}
        if k8s_uid:
            body["preconditions"] = {"uid": k8s_uid}
        try:
            await self.call(self.backend.api.request, "DELETE", kind.path(namespace, name), body=body)
        except KubernetesError as err:
            if err.status not in (404, 409):
                raise

    async def job_pods(self, namespace: str, job: str, job_uid: str | None = None) -> list[dict]:
        """The pods of our Job (by its uid when known: an older Job of the same name had others)."""
        selector = f"{JOB_UID_LABEL}={job_uid}" if job_uid else f"{JOB_NAME_LABEL}={job}"
        return await self.call(self.backend.api.list, POD, selector, namespace)

    async def notebook_pods(self, row) -> list[dict]:
        """The pods the spawner made for a notebook workload (labelled with its id)."""
        return await self.call(self.backend.api.list, POD, f"{WORKLOAD_LABEL}={row.id}", row.namespace)
