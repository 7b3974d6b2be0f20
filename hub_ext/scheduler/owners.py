"""What ReplicaSet and Job controllers do for us: keep an owner's pods asked for.

A Deployment/ReplicaSet/StatefulSet keeps ``replicas`` pods that are pending,
rejected or running; an evicted one is replaced by a new pending pod at once
(Kubernetes creates the replacement as soon as the victim is terminating).
A Job keeps ``min(parallelism, completions - succeeded)`` pods and is done
when ``completions`` pods succeeded. A pod refused at submission stays listed
as Rejected and is tried again on every reconcile, as a controller retries.

With ``WorkloadSpec.gang`` the pods it asks for are one gang
(``Engine.submit_gang``): all admitted together or none, evicted together. A
new gang of the wanted size is made when none of its pods is left active (the
last one finished, or the gang was evicted: its replacement is queued at
once); a gang still waiting when the wanted size changes is made anew, one
that runs is left to run.
"""

from __future__ import annotations

from ..quota.workloads import WorkloadSpec
from .engine import Engine
from .model import Phase, Pod

_ACTIVE = (Phase.PENDING, Phase.RUNNING, Phase.REJECTED)


class Owner:
    def __init__(self, spec: WorkloadSpec):
        self.spec = spec
        self.pods: list[Pod] = []
        self.succeeded = 0
        self._next_index = 0

    def wanted(self) -> int:
        spec = self.spec
        if spec.kind == "Job":
            return max(0, min(spec.pods, spec.completions - self.succeeded))
        return spec.pods

    def reconcile(self, engine: Engine, now: float) -> None:
        if self.spec.kind == "Pod":
            # A bare pod is created once; nothing recreates or retries it.
            if not self._next_index:
                self._next_index = 1
                self.pods.append(self._create(engine, now))
            return
        self.pods = [p for p in self.pods if p.uid in engine.pods]
        active = [p for p in self.pods if p.phase in _ACTIVE]
        for pod in active:
            if pod.phase is Phase.REJECTED:
                engine.resubmit(pod, now)
        if self.spec.gang:
            self._reconcile_gang(engine, now, active)
            return
        missing = self.wanted() - len(active)
        for _ in range(max(missing, 0)):
            self.pods.append(self._create(engine, now))
        if missing < 0:
            # Scale down like a ReplicaSet: not-yet-running pods first, then the newest.
            doomed = sorted(active, key=lambda p: (p.phase is Phase.RUNNING, -(p.admitted_at or 0), -p.uid))[:-missing]
            for pod in doomed:
                engine.delete(pod.uid)

    def upcoming(self, engine: Engine) -> list[str]:
        """Names of the pods ``reconcile`` would create now (a driver holding them back shows these)."""
        spec = self.spec
        if spec.kind == "Pod":
            return [] if self._next_index else [spec.name]
        active = [p for p in self.pods if p.uid in engine.pods and p.phase in _ACTIVE]
        count = (0 if active else self.wanted()) if spec.gang else max(self.wanted() - len(active), 0)
        return [f"{spec.name}-{self._next_index + i}" for i in range(count)]

    def _reconcile_gang(self, engine: Engine, now: float, active: list[Pod]) -> None:
        wanted = self.wanted()
        if active and len(active) != wanted and all(p.phase is not Phase.RUNNING for p in active):
            for pod in active:  # a waiting gang of another size: make it anew
                engine.delete(pod.uid)
            active = []
        if active or not wanted:
            return
        spec = self.spec
        names = [f"{spec.name}-{self._next_index + i}" for i in range(wanted)]
        self._next_index += wanted
        self.pods += engine.submit_gang(
            spec.namespace, names, spec.template, now, owner=(spec.kind, spec.name), labels=spec.labels,
            annotations=spec.annotations, preemptible=spec.preemptible, duration=spec.duration_seconds,
        )

    def _create(self, engine: Engine, now: float) -> Pod:
        spec = self.spec
        if spec.kind == "Pod":
            name, owner = spec.name, None
        else:
            name, owner = f"{spec.name}-{self._next_index}", (spec.kind, spec.name)
            self._next_index += 1
        return engine.submit(
            spec.namespace, name, spec.template, now, owner=owner, labels=spec.labels,
            annotations=spec.annotations, preemptible=spec.preemptible, duration=spec.duration_seconds,
        )

    def on_finished(self, pod: Pod) -> None:
        self.succeeded += 1

    def delete(self, engine: Engine) -> None:
        for pod in self.pods:
            engine.delete(pod.uid)
        self.pods = []
