"""The cluster's ``Dataset`` custom resources (``datasets.tenancy.jupyter.org``), followed like the quota tree.

An admin may ``kubectl apply`` a Dataset (the chart installs the CRD). While the
API server serves the kind, a watch follows every Dataset object; after each
change the full set, each parsed with ``quota.dataset.parse_dataset``, is handed
to the service (``controller.datasets.from_cluster([...])``), which replaces the
previous cluster set with it. An object that does not parse is left out, with one
line naming it in the log and on ``/health`` (not blocking: the others are used).
Where the CRD is not installed nothing is followed; whether it is served is asked
again every ``checks_seconds``.
"""

from __future__ import annotations

import asyncio

from ...quota.dataset import API_VERSION, KIND, parse_dataset
from ...quota.errors import ValidationError
from .api import Kind, KubernetesError
from .informer import Informer, outage_error

DATASET = Kind(KIND, API_VERSION, "datasets", False)
HEALTH_CHECK = "dataset-objects"


class ClusterDatasets:
    """The watch of the cluster's Dataset objects, and what is handed to the service from it."""

    def __init__(self, backend):
        self.backend = backend  # its API, calls, monitor, controller, log and configuration
        self.objects: dict[str, dict] = {}  # name -> the object as the API server has it
        self.watch: Informer | None = None
        self.handed: list | None = None  # the datasets last handed over
        self.problems: list[str] = []  # one line per object that does not parse
        self._scheduled = False

    def room(self):
        return self.backend.datasets_room

    async def run(self) -> None:
        """Until cancelled: start the watch once the kind is served (asked again every ``checks_seconds``)."""
        b = self.backend
        if not b.follow_dataset_objects or self.room() is None:
            return
        while self.watch is None:
            try:
                served = DATASET.plural in await b.calls.call(b.api.served_resources, DATASET.group_version)
            except KubernetesError as err:
                if not outage_error(err):
                    b.log.warning("asking whether the API server serves %s: %s", DATASET.group_version, err)
                served = False
            if served:
                self.watch = Informer(b.api, DATASET, None, asyncio.get_running_loop(), self.event,
                                      timeout_seconds=b.relist_seconds, monitor=b.monitor, log=b.log,
                                      name="datasets.tenancy.jupyter.org").start()
                return
            await asyncio.sleep(b.checks_seconds)

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    def event(self, kind: str, obj) -> None:
        if kind == "LIST":
            self.objects = {o["metadata"]["name"]: o for o in obj}
        elif kind == "DELETED":
            self.objects.pop(obj["metadata"]["name"], None)
        else:
            self.objects[obj["metadata"]["name"]] = obj
        if not self._scheduled:  # a batch of events is handed over once, after the last of them
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.hand_over)

    def hand_over(self) -> None:
        """Parse every object (a bad one: one line, left out) and give the set to the service."""
        self._scheduled = False
        b, room = self.backend, self.room()
        datasets, problems = [], []
        for name, obj in sorted(self.objects.items()):
            try:
                datasets.append(parse_dataset({"apiVersion": API_VERSION, "kind": KIND, **obj}))
            except ValidationError as err:
                problems.append(f"the cluster's {KIND} {name} is not used: {err}")
        for line in sorted(set(problems) - set(self.problems)):
            b.log.warning("%s", line)
        self.problems = problems
        try:
            room.from_cluster(datasets)
        except ValidationError as err:  # the set together (a name or mount path taken twice, ...)
            problems.append(f"the cluster's {KIND} objects are not used: {err}")
            b.log.warning("%s", problems[-1])
        else:
            self.handed = datasets
        health = getattr(b.controller, "health", None)
        if health is not None:
            health.set(HEALTH_CHECK, "; ".join(problems) or None, blocking=False, log=False)
