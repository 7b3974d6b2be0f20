"""A backend that has every method the contract asks for and does nothing of its own: the service's
calls return at once and pods change only when a test says so (``controller.pod_observed``)."""

from __future__ import annotations

from hub_ext.backends import Backend
from hub_ext.quota.nodes import parse_node


class IdleBackend(Backend):
    #: The cluster it reports: ``{"name": ..., "allocatable": {...}}`` each; a subclass sets its own.
    NODES: list[dict] = []

    def nodes(self):
        return [parse_node(n, n["name"]) for n in self.NODES]

    async def start(self, workload, pod, row):
        pass

    async def evict(self, workload, pod, row, grace, reason):
        pass

    async def stop(self, workload, pod, row):
        pass

    async def recover(self, workload, row, pod):
        return "gone"

    def logs(self, workload, row, tail_bytes=1000):
        return ""
