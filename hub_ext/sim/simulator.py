"""Runs a scenario through the engine on a simulated clock and reports the state after each step.

Each step runs to a settled state: the evictions it triggers complete (their
grace periods pass on the clock, in time order, together with any job that
finishes meanwhile) and every admission they make room for happens in the
same step. ``advance`` moves the clock for everything else time drives.
"""

from __future__ import annotations

from ..quota.dataset import Dataset
from ..quota.errors import ValidationError
from ..quota.limitrange import LimitRange
from ..quota.namespace import Namespace
from ..quota.nodes import NodeSpec
from ..quota.priorityclass import PriorityClass
from ..quota.quantity import format_list
from ..quota.resourcequota import ResourceQuota
from ..quota.tree import ElasticQuotaTree
from ..quota.workloads import WorkloadSpec
from ..scheduler.engine import Engine
from ..scheduler.model import DATASET_NOT_ALLOWED, Phase, Pod
from ..scheduler.owners import Owner
from ..scheduler.submission import Refused, resolve_priority
from .datasets import Datasets
from .scenario import Ref, Scenario, Step
from .timers import Timers

# A step that has not settled after this many decision rounds is a bug, not a scenario.
MAX_ROUNDS = 100_000


class Simulator:
    """``engine``: one of the caller's to run on (a ``planning.recorder.RecordingEngine`` records a timeline)."""

    def __init__(self, scenario: Scenario, engine: Engine | None = None):
        self.scenario = scenario
        self.engine = Engine() if engine is None else engine
        self.owners: dict[tuple[str, str, str], Owner] = {}
        # Owners are reconciled only when something of theirs changed (``_touch``), in the order they were
        # first applied, as a controller acts on its own events: a week of Jobs is not looked at again on
        # every decision round. Owners with datasets or refused pods are looked at on every round.
        self._order: dict[tuple[str, str, str], int] = {}
        self._dirty: set[tuple[str, str, str]] = set()
        self._keep_finished = True
        self.timers = Timers()
        self.namespaces: dict[str, Namespace] = {}
        self.datasets = Datasets()
        self.now = 0.0
        for node in scenario.nodes:
            self._apply(node)
        evictions: list = []
        for obj in scenario.objects:
            self._apply(obj)
        self._settle(evictions)

    def run(self):
        """Yield one report (a JSON-ready dict) per step."""
        for i, step in enumerate(self.scenario.steps):
            try:
                yield self.step(i, step)
            except ValidationError as err:
                raise err.within(f"steps[{i}]") from None

    def play(self) -> None:
        """Run every step without reports (a recording engine keeps what happened); finished pods are
        forgotten at once, which changes no decision and keeps a long scenario fast."""
        self._keep_finished = False
        for i, step in enumerate(self.scenario.steps):
            try:
                self._do(step, [])
            except ValidationError as err:
                raise err.within(f"steps[{i}]") from None
            self._forget_gone()

    def step(self, index: int, step: Step) -> dict:
        evictions: list = []
        self._do(step, evictions)
        report = self.report(index, step, evictions)
        self._forget_gone()
        return report

    def _do(self, step: Step, evictions: list) -> None:
        if step.action == "apply":
            for obj in step.objects:
                self._apply(obj)
        elif step.action == "delete":
            for ref in step.refs:
                self._delete(ref)
        else:
            self._run_events(self.now + step.seconds, evictions)
        self._settle(evictions)

    # -- objects ------------------------------------------------------------
    def _apply(self, obj) -> None:
        engine = self.engine
        if isinstance(obj, NodeSpec):
            if obj.name in engine.cluster.nodes:
                raise ValidationError(f"node {obj.name} already exists")
            engine.add_node(obj.name, obj.allocatable, obj.labels)
        elif isinstance(obj, ElasticQuotaTree):
            engine.set_tree(obj)
        elif isinstance(obj, ResourceQuota):
            engine.apply_resource_quota(obj)
        elif isinstance(obj, LimitRange):
            engine.apply_limit_range(obj)
        elif isinstance(obj, PriorityClass):
            engine.apply_priority_class(obj)
        elif isinstance(obj, Namespace):
            self.namespaces[obj.name] = obj
        elif isinstance(obj, Dataset):
            self.datasets.apply(obj)
        elif isinstance(obj, WorkloadSpec):
            owner = self.owners.get(obj.key)
            if owner is None:
                self.owners[obj.key] = Owner(obj)
                self._order[obj.key] = len(self._order)
            elif obj.kind == "Pod":
                raise ValidationError(f"Pod {obj.namespace}/{obj.name} already exists (delete it first)")
            else:
                owner.spec = obj  # scale or change; new pods use the new template
            self._dirty.add(obj.key)

    def _delete(self, ref: Ref) -> None:
        engine = self.engine
        if ref.kind == "ElasticQuotaTree":
            engine.set_tree(None)
        elif ref.kind == "ResourceQuota":
            engine.resource_quotas.get(ref.namespace, {}).pop(ref.name, None)
            engine.rq_used.pop((ref.namespace, ref.name), None)
        elif ref.kind == "LimitRange":
            engine.limit_ranges.get(ref.namespace, {}).pop(ref.name, None)
        elif ref.kind == "PriorityClass":
            engine.classes.delete(ref.name)
        elif ref.kind == "Namespace":
            for key in [k for k in self.owners if k[1] == ref.name]:
                self.owners.pop(key).delete(engine)
                self._order.pop(key)
            engine.resource_quotas.pop(ref.name, None)
            engine.limit_ranges.pop(ref.name, None)
            self.namespaces.pop(ref.name, None)
        elif ref.kind == "Node":
            raise ValidationError(f"deleting node {ref.name} is not supported by the simulator")
        elif ref.kind == "Dataset":
            self.datasets.delete(ref.name)
        else:
            owner = self.owners.pop((ref.kind, ref.namespace, ref.name), None)
            self._order.pop((ref.kind, ref.namespace, ref.name), None)
            if owner is None:
                raise ValidationError(f"{ref.kind} {ref.namespace}/{ref.name} not found")
            owner.delete(engine)

    # -- datasets -----------------------------------------------------------
    def _refresh_datasets(self) -> None:
        engine = self.engine
        if not self.datasets.declared:
            return
        known = {*self.namespaces, *(key[1] for key in self.owners), *engine.resource_quotas, *engine.limit_ranges,
                 *(engine.quota.tree.leaf_of if engine.quota.tree is not None else ())}
        self.datasets.refresh(known, lambda ns: engine.resource_quotas.get(ns, {}).values())

    def _held(self, owner: Owner) -> list[Pod]:
        """The pods ``owner`` would make now, held back by its datasets (never given to the engine: not counted)."""
        out = []
        for name in owner.upcoming(self.engine) if owner.spec.datasets else ():
            reason = self.datasets.gate(owner.spec, name)
            if reason is None:
                return []
            out.append(self._held_pod(owner.spec, name, reason))
        return out

    def _held_pod(self, spec: WorkloadSpec, name: str, reason) -> Pod:
        try:
            pc, priority, _ = resolve_priority(spec.template, self.engine.classes, name)
        except Refused:
            pc, priority = None, 0
        return Pod(uid=0, namespace=spec.namespace, name=name, spec=spec.template,
                   requests={r: a for r, a in spec.template.requests().items() if a}, limits=spec.template.limits(),
                   priority=priority, priority_class=pc.name if pc else spec.template.priority_class_name,
                   created=self.now, owner=None if spec.kind == "Pod" else (spec.kind, spec.name),
                   phase=Phase.REJECTED if reason.code == DATASET_NOT_ALLOWED else Phase.PENDING, reason=reason)

    # -- time ---------------------------------------------------------------
    def _quiesce(self, evictions: list) -> None:
        """Reconcile owners and schedule until nothing changes at this instant."""
        for _ in range(MAX_ROUNDS):
            self._refresh_datasets()
            dirty, self._dirty = self._dirty, set()
            for key in sorted((k for k in dirty if k in self.owners), key=self._order.__getitem__):
                owner = self.owners[key]
                if not self._held(owner):
                    owner.reconcile(self.engine, self.now)
                if owner.spec.datasets or any(p.phase is Phase.REJECTED for p in owner.pods):
                    self._dirty.add(key)  # a dataset may get ready, a refused pod is tried again
            decisions = self.engine.schedule(self.now)
            self.timers.started(decisions.admitted)
            self.timers.evicted(e.victim for e in decisions.evictions)
            for e in decisions.evictions:
                self._touch(e.victim)  # its controller makes the replacement at once
            evictions.extend(e.to_dict() for e in decisions.evictions)
            if not decisions:
                return
        raise RuntimeError("the scheduler did not settle")  # pragma: no cover - an engine bug

    def _touch(self, pod: Pod) -> None:
        key = ("Pod", pod.namespace, pod.name) if pod.owner is None else (pod.owner[0], pod.namespace, pod.owner[1])
        if key in self.owners:
            self._dirty.add(key)

    def _next_event(self, evictions_only: bool) -> float | None:
        return self.timers.next(self.engine.pods, evictions_only)

    def _settle(self, evictions: list) -> None:
        """Run until no eviction is in flight (jobs that finish meanwhile finish too)."""
        for _ in range(MAX_ROUNDS):
            self._quiesce(evictions)
            deadline = self._next_event(evictions_only=True)
            if deadline is None:
                return
            self._run_events(deadline, evictions)
        raise RuntimeError("evictions did not settle")  # pragma: no cover

    def _run_events(self, until: float, evictions: list) -> None:
        for _ in range(MAX_ROUNDS):
            self._quiesce(evictions)
            at = self._next_event(evictions_only=False)
            if at is None or at > until:
                break
            self.now = max(self.now, at)
            self._fire(self.now)
        self.now = max(self.now, until)
        self._quiesce(evictions)

    def _fire(self, now: float) -> None:
        engine = self.engine
        for pod in self.timers.due(engine.pods, now):
            if pod.phase is Phase.TERMINATING:
                self.timers.started(engine.complete_eviction(pod.uid, now))
                self._touch(pod)
                if not self._keep_finished:
                    engine.delete(pod.uid)
            elif pod.phase is Phase.RUNNING:
                engine.finish(pod.uid, now)
                owner = self.owners.get((pod.owner[0], pod.namespace, pod.owner[1])) if pod.owner else None
                if owner is not None:
                    owner.on_finished(pod)
                self._touch(pod)
                if not self._keep_finished:
                    engine.delete(pod.uid)

    def _forget_gone(self) -> None:
        """Evicted pods are deleted, and a bare pod that was refused never existed; both are shown once.

        A forgotten bare pod's name is free again, as on the API server.
        """
        if self._keep_finished:
            pods = list(self.engine.pods.values())
        else:  # played: evicted pods are gone already, and a refused bare pod's owner is dirty (tried again)
            pods = [p for k in self._dirty if k[0] == "Pod" and k in self.owners for p in self.owners[k].pods]
        for pod in pods:
            if pod.phase is Phase.EVICTED or (pod.phase is Phase.REJECTED and pod.owner is None):
                self.engine.delete(pod.uid)
                if pod.owner is None:
                    self.owners.pop(("Pod", pod.namespace, pod.name), None)
                    self._order.pop(("Pod", pod.namespace, pod.name), None)
                    self._dirty.discard(("Pod", pod.namespace, pod.name))
        for key in [k for k in self._dirty if self.owners[k].spec.datasets]:  # held pods' owners stay dirty
            if key[0] == "Pod" and any(p.phase is Phase.REJECTED for p in self._held(self.owners[key])):
                del self.owners[key], self._order[key]
                self._dirty.discard(key)

    # -- reporting ----------------------------------------------------------
    def report(self, index: int, step: Step, evictions: list) -> dict:
        engine = self.engine
        positions = engine.positions()
        pods = []
        held = [pod for owner in self.owners.values() for pod in self._held(owner)]
        ordered = sorted(engine.pods.values(), key=lambda p: (p.namespace, p.owner_ref or "", p.created, p.uid))
        for pod in sorted(ordered + held, key=lambda p: (p.namespace, p.owner_ref or "")):  # held: after their kin
            item = pod.summary()
            if pod.uid in positions:
                item["position"], item["leafPosition"] = positions[pod.uid]
            pods.append(item)
        quota = {
            name: {"min": format_list(v["min"]), "max": format_list(v["max"]), "used": format_list(v["used"])}
            for name, v in engine.quota.report().items()
        }
        return {
            "step": index + 1,
            "name": step.name,
            "action": step.describe(),
            "time": self.now,
            "pods": pods,
            "quota": quota,
            "evictions": evictions,
            "warnings": list(engine.warnings),
            "datasets": self.datasets.report(),
        }
