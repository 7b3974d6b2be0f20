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


def gang_job(ns, name, pods, cpu, pc=None, duration=None, gang='"true"'):
    pcl = f"\n          priorityClassName: {pc}" if pc else ""
    dur = f", tenancy.jupyter.org/duration: {duration}" if duration else ""
    return f"""
    - apiVersion: batch/v1
      kind: Job
      metadata: {{name: {name}, namespace: {ns}, annotations: {{tenancy.jupyter.org/gang: {gang}{dur}}}}}
      spec:
        parallelism: {pods}
        template:
          spec:{pcl}
            containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]"""


def test_a_gang_job_waits_whole_then_starts_whole():
    text = """
nodes: [{name: n1, allocatable: {cpu: "4"}}, {name: n2, allocatable: {cpu: "4"}}]
steps:
  - apply:""" + deployment("dev", "nb", 1, 3) + """
  - apply:""" + gang_job("ml", "ddp", 3, 2) + """
  - delete: [{kind: Deployment, namespace: dev, name: nb}]
"""
    notebook, waiting, started = run(text)
    pods = [p for p in waiting["pods"] if p["namespace"] == "ml"]
    assert [p["phase"] for p in pods] == ["Pending"] * 3 and all(p["node"] is None for p in pods)
    assert {p["position"] for p in pods} == {1} and {p["leafPosition"] for p in pods} == {1}
    assert {p["message"] for p in pods} == {
        "gang Job/ddp needs 3 pods of cpu=2 at once; 2 would fit on the cluster's nodes"}
    assert {tuple(sorted(p["gang"].items())) for p in pods} == {(("name", "Job/ddp"), ("size", 3))}
    assert "gang" not in notebook["pods"][0]  # only pods of a gang say so
    assert counts(started) == {"ml": 3}


def test_an_evicted_gang_is_evicted_whole_and_queued_again_whole():
    text = """
nodes: [{name: n1, allocatable: {cpu: "4"}}]
steps:
  - apply:""" + gang_job("ml", "sweep", 2, 2) + """
  - apply:
    - {apiVersion: v1, kind: Pod, metadata: {name: urgent, namespace: ops},
       spec: {priorityClassName: critical-prod, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""
    running, preempted = run(text)
    assert counts(running) == {"ml": 2}
    assert sorted(e["name"] for e in preempted["evictions"]) == ["sweep-0", "sweep-1"]  # 1 cpu needed, both go
    assert {e["message"] for e in preempted["evictions"]} == {
        "Preempted by ops/urgent: lower priority (low-priority-dev) than critical-prod; the whole gang Job/sweep goes"}
    new = [p for p in preempted["pods"] if p["namespace"] == "ml" and p["phase"] == "Pending"]
    assert [p["name"] for p in new] == ["sweep-2", "sweep-3"] and {p["gang"]["size"] for p in new} == {2}


def test_a_waiting_gang_of_another_size_is_made_anew():
    text = """
nodes: [{name: n1, allocatable: {cpu: "4"}}]
steps:
  - apply:""" + gang_job("ml", "ddp", 3, 2) + """
  - apply:""" + gang_job("ml", "ddp", 2, 2)
    waiting, resized = run(text)
    assert counts(waiting, "Pending") == {"ml": 3}
    assert [(p["name"], p["phase"], p["gang"]["size"]) for p in resized["pods"]] == [
        ("ddp-3", "Running", 2), ("ddp-4", "Running", 2)]


def test_gang_annotation_is_checked():
    ok = parse_scenario(yaml.safe_load("steps:\n  - apply:" + gang_job("ml", "a", 2, 1, gang='"false"')))
    assert ok.steps[0].objects[0].gang is False
    with pytest.raises(ValidationError, match=r'^steps\[0\]\.apply\[0\]: Job ml/a: annotation tenancy\.jupyter\.org/gang '
                                              r'must be "true" or "false", got \'yes\'$'):
        parse_scenario(yaml.safe_load("steps:\n  - apply:" + gang_job("ml", "a", 2, 1, gang='"yes"')))
