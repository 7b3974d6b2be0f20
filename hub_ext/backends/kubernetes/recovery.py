"""After a restart: what became of the pods that ran before, read back from the cluster.

A training pod's Job (or, started before an upgrade to Jobs, bare Pod) still
running is adopted and followed again; one that ended while the service was
away reports its exit code; one deleted, or never made, is gone. A notebook is
running while a pod labelled for its workload is Pending or Running. An API
error is raised, never taken for "gone": the service then fails to start (and
is started again) rather than forgetting workloads that still run.
"""

from __future__ import annotations

from .api import JOB, POD, Kind
from .follow import KILLED, Followed, exit_code
from .objects import WORKLOAD_LABEL


class Recovery:
    """How a ``KubernetesBackend`` finds its pods again after a restart."""

    def __init__(self, backend):
        self.backend = backend  # its controller, calls, ``ours``, ``training`` and ``follower``

    async def recover(self, row, prow, pod):
        """``"running"``, ``("exited", code)`` or ``"gone"`` for a pod that ran before a restart."""
        backend, ours = self.backend, self.backend.ours
        if row.kind == "notebook":
            pods = await backend.calls.notebook_pods(row)
            live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")
                    and not p["metadata"].get("deletionTimestamp")]
            return "running" if live else "gone"
        # A pod started before an upgrade to Jobs is a bare Pod: look for both.
        for kind in ((JOB, POD) if await backend.training.jobs_served(backend.create_retry_seconds) else (POD,)):
            obj = await backend.calls.call(backend.api.read, kind, row.namespace, prow.name)
            if obj is None or (obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL) != row.id:
                continue
            if obj["metadata"].get("deletionTimestamp"):
                return "gone"
            code = await self._status(kind, row.namespace, prow.name, obj)
            if code is not None:
                return ("exited", code)
            if kind is POD and (obj.get("status") or {}).get("phase") not in ("Running", "Pending"):
                return "gone"
            ours.k8s_uids[pod.uid], ours.kinds[pod.uid] = obj["metadata"]["uid"], kind
            ours.watch_pods()
            if kind is JOB:
                ours.watch_jobs()
            known = ours.followed.get(pod.uid)
            if known is None or known.k8s_uid != obj["metadata"]["uid"]:  # not followed already
                f = ours.register(Followed(pod.uid, kind, row.namespace, prow.name, obj["metadata"]["uid"]))
                backend.controller._spawn(backend.follower.follow(f, None))
            return "running"
        return "gone"

    async def _status(self, kind: Kind, namespace: str, name: str, obj: dict):
        """The exit code of our Job or Pod once it ended (None while it runs)."""
        if kind is POD:
            return exit_code(obj)
        conditions = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        if conditions & {"Complete", "SuccessCriteriaMet"}:
            return 0
        if conditions & {"Failed", "FailureTarget"}:
            pods = await self.backend.calls.job_pods(namespace, name, obj["metadata"].get("uid"))
            if any(exit_code(p) is None for p in pods):
                return None  # its pod is still terminating: it holds its room until it is gone
            codes = [c for c in (exit_code(p) for p in pods) if c is not None]
            return codes[-1] if codes else KILLED  # its pod was deleted under it: killed, not a program error
        return None
