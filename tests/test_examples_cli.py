"""Black-box tests of ``tenancy simulate`` / ``tenancy validate`` on every scenario in examples/.

Each example's comments say what the seeds say should happen; the tables below hold
the same numbers, step by step: pods per namespace and phase (Running, Pending,
Rejected, Succeeded), the namespaces of the pods evicted in that step, and, where an
example's comments give it, the simulated time after the step. The CLI runs as a
subprocess, exactly as a user runs it.

At the end, ``test_bug_*`` are minimal reproductions of engine/simulator bugs found
while writing the examples; they fail until the bugs are fixed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
COUNTED = ("Running", "Pending", "Rejected", "Succeeded")


def tenancy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hub_ext.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@lru_cache(maxsize=None)
def simulate_json(path: str) -> tuple[dict, ...]:
    proc = tenancy("simulate", path, "--json")
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    assert proc.stderr == ""
    return tuple(json.loads(line) for line in proc.stdout.splitlines())


@lru_cache(maxsize=None)
def simulate_table(path: str) -> str:
    proc = tenancy("simulate", path)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return proc.stdout


def counts(report: dict) -> dict[str, dict[str, int]]:
    """{namespace: {phase: n}} for the phases we count, zeros left out."""
    c = Counter((p["namespace"], p["phase"]) for p in report["pods"] if p["phase"] in COUNTED)
    out: dict[str, dict[str, int]] = {}
    for (ns, phase), n in sorted(c.items()):
        out.setdefault(ns, {})[phase] = n
    return out


def evicted_namespaces(report: dict) -> list[str]:
    return sorted(e["namespace"] for e in report["evictions"])


def pods(report: dict, namespace: str, phase: str) -> list[dict]:
    return [p for p in report["pods"] if p["namespace"] == namespace and p["phase"] == phase]


@dataclass
class Step:
    pods: dict[str, dict[str, int]]
    evicted: list[str] = field(default_factory=list)
    time: float | None = None


def R(n):  # noqa: N802 - tiny constructors keep the tables readable
    return {"Running": n}


def phases(**kw):
    return {k.capitalize(): v for k, v in kw.items() if v}


EXPECTED: dict[str, list[Step]] = {
    # The second seed's demo: Running per namespace 4 -> 4,4 -> 3,3,2 -> 2,2,2,2;
    # one pod evicted from each of namespace1/namespace2 at steps 3 and 4, none before.
    "ack-demo.yaml": [
        Step({"namespace1": phases(running=4, pending=1)}),
        Step({"namespace1": phases(running=4, pending=1), "namespace2": phases(running=4, pending=1)}),
        Step({"namespace1": phases(running=3, pending=2), "namespace2": phases(running=3, pending=2),
              "namespace3": phases(running=2, pending=3)},
             ["namespace1", "namespace2"], 30),
        Step({"namespace1": phases(running=2, pending=3), "namespace2": phases(running=2, pending=3),
              "namespace3": phases(running=2, pending=3), "namespace4": phases(running=2, pending=3)},
             ["namespace1", "namespace2"], 60),
    ],
    "seed1-priority-preemption.yaml": [
        Step({"team-beta": R(4)}, [], 0),
        Step({"team-alpha": phases(pending=1), "team-beta": R(4)}, [], 0),
        Step({"team-alpha": phases(running=1, pending=1), "team-beta": phases(running=3, pending=1)},
             ["team-beta"], 30),
        Step({"team-alpha": R(1), "team-beta": phases(running=3, pending=1)}, [], 30),
    ],
    "seed1-resourcequota.yaml": [
        Step({"team-alpha": R(4)}),
        Step({"team-alpha": R(5)}),
        Step({"team-alpha": phases(running=5, rejected=1)}),
        Step({"team-alpha": phases(running=10, rejected=1)}),
        Step({"team-alpha": R(10)}),
        Step({"team-alpha": R(10), "team-gamma": phases(rejected=1)}),
        Step({"team-alpha": R(10), "team-gamma": R(1)}),
    ],
    "training-jobs.yaml": [
        Step({"team-a": R(4)}, [], 0),
        Step({"team-a": phases(running=2, pending=2), "team-b": R(2)}, ["team-a", "team-a"], 30),
        Step({"team-a": phases(running=2, pending=2), "team-b": phases(running=2, succeeded=2)}, [], 90),
        Step({"team-a": R(4), "team-b": phases(succeeded=4)}, [], 150),
        Step({"team-a": phases(running=4, pending=1), "team-b": phases(succeeded=4)}, ["team-a"], 180),
        Step({"team-a": phases(running=4, succeeded=1), "team-b": phases(succeeded=4)}, [], 210),
    ],
    "gpu-only-tree.yaml": [
        Step({"team-a": R(8)}, [], 0),
        Step({"team-a": R(8), "team-b": R(3)}, [], 0),
        Step({"team-a": phases(running=4, pending=4), "team-b": R(7)}, ["team-a"] * 4, 30),
        Step({"team-a": phases(running=4, pending=4), "team-b": phases(running=7, pending=1)}, [], 30),
    ],
    # Issue 9's first example: b's one 15-CPU pod borrows 5; a takes its guarantee back.
    "large-borrower.yaml": [
        Step({"b": R(1)}, [], 0),
        Step({"a": R(1), "b": R(1)}, [], 0),
        Step({"a": R(2), "b": phases(pending=1)}, ["b"], 30),
    ],
    # Issue 9's second example: one of b's borrowed pods goes, not a's own notebook.
    "borrowed-room-first.yaml": [
        Step({"a": R(1)}, [], 0),
        Step({"a": R(1), "b": R(4)}, [], 0),
        Step({"a": R(2), "b": phases(running=3, pending=1)}, ["b"], 30),
    ],
    "gangs.yaml": [
        Step({"team-b": R(6)}, [], 0),
        Step({"team-a": R(4), "team-b": phases(pending=6)}, ["team-b"] * 6, 30),
        Step({"team-a": R(4), "team-b": phases(running=1, pending=6)}, [], 30),
        Step({"team-a": phases(succeeded=4), "team-b": R(7)}, [], 90),
    ],
    # Issue 20: fashion-mnist for team-a, team-b and team-d (whose quota allows no claim at first).
    "datasets.yaml": [
        Step({"team-a": R(2), "team-b": R(1)}, [], 0),
        Step({"team-a": R(2), "team-b": R(1), "team-c": phases(rejected=1)}, [], 0),
        Step({"team-a": R(2), "team-b": R(1), "team-c": phases(rejected=1), "team-d": phases(pending=1)}, [], 0),
        Step({"team-a": R(2), "team-b": R(1), "team-c": phases(rejected=1), "team-d": R(1)}, [], 0),
        Step({"team-a": phases(succeeded=2), "team-b": phases(succeeded=1), "team-c": phases(rejected=1),
              "team-d": phases(succeeded=1)}, [], 60),
    ],
}

STEP_CASES = [
    pytest.param(name, i, id=f"{name.removesuffix('.yaml')}-step{i + 1}")
    for name, steps in EXPECTED.items()
    for i in range(len(steps))
]


def report_of(name: str, index: int) -> dict:
    reports = simulate_json(str(EXAMPLES / name))
    assert len(reports) == len(EXPECTED[name]), "number of steps"
    return reports[index]


# -- every example, every step ------------------------------------------------------------

def test_every_example_has_expectations():
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_lines_are_numbered_steps(name):
    reports = simulate_json(str(EXAMPLES / name))
    assert [r["step"] for r in reports] == list(range(1, len(EXPECTED[name]) + 1))
    for r in reports:
        assert {"step", "action", "time", "pods", "quota", "evictions", "warnings", "datasets"} <= set(r)
        for p in r["pods"]:
            assert p["phase"] in ("Running", "Pending", "Terminating", "Rejected", "Evicted", "Succeeded")
            assert {"namespace", "name", "owner", "priorityClassName", "priority", "node", "requests", "reason",
                    "message"} <= set(p)
            if p["phase"] == "Pending":
                assert p["reason"] and p["message"], p
                if p["reason"] != "dataset-not-ready":  # held back before the queue
                    assert p["position"] >= 1 and p["leafPosition"] >= 1
            if p["phase"] == "Rejected":
                assert p["reason"] in ("resource-quota", "limit-range", "invalid", "dataset-not-allowed"), p


@pytest.mark.parametrize("name,index", STEP_CASES)
def test_step_counts(name, index):
    expected = EXPECTED[name][index]
    report = report_of(name, index)
    assert counts(report) == expected.pods
    assert evicted_namespaces(report) == sorted(expected.evicted)
    if expected.time is not None:
        assert report["time"] == expected.time


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_accepts_every_example(name):
    proc = tenancy("validate", str(EXAMPLES / name))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert f"{EXAMPLES / name}: ok: scenario with" in proc.stdout
    assert f"{len(EXPECTED[name])} step(s)" in proc.stdout


def _table_blocks(text: str) -> list[str]:
    starts = [m.start() for m in re.finditer(r"^step \d+: ", text, flags=re.M)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table_mentions_each_step_and_its_reasons(name):
    path = str(EXAMPLES / name)
    blocks = _table_blocks(simulate_table(path))
    reports = simulate_json(path)
    assert len(blocks) == len(reports)
    for block, report in zip(blocks, reports):
        assert block.startswith(f"step {report['step']}: {report['action']}")
        assert f"t={report['time']:g}s" in block
        for ns, by_phase in counts(report).items():
            assert re.search(rf"^\s+{re.escape(ns)}\s+\d", block, flags=re.M), (ns, block)
        for p in report["pods"]:
            if p["phase"] in ("Pending", "Rejected"):
                assert p["message"] in block, (p["message"], block)
        for e in report["evictions"]:
            assert f"evicted {e['namespace']}/{e['name']}: {e['message']}" in block


# -- what each example is about, beyond the counts ------------------------------------------

def test_ack_demo_reclaims_for_the_guaranteed_leaves():
    reports = simulate_json(str(EXAMPLES / "ack-demo.yaml"))
    for step, preemptor_ns in ((3, "namespace3"), (4, "namespace4")):
        evictions = reports[step - 1]["evictions"]
        assert {e["reason"] for e in evictions} == {"reclaimed"}
        assert {e["preemptor"].split("/")[0] for e in evictions} == {preemptor_ns}
    final = reports[-1]["quota"]
    for leaf in ("root.a.1", "root.a.2", "root.b.1", "root.b.2"):
        assert final[leaf]["used"] == {"cpu": "10"}
    assert final["root"]["used"] == {"cpu": "40"}
    # First step: the fifth pod waits on its leaf's max.
    pending = pods(reports[0], "namespace1", "Pending")
    assert [p["reason"] for p in pending] == ["quota-max"]
    assert pending[0]["details"]["node"] == "root.a.1"


def test_seed1_priority_preemption_evicts_exactly_one_low_priority_pod():
    reports = simulate_json(str(EXAMPLES / "seed1-priority-preemption.yaml"))
    waiting = pods(reports[1], "team-alpha", "Pending")
    assert [(p["name"], p["reason"], p["priorityClassName"]) for p in waiting] == [
        ("alpha-notebook", "cluster-capacity", "low-priority-dev")]
    (eviction,) = reports[2]["evictions"]
    assert eviction["preemptor"] == "team-alpha/prod-training-job-1"
    assert eviction["reason"] == "preempted"
    running = pods(reports[2], "team-alpha", "Running")
    assert [(p["name"], p["priorityClassName"], p["priority"]) for p in running] == [
        ("prod-training-job-1", "critical-prod", 1000000)]
    # Deleting the training pod gives the GPU to the oldest waiting notebook.
    assert [p["name"] for p in pods(reports[3], "team-alpha", "Running")] == ["alpha-notebook"]


def test_seed1_resourcequota_messages():
    reports = simulate_json(str(EXAMPLES / "seed1-resourcequota.yaml"))

    def rejected(step, ns):
        return [(p["name"], p["reason"], p["message"]) for p in pods(reports[step - 1], ns, "Rejected")]

    assert rejected(3, "team-alpha") == [(
        "big-experiment", "resource-quota",
        'pods "big-experiment" is forbidden: exceeded quota: dev-quota, requested: requests.cpu=6, '
        "used: requests.cpu=16500m, limited: requests.cpu=20",
    )]
    assert rejected(4, "team-alpha") == [(
        "workers-5", "resource-quota",
        'pods "workers-5" is forbidden: exceeded quota: dev-quota, requested: pods=1, used: pods=10, limited: pods=10',
    )]
    assert rejected(6, "team-gamma") == [(
        "gpu-only-pod", "resource-quota",
        'pods "gpu-only-pod" is forbidden: failed quota: dev-quota: must specify limits.cpu for: '
        "training-container; requests.cpu for: training-container",
    )]
    # The LimitRange filled the pod that declared nothing.
    (scratch,) = [p for p in reports[1]["pods"] if p["name"] == "scratch"]
    assert scratch["requests"] == {"cpu": "500m", "memory": "1Gi"}
    # A refused bare pod is shown once, then forgotten.
    assert not [p for p in reports[3]["pods"] if p["name"] == "big-experiment"]


def test_training_jobs_complete_and_notebooks_come_back():
    reports = simulate_json(str(EXAMPLES / "training-jobs.yaml"))
    assert {e["preemptor"].split("/")[0] for e in reports[1]["evictions"]} == {"team-b"}
    assert {e["reason"] for e in reports[4]["evictions"]} == {"preempted"}
    assert {e["preemptor"] for e in reports[4]["evictions"]} == {"team-a/eval-0"}
    done = pods(reports[3], "team-b", "Succeeded")
    assert sorted(p["owner"] for p in done) == ["Job/train"] * 4
    assert reports[3]["quota"]["team-a"]["used"]["nvidia.com/gpu"] == "4"
    assert "nvidia.com/gpu" not in reports[3]["quota"]["team-b"]["used"]


def test_gpu_only_tree_leaves_cpu_to_the_cluster():
    reports = simulate_json(str(EXAMPLES / "gpu-only-tree.yaml"))
    tree = reports[0]["quota"]
    assert all(set(tree[n]["min"]) == set(tree[n]["max"]) == {"nvidia.com/gpu"} for n in ("root", "team-a", "team-b"))
    # CPU-only work runs whatever the tree says, and does not count as GPU usage.
    assert reports[1]["quota"]["team-b"]["used"].get("nvidia.com/gpu") is None
    # Reclaim: team-b at its GPU guarantee, team-a back to its own.
    after = reports[2]["quota"]
    assert after["team-a"]["used"]["nvidia.com/gpu"] == "4"
    assert after["team-b"]["used"]["nvidia.com/gpu"] == "4"
    assert {e["reason"] for e in reports[2]["evictions"]} == {"reclaimed"}
    # Each trainer needs one GPU: one victim per trainer, no more.
    assert sorted(Counter(e["preemptor"] for e in reports[2]["evictions"]).values()) == [1, 1, 1, 1]
    # A CPU-only pod cannot reclaim through a GPU-only tree.
    (big,) = pods(reports[3], "team-b", "Pending")
    assert (big["name"], big["reason"]) == ("big-cpu-job", "cluster-capacity")


def test_large_borrower_gives_its_room_back_and_cannot_take_it_again():
    reports = simulate_json(str(EXAMPLES / "large-borrower.yaml"))
    (eviction,) = reports[2]["evictions"]
    assert (eviction["name"], eviction["reason"], eviction["preemptor"]) == ("big-0", "reclaimed", "a/second")
    (waiting,) = pods(reports[2], "b", "Pending")
    assert (waiting["reason"], waiting["message"]) == (
        "quota-max", "quota root is at its max for cpu: needs 15, uses 10 of 20")
    assert reports[2]["quota"]["a"]["used"] == {"cpu": "10"}


def test_borrowed_room_goes_back_before_own_work():
    reports = simulate_json(str(EXAMPLES / "borrowed-room-first.yaml"))
    (eviction,) = reports[2]["evictions"]
    assert (eviction["namespace"], eviction["reason"], eviction["preemptor"]) == ("b", "reclaimed", "a/train")
    assert sorted(p["name"] for p in pods(reports[2], "a", "Running")) == ["notebook", "train"]


def test_gangs_start_whole_wait_whole_and_go_whole():
    reports = simulate_json(str(EXAMPLES / "gangs.yaml"))
    assert {p["gang"]["name"] for p in pods(reports[0], "team-b", "Running")} == {"Job/ddp"}
    assert len({p["node"] for p in pods(reports[0], "team-b", "Running")}) == 2  # one gang across both nodes
    evicted = reports[1]["evictions"]
    assert sorted(e["name"] for e in evicted) == [f"ddp-{i}" for i in range(6)]
    assert {e["preemptor"] for e in evicted} == {"team-a/sweep-0"} and {e["reason"] for e in evicted} == {"reclaimed"}
    waiting = pods(reports[1], "team-b", "Pending")
    assert {p["message"] for p in waiting} == {
        "gang Job/ddp needs 6 pods of cpu=4, memory=16Gi, nvidia.com/gpu=1 at once; 4 would fit: "
        "quota root is at its max for nvidia.com/gpu: needs 6, uses 4 of 8"}
    assert {(p["position"], p["leafPosition"]) for p in waiting} == {(1, 1)}  # one place for the gang
    assert [p["name"] for p in pods(reports[2], "team-b", "Running")] == ["notebook-0"]  # it does not wait behind
    assert reports[3]["quota"]["team-b"]["used"] == {"nvidia.com/gpu": "7"}


def test_bad_gang_annotation_is_one_line_exit_1(tmp_path):
    path = tmp_path / "scenario.yaml"
    text = (EXAMPLES / "gangs.yaml").read_text()
    path.write_text(text.replace('\n            tenancy.jupyter.org/gang: "true"',
                                 '\n            tenancy.jupyter.org/gang: "all"', 1))
    for command in ("simulate", "validate"):
        proc = tenancy(command, str(path))
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr == (f'tenancy: error: {path}: steps[0].apply[0]: Job team-b/ddp: annotation tenancy.jupyter.org/gang '
                               f'must be "true" or "false", got \'all\'\n')


def test_datasets_bound_refused_and_the_work_that_names_them():
    reports = simulate_json(str(EXAMPLES / "datasets.yaml"))
    refused = {"fashion-mnist": {"team-a": "Bound", "team-b": "Bound", "team-d": "Refused"}}
    bound = {"fashion-mnist": {"team-a": "Bound", "team-b": "Bound", "team-d": "Bound"}}
    assert [r["datasets"] for r in reports] == [refused, refused, refused, bound, bound]
    (peek,) = pods(reports[1], "team-c", "Rejected")
    assert (peek["reason"], peek["message"]) == ("dataset-not-allowed", 'pods "peek-0" is forbidden: dataset '
                                                 "fashion-mnist is not for namespace team-c (its namespaces: team-a, "
                                                 "team-b, team-d)")
    (waiting,) = pods(reports[2], "team-d", "Pending")
    assert waiting["reason"] == "dataset-not-ready" and "position" not in waiting
    assert waiting["message"].endswith("limited: persistentvolumeclaims=0")
    assert "  datasets: fashion-mnist (team-a Bound, team-b Bound, team-d Refused)" in simulate_table(
        str(EXAMPLES / "datasets.yaml"))


# -- bugs found on the way: minimal reproductions ----------------------------------------------

def _run(tmp_path, text: str) -> tuple[dict, ...]:
    path = tmp_path / "scenario.yaml"
    path.write_text(textwrap.dedent(text))
    proc = tenancy("simulate", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    return tuple(json.loads(line) for line in proc.stdout.splitlines())


RECLAIM_TWO_RESOURCES = """\
    nodes:
      - {name: n1, allocatable: {cpu: "4", nvidia.com/gpu: "2"}}
    objects:
      - apiVersion: scheduling.sigs.k8s.io/v1beta1
        kind: ElasticQuotaTree
        metadata: {name: tree}
        spec:
          root:
            name: root
            min: {cpu: 4, nvidia.com/gpu: 2}
            max: {cpu: 4, nvidia.com/gpu: 2}
            children:
            - {name: a, namespaces: [a], min: {cpu: 2, nvidia.com/gpu: 1}, max: {cpu: 4, nvidia.com/gpu: 2}}
            - {name: b, namespaces: [b], min: {cpu: 2, nvidia.com/gpu: 1}, max: {cpu: 4, nvidia.com/gpu: 2}}
    steps:
      - apply:
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: nb, namespace: a}
          spec:
            replicas: 2
            template:
              spec:
                containers: [{name: c, resources: {requests: {cpu: 1, nvidia.com/gpu: 1}}}]
      - apply:
        - apiVersion: v1
          kind: Pod
          metadata: {name: train, namespace: b}
          spec:
            priorityClassName: PRIORITY
            containers: [{name: c, resources: {requests: {cpu: 1, nvidia.com/gpu: 1}}}]
