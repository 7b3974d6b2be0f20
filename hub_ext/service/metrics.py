"""Prometheus metrics of the scheduler service, in a registry of its own."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..scheduler.model import Phase


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.quota = Gauge("tenancy_quota", "Quota tree nodes: min, max and used per resource (in whole units).",
                           ["node", "resource", "kind"], registry=self.registry)
        self.pods = Gauge("tenancy_pods", "Pods by namespace and phase.", ["namespace", "phase"], registry=self.registry)
        self.admissions = Counter("tenancy_admissions", "Pods admitted.", ["namespace", "priority_class"],
                                  registry=self.registry)
        self.evictions = Counter("tenancy_evictions", "Pods evicted.", ["namespace", "reason"], registry=self.registry)
        self.decision = Histogram("tenancy_decision_seconds", "Time of one scheduling pass.", registry=self.registry,
                                  buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))

    def admitted(self, pod) -> None:
        self.admissions.labels(pod.namespace, pod.priority_class or "").inc()

    def evicted(self, pod) -> None:
        self.evictions.labels(pod.namespace, pod.reason.code if pod.reason else "").inc()

    def observe_tick(self, controller, seconds: float) -> None:
        self.decision.observe(seconds)
        engine = controller.engine
        for node, values in engine.quota.report().items():
            for kind in ("min", "max", "used"):
                for res, milli in values[kind].items():
                    self.quota.labels(node, res, kind).set(milli / 1000)
            for res in values["max"]:
                if res not in values["used"]:
                    self.quota.labels(node, res, "used").set(0)
        self.pods.clear()
        tally = Tally((p.namespace, p.phase.value) for p in engine.pods.values()
                      if p.phase in (Phase.PENDING, Phase.RUNNING, Phase.TERMINATING, Phase.REJECTED))
        for (ns, phase), n in tally.items():
            self.pods.labels(ns, phase).set(n)
