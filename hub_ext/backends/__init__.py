"""Where workloads really run. A backend starts admitted pods, evicts victims gracefully and reports exits.

The controller calls a backend; a backend calls back ``Controller.pod_exited``
and ``Controller.eviction_done``. ``local`` runs processes on this machine;
``kubernetes`` creates pods on a cluster (placed by the default kube-scheduler).
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

    async def recover(self, workload, row, pod):
        """After a restart, how the pod of ``row`` is: ``"running"`` (it is adopted where it runs),
        ``("exited", code)`` (it ended while the service was away) or ``"gone"``."""
        raise NotImplementedError

    def logs(self, workload, row) -> str:
        """What the pod of ``row`` printed (the tail of it)."""
        raise NotImplementedError
