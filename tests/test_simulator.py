"""The simulator: owners (ReplicaSet / Job behaviour), the clock, and the report of each step."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from hub_ext.quota import ValidationError
from hub_ext.sim.scenario import load_scenario, parse_scenario
from hub_ext.sim.simulator import Simulator


def run(text: str) -> list[dict]:
    return list(Simulator(parse_scenario(yaml.safe_load(text))).run())


def counts(report: dict, phase: str = "Running") -> dict:
    return dict(Counter(p["namespace"] for p in report["pods"] if p["phase"] == phase))


def deployment(ns, name, replicas, cpu, pc=None, extra=""):
    pcl = f"\n          priorityClassName: {pc}" if pc else ""
    return f"""
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: {name}, namespace: {ns}{extra}}}
      spec:
        replicas: {replicas}
        template:
          spec:{pcl}
            containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]"""


def test_ack_demo_counts_and_fairness_at_every_step():
    reports = list(Simulator(load_scenario("examples/ack-demo.yaml")).run())
    running = [counts(r) for r in reports]
    assert running == [
        {"namespace1": 4},
        {"namespace1": 4, "namespace2": 4},
        {"namespace1": 3, "namespace2": 3, "namespace3": 2},
        {"namespace1": 2, "namespace2": 2, "namespace3": 2, "namespace4": 2},
    ]
    victims = [sorted(e["namespace"] for e in r["evictions"]) for r in reports]
    assert victims == [[], [], ["namespace1", "namespace2"], ["namespace1", "namespace2"]]
    assert all(p["phase"] != "Terminating" for r in reports for p in r["pods"])  # each step settled
    final = reports[-1]["quota"]
    assert {n: q["used"].get("cpu") for n, q in final.items()} == {
        "root": "40", "root.a": "20", "root.a.1": "10", "root.a.2": "10",
        "root.b": "20", "root.b.1": "10", "root.b.2": "10"}
    pending = [p for p in reports[-1]["pods"] if p["phase"] == "Pending"]
    assert len(pending) == 12 and {p["reason"] for p in pending} == {"quota-max"}
    assert sorted(p["position"] for p in pending) == list(range(1, 13))


QUOTA_SCENARIO = """
nodes: [{name: n1, allocatable: {cpu: "16"}}]
objects:
  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: team}, spec: {hard: {requests.cpu: "4"}}}
steps:
  - apply:""" + deployment("team", "web", 3, 2) + """
  - delete: [{kind: Deployment, namespace: team, name: web}]
  - apply:""" + deployment("team", "small", 2, 1)


def test_rejected_replicas_stay_listed_and_retry():
    first, deleted, small = run(QUOTA_SCENARIO)
    phases = Counter(p["phase"] for p in first["pods"])
    assert phases == {"Running": 2, "Rejected": 1}
    [rejected] = [p for p in first["pods"] if p["phase"] == "Rejected"]
    assert rejected["reason"] == "resource-quota" and rejected["owner"] == "Deployment/web"
    assert "exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=4" in rejected["message"]
    assert deleted["pods"] == []
    assert counts(small) == {"team": 2}


def test_scaling_a_deployment_down_removes_waiting_pods_first():
    text = """
nodes: [{name: n1, allocatable: {cpu: "4"}}]
steps:
  - apply:""" + deployment("t", "d", 3, 2) + """
  - apply:""" + deployment("t", "d", 2, 2)
    before, after = run(text)
    assert Counter(p["phase"] for p in before["pods"]) == {"Running": 2, "Pending": 1}
    assert Counter(p["phase"] for p in after["pods"]) == {"Running": 2}


JOB = """
nodes: [{name: n1, allocatable: {cpu: "4"}}]
steps:
  - apply:""" + deployment("dev", "notebooks", 4, 1) + """
  - apply:
    - apiVersion: batch/v1
      kind: Job
      metadata: {name: train, namespace: research, annotations: {tenancy.jupyter.org/duration: 60s}}
      spec:
        parallelism: 2
        completions: 4
        template:
          spec:
            priorityClassName: high-priority-research
            terminationGracePeriodSeconds: 10
            containers: [{name: t, resources: {requests: {cpu: "1"}}}]
  - advance: 30s
  - advance: 60s
  - advance: 60s
"""


def test_job_preempts_runs_to_completion_and_notebooks_return():
    notebooks, submitted, half, second_wave, done = run(JOB)
    assert counts(notebooks) == {"dev": 4}
    assert counts(submitted) == {"dev": 2, "research": 2}
    assert len(submitted["evictions"]) == 2 and submitted["time"] == 30  # the victims' grace passed inside the step
    assert counts(half) == {"dev": 2, "research": 2}
    assert counts(second_wave, "Succeeded") == {"research": 2} and counts(second_wave) == {"dev": 2, "research": 2}
    assert counts(done, "Succeeded") == {"research": 4}
    assert counts(done) == {"dev": 4}  # the notebooks came back once the job finished
    assert done["time"] == 180


def test_bare_pods_are_not_recreated_after_eviction():
    text = """
nodes: [{name: n1, allocatable: {cpu: "2"}}]
steps:
  - apply:
    - {apiVersion: v1, kind: Pod, metadata: {name: nb, namespace: a}, spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}
  - apply:
    - {apiVersion: v1, kind: Pod, metadata: {name: urgent, namespace: b}, spec: {priorityClassName: critical-prod, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}
  - advance: 1s
"""
    _, preempted, later = run(text)
    assert [(p["name"], p["phase"]) for p in preempted["pods"]] == [("nb", "Evicted"), ("urgent", "Running")]
    assert preempted["evictions"][0]["message"].startswith("Preempted by b/urgent")
    assert [(p["name"], p["phase"]) for p in later["pods"]] == [("urgent", "Running")]


def test_steps_name_their_errors():
    text = """
nodes: [{name: n1, allocatable: {cpu: "2"}}]
steps:
  - delete: [{kind: Deployment, namespace: a, name: ghost}]
"""
    with pytest.raises(ValidationError, match=r"^steps\[0\]: Deployment a/ghost not found$"):
        run(text)
