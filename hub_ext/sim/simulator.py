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

# A step that has not settled after this many decision rounds is a bug, not a scenario.
MAX_ROUNDS = 100_000


class Simulator:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.engine = Engine()
        self.owners: dict[tuple[str, str, str], Owner] = {}
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

    def step(self, index: int, step: Step) -> dict:
        evictions: list = []
        if step.action == "apply":
            for obj in step.objects:
                self._apply(obj)
        elif step.action == "delete":
            for ref in step.refs:
                self._delete(ref)
        else:
            self._run_events(self.now + step.seconds, evictions)
        self._settle(evictions)
        report = self.report(index, step, evictions)
        self._forget_gone()
        return report

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
            elif obj.kind == "Pod":
                raise ValidationError(f"Pod {obj.namespace}/{obj.name} already exists (delete it first)")
            else:
                owner.spec = obj  # scale or change; new pods use the new template

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
            engine.resource_quotas.pop(ref.name, None)
            engine.limit_ranges.pop(ref.name, None)
            self.namespaces.pop(ref.name, None)
        elif ref.kind == "Node":
            raise ValidationError(f"deleting node {ref.name} is not supported by the simulator")
        elif ref.kind == "Dataset":
            self.datasets.delete(ref.name)
        else:
            owner = self.owners.pop((ref.kind, ref.namespace, ref.name), None)
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
            for owner in self.owners.values():
                if not self._held(owner):
                    owner.reconcile(self.engine, self.now)
            decisions = self.engine.schedule(self.now)
            evictions.extend(e.to_dict() for e in decisions.evictions)
            if not decisions:
                return
        raise RuntimeError("the scheduler did not settle")  # pragma: no cover - an engine bug

    def _next_event(self, evictions_only: bool) -> float | None:
        times = []
        for pod in self.engine.pods.values():
            if pod.phase is Phase.TERMINATING:
                times.append(pod.grace_deadline)
            elif pod.phase is Phase.RUNNING and pod.duration is not None and not evictions_only:
                times.append(pod.admitted_at + pod.duration)
        return min(times, default=None)

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
        for pod in list(engine.pods.values()):
            if pod.phase is Phase.TERMINATING and pod.grace_deadline <= now:
                engine.complete_eviction(pod.uid, now)
            elif pod.phase is Phase.RUNNING and pod.duration is not None and pod.admitted_at + pod.duration <= now:
                engine.finish(pod.uid, now)
                owner = self.owners.get((pod.owner[0], pod.namespace, pod.owner[1])) if pod.owner else None
                if owner is not None:
                    owner.on_finished(pod)

    def _forget_gone(self) -> None:
        """Evicted pods are deleted, and a bare pod that was refused never existed; both are shown once.

        A forgotten bare pod's name is free again, as on the API server.
        """
        for pod in list(self.engine.pods.values()):
            if pod.phase is Phase.EVICTED or (pod.phase is Phase.REJECTED and pod.owner is None):
                self.engine.delete(pod.uid)
                if pod.owner is None:
                    self.owners.pop(("Pod", pod.namespace, pod.name), None)
        for key, owner in list(self.owners.items()):
            if owner.spec.kind == "Pod" and any(p.phase is Phase.REJECTED for p in self._held(owner)):
                del self.owners[key]

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
