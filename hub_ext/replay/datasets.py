"""The replay's datasets: the service's datasets room told of the scenario's Dataset objects, the
backend's states read back, and the workloads that name a dataset held back until it is Bound
(the simulator's gate, ``sim.datasets``, so that the replay reports what ``simulate`` reports).

A part of ``Replay`` (``run.py``), which it is mixed into: it uses the replay's controller,
backend, clock, API and names, and its ``held`` workloads.
"""

from __future__ import annotations

from ..backends.kubernetes.api import RESOURCE_QUOTA
from ..backends.kubernetes.datasets import quota_signature
from ..quota.workloads import WorkloadSpec
from ..scheduler.model import DATASET_NOT_ALLOWED, Phase, Pod
from ..scheduler.owners import Owner
from ..scheduler.submission import Refused, resolve_priority
from ..sim.datasets import Datasets as DatasetGate


class ReplayDatasets:
    def _room(self):
        """The service's datasets room (``controller.datasets``)."""
        return self.controller.datasets

    def _datasets_changed(self) -> None:
        """Tell the backend what the service wants now, as the service does after a dataset changed."""
        self.backend.datasets_changed(self._room().wanted())

    def _gate(self) -> DatasetGate:
        """The simulator's gate, over the service's datasets and the states the backend read back."""
        gate = DatasetGate()
        gate.declared = dict(self._room().declared)
        gate.claims = {pair: state for pair, state in self.backend.datasets.states.items()
                       if pair in (self.backend.datasets.wanted or {})}
        return gate

    def _held_pods(self, spec: WorkloadSpec, gate: DatasetGate) -> list[Pod]:
        """The pods a held workload would make now, each with why it is held (empty: it may go)."""
        out = []
        for name in Owner(spec).upcoming(self.controller.engine):
            reason = gate.gate(spec, name)
            if reason is None:
                return []
            try:
                pc, priority, _ = resolve_priority(spec.template, self.controller.engine.classes, name)
            except Refused:
                pc, priority = None, 0
            out.append(Pod(uid=0, namespace=spec.namespace, name=name, spec=spec.template,
                           requests={r: a for r, a in spec.template.requests().items() if a},
                           limits=spec.template.limits(), priority=priority,
                           priority_class=pc.name if pc else spec.template.priority_class_name, created=self.clock.now,
                           owner=None if spec.kind == "Pod" else (spec.kind, spec.name),
                           phase=Phase.REJECTED if reason.code == DATASET_NOT_ALLOWED else Phase.PENDING,
                           reason=reason))
        return out

    def _release_held(self) -> None:
        """Hand each held workload whose datasets are all Bound to the service."""
        if not self.held:
            return
        gate = self._gate()
        for key, (raw, spec) in list(self.held.items()):
            if not self._held_pods(spec, gate):
                del self.held[key]
                self._add_workload(raw, spec)

    def _datasets_report(self) -> dict:
        """``{dataset: {namespace: state}}`` in the scenario's names, as ``simulate`` reports it."""
        room = self._room()
        ours = self.backend.datasets
        out: dict[str, dict[str, str]] = {name: {} for name in sorted(room.declared)}
        for (name, ns), (state, _) in sorted(ours.states.items()):
            if (name, ns) in (ours.wanted or {}) and name in out:
                out[name][self.names.scenario(ns)] = state
        return out

    def _datasets_unsettled(self) -> str | None:
        """What of the datasets is not settled yet (a blocking call: it reads the quotas of refused claims)."""
        room = self._room()
        if not room.declared:
            return None
        ours = self.backend.datasets
        if ours.busy or (ours.dirty is not None and ours.dirty.is_set()):
            return "the datasets are being made"
        for (name, ns) in sorted(ours.wanted or {}):
            state, message = ours.states.get((name, ns), (None, None))
            if state is None:
                return f"dataset {name} in {ns} is not made yet"
            if state == "Pending":
                return f"dataset {name} in {ns} is pending: {message}"
            if state == "Refused":
                # a quota raised in this step: refused until the watch has seen it and the claim was tried again
                live = self.api.list(RESOURCE_QUOTA, None, ns)
                if quota_signature(live) != ours.quota_signature(ns):
                    return f"dataset {name} in {ns}: its namespace's ResourceQuotas changed; tried again"
        return None

