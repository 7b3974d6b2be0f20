"""Where workloads really run. A backend starts admitted pods, evicts victims gracefully and reports exits.

The controller calls a backend; a backend calls back ``Controller.pod_exited``
and ``Controller.eviction_done``. ``local`` runs processes on this machine;
``kubernetes`` (a later issue) creates pods on a cluster.
"""

from __future__ import annotations


class Backend:
    """The interface the controller drives."""

    controller = None  # set by the controller

    def nodes(self):
        """The cluster's nodes (``quota.nodes.NodeSpec``)."""
        raise NotImplementedError

    async def start(self, workload, pod, row) -> None:
        """Run an admitted pod (``row`` is its persisted record: set ``pid``/``log_path`` there)."""
        raise NotImplementedError

    async def evict(self, workload, pod, row, grace: float, reason) -> None:
        """Stop a victim gracefully; call ``controller.eviction_done(pod.uid)`` once it is gone."""
        raise NotImplementedError

    async def stop(self, workload, pod, row) -> None:
        """Stop a pod now (its workload was cancelled)."""
        raise NotImplementedError

    def recover(self, workload, row) -> bool:
        """After a restart: whether the pod of ``row`` still runs (it is then adopted as Running)."""
        raise NotImplementedError

    def logs(self, workload, row) -> str:
        raise NotImplementedError
