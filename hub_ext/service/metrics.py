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
        # The pages' figures (history.snapshot), for Prometheus and the chart's Grafana dashboard.
        self.cluster = Gauge("tenancy_cluster", "The cluster per resource: capacity, allocated (admitted pods' "
                             "requests) and pending (waiting pods' requests), in base units.",
                             ["resource", "kind"], registry=self.registry)
        self.team = Gauge("tenancy_team_allocated", "Requests of a team's admitted pods, in base units.",
                          ["team", "resource"], registry=self.registry)
        self.node = Gauge("tenancy_node", "Each cluster node: allocatable and allocated per resource, in base units.",
                          ["node", "resource", "kind"], registry=self.registry)
        self.node_pods = Gauge("tenancy_node_pods", "Pods admitted on each cluster node.", ["node"],
                               registry=self.registry)
        self.jobs = Gauge("tenancy_jobs", "Training jobs per team: queued and running.", ["team", "state"],
                          registry=self.registry)
        self.decision = Histogram("tenancy_decision_seconds", "Time of one scheduling pass.", registry=self.registry,
                                  buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))

    def observe_snapshot(self, snap: dict) -> None:
        """Set the page figures' gauges from a ``history.snapshot`` (quota borrowed and lent included)."""
        for gauge in (self.cluster, self.team, self.node, self.node_pods, self.jobs):
            gauge.clear()
        for kind, amounts in snap["cluster"].items():
            for res, value in amounts.items():
                self.cluster.labels(res, kind).set(value)
        for team, amounts in snap["teams"].items():
            for res, value in amounts.items():
                self.team.labels(team, res).set(value)
        for name, node in snap["nodes"].items():
            self.node_pods.labels(name).set(node["pods"])
            for kind in ("allocatable", "allocated"):
                for res, value in node[kind].items():
                    self.node.labels(name, res, kind).set(value)
        for name, q in snap["quota"].items():
            for kind in ("borrowed", "lent"):
                for res in q["max"].keys() | q["min"].keys():
                    self.quota.labels(name, res, kind).set((q[kind] or {}).get(res, 0))
        for team, counts in snap["jobs"].items():
            for state, n in counts.items():
                self.jobs.labels(team, state).set(n)

    def admitted(self, pod) -> None:
        self.admissions.labels(pod.namespace, pod.priority_class or "").inc()

    def evicted(self, pod) -> None:
        self.evictions.labels(pod.namespace, pod.reason.code if pod.reason else "").inc()

    def observe_tick(self, seconds: float) -> None:
        self.decision.observe(seconds)

    def observe_engine(self, engine) -> None:
        """Set the quota and pod gauges from the engine: at each scrape, not at each scheduling pass
        (they count every pod; with thousands queued that stalled the passes, and so the submits)."""
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