"""


@pytest.mark.parametrize("priority", ["low-priority-dev", "critical-prod"], ids=["reclaim", "priority"])
def test_bug_reclaim_blocked_by_unreclaimed_resource(tmp_path, priority):
    """Leaf a borrows a GPU (2 > min 1) while using exactly its cpu min (2 = 2). Leaf b,
    idle and asking for 1 GPU + 1 cpu (within its min of both), must get its guaranteed
    GPU back (rule 1), and a critical-prod pod may preempt a low-priority pod of the
    borrowing leaf (rule 2). Today nobody is evicted: the victims' side check refuses
    any victim whose leaving takes leaf a's *cpu* below its min, although b is short of
    GPUs only and the cpu it frees stays free for a."""
    reports = _run(tmp_path, RECLAIM_TWO_RESOURCES.replace("PRIORITY", priority))
    last = reports[-1]
    assert evicted_namespaces(last) == ["a"]
    assert counts(last) == {"a": phases(running=1, pending=1), "b": R(1)}


def test_no_extra_victim_while_evictions_in_flight(tmp_path):
    """4 GPUs, 4 low-priority pods; a Deployment of 2 critical-prod pods, 1 GPU each,
    needs exactly 2 victims. Regression: at 40181a8 3 were evicted (the second
    preemptor's search did not count the GPU already being freed for the first), so one
    notebook was killed for nothing; db7c884 ("terminating room accounting") fixed it."""
    reports = _run(tmp_path, """\
        nodes:
          - {name: n1, allocatable: {cpu: "8", nvidia.com/gpu: "4"}}
        steps:
          - apply:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: nb, namespace: a}
              spec:
                replicas: 4
                template:
                  spec:
                    containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]
          - apply:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: train, namespace: b}
              spec:
                replicas: 2
                template:
                  spec:
                    priorityClassName: critical-prod
                    containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]
    """)
    last = reports[-1]
    assert evicted_namespaces(last) == ["a", "a"]
    assert counts(last) == {"a": phases(running=2, pending=2), "b": R(2)}
    assert sorted(Counter(e["preemptor"] for e in last["evictions"]).values()) == [1, 1]


def test_bug_reapplying_a_refused_pod_under_the_same_name(tmp_path):
    """A pod refused at submission "never existed" (it is shown once, then forgotten), so
    applying a fixed pod with the same name must work, as with the API server. Today the
    simulator answers 'Pod q/p already exists (delete it first)', and deleting it first
    is impossible in Kubernetes terms (there is nothing to delete)."""
    path = tmp_path / "scenario.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - {name: n1, allocatable: {cpu: "8"}}
        objects:
          - {apiVersion: v1, kind: ResourceQuota, metadata: {name: rq, namespace: q}, spec: {hard: {requests.cpu: "2"}}}
        steps:
          - apply:
            - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: q},
               spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}
          - apply:
            - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: q},
               spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
    """))
    proc = tenancy("simulate", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert counts(first) == {"q": phases(rejected=1)}
    assert counts(second) == {"q": R(1)}


def test_bug_yaml_float_quantity_is_read_as_written(tmp_path):
    """``cpu: 0.1`` (a YAML float, as in countless manifests) is 100m in Kubernetes.
    Today it becomes 101m: the float's binary expansion 0.1000000000000000055... is
    rounded up to the next milli-unit."""
    reports = _run(tmp_path, """\
        nodes:
          - {name: n1, allocatable: {cpu: "8"}}
        steps:
          - apply:
            - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: q},
               spec: {containers: [{name: c, resources: {requests: {cpu: 0.1, memory: 0.2}}}]}}
    """)
    (pod,) = reports[0]["pods"]
    assert pod["requests"] == {"cpu": "100m", "memory": "200m"}
