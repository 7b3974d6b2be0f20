"""``tenancy replay`` on a real control plane: every example agrees with ``tenancy simulate``.

Each example of ``examples/`` is replayed (kwok nodes, the service's controller and
Kubernetes backend in this process, kube-scheduler placing the pods) and compared step
by step with the simulator: the number of pods per namespace and phase (Running,
Pending, Evicted, Rejected, Succeeded), the simulated time and the evictions. Which
node a pod runs on is kube-scheduler's choice (it spreads, the simulator packs), so
nodes are not compared. After each replay nothing of it is left on the cluster.
Then the command line: its output on a cluster, existing nodes picked by a selector,
and bad input as one line and exit status 1, never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kubernetes import client

from hub_ext.replay.run import Replay
from hub_ext.replay.cluster import REPLAY_LABEL
from hub_ext.sim.scenario import load_scenario
from hub_ext.sim.simulator import Simulator

REPO = Path(__file__).resolve().parents[2]
# Scenarios with datasets have a test of their own (below): it compares more (the datasets and
# each pod's reason) and needs the service's datasets room.
WITH_DATASETS = {p for p in (REPO / "examples").glob("*.yaml") if "kind: Dataset" in p.read_text()}
EXAMPLES = sorted(set((REPO / "examples").glob("*.yaml")) - WITH_DATASETS)
TENANCY = [sys.executable, "-m", "hub_ext.cli"]


def simulate(path) -> list[dict]:
    return list(Simulator(load_scenario(str(path))).run())


async def replay(path, kubeconfig, **options) -> tuple[list[dict], str]:
    run = Replay(str(path), kubeconfig=str(kubeconfig), **options)
    return [report async for report in run.run()], run.run_id


def counts(report: dict) -> dict:
    """{namespace: {phase: pods}} of one step."""
    out: dict = {}
    for (namespace, phase), n in Counter((p["namespace"], p["phase"]) for p in report["pods"]).items():
        out.setdefault(namespace, {})[phase] = n
    return out


def assert_agree(simulated: list[dict], replayed: list[dict]) -> None:
    assert len(replayed) == len(simulated)
    for sim, rep in zip(simulated, replayed):
        step = f"step {sim['step']} ({sim['action']})"
        assert set(rep) == set(sim), step
        assert counts(rep) == counts(sim), f"{step}: replay {counts(rep)} != simulate {counts(sim)}; {rep['warnings']}"
        assert rep["time"] == sim["time"], step
        assert Counter(e["namespace"] for e in rep["evictions"]) == Counter(e["namespace"] for e in sim["evictions"]), step
        assert rep["quota"] == sim["quota"], step
        for pod in rep["pods"]:
            assert set(pod) >= {"namespace", "name", "owner", "priorityClassName", "phase", "reason"}, pod


def leftovers(api, run_id: str) -> list[str]:
    """What the replay ``run_id`` left on the cluster (namespaces being deleted do not count)."""
    core, sched = client.CoreV1Api(api), client.SchedulingV1Api(api)
    selector = f"{REPLAY_LABEL}={run_id}"
    out = [f"node {n.metadata.name}" for n in core.list_node(label_selector=selector).items]
    out += [f"namespace {n.metadata.name}" for n in core.list_namespace(label_selector=selector).items
            if n.status.phase != "Terminating"]
    out += [f"pod {p.metadata.namespace}/{p.metadata.name}" for p in core.list_pod_for_all_namespaces(
        label_selector=selector).items if p.metadata.deletion_timestamp is None]
    # a class the replay made stays while another pod uses it (other tests' pods on a shared cluster)
    in_use = {p.spec.priority_class_name for p in core.list_pod_for_all_namespaces().items
              if (p.metadata.labels or {}).get(REPLAY_LABEL) != run_id}
    out += [f"PriorityClass {c.metadata.name}" for c in sched.list_priority_class(label_selector=selector).items
            if c.metadata.name not in in_use]
    return out


@pytest.mark.asyncio
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
async def test_example_replays_as_simulated(control_plane, api, example):
    replayed, run_id = await replay(example, control_plane.kubeconfig)
    assert_agree(simulate(example), replayed)
    assert not leftovers(api, run_id)


@pytest.mark.asyncio
async def test_existing_nodes_picked_by_a_selector(control_plane, api):
    """``--node-selector``: no node is made; the replay runs on the cluster's own (here a kwok node
    with the scenario's capacity), and leaves it there."""
    example = REPO / "examples" / "large-borrower.yaml"
    control_plane.add_node("replay-existing", {"cpu": "40", "memory": "160Gi"}, labels={"pool": "replay-test"})
    try:
        replayed, run_id = await replay(example, control_plane.kubeconfig, node_selector="pool=replay-test")
        assert_agree(simulate(example), replayed)
        assert {p["node"] for r in replayed for p in r["pods"] if p["phase"] == "Running"} == {"replay-existing"}
        assert not leftovers(api, run_id)
        assert client.CoreV1Api(api).read_node("replay-existing")
    finally:
        client.CoreV1Api(api).delete_node("replay-existing")


def tenancy(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([*TENANCY, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_command_line_prints_what_simulate_prints(control_plane):
    example = REPO / "examples" / "borrowed-room-first.yaml"
    done = tenancy("replay", str(example), "--kubeconfig", str(control_plane.kubeconfig), "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    replayed = [json.loads(line) for line in done.stdout.splitlines()]
    assert_agree(simulate(example), replayed)
    table = tenancy("replay", str(example), "--kubeconfig", str(control_plane.kubeconfig))
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("step 1: apply Pod a/notebook") and "evicted b/research-3" in table.stdout


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tenancy: error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_bad_input_is_one_line(tmp_path):
    example = str(REPO / "examples" / "large-borrower.yaml")
    one_line_error(tenancy("replay", example), "--kubeconfig FILE is required")
    one_line_error(tenancy("replay", example, "--kubeconfig", str(tmp_path / "missing")), "missing: no such file")
    garbage = tmp_path / "garbage.kubeconfig"
    garbage.write_text("this: [is not, a kubeconfig\n")
    one_line_error(tenancy("replay", example, "--kubeconfig", str(garbage)), "not a usable kubeconfig")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: []\nsteps:\n  - advance: soon\n")
    one_line_error(tenancy("replay", str(bad), "--kubeconfig", str(garbage)), "bad.yaml", "steps[0].advance")
    one_line_error(tenancy("replay", example, "--kubeconfig", str(garbage), "--node-selector", "pool"),
                   "--node-selector 'pool'")


def pod_lines(report: dict) -> list[tuple]:
    """Each pod of a step as what simulate and replay both decide: where, which, phase, reason."""
    return sorted((p["namespace"], p["name"], p["phase"], p["reason"]) for p in report["pods"])


@pytest.mark.asyncio
@pytest.mark.parametrize("example", sorted(WITH_DATASETS), ids=lambda p: p.stem)
async def test_datasets_replay_as_simulated(control_plane, api, example):
    """A scenario with datasets on the real cluster: the same ``datasets`` line and the same pods (phase and
    reason) as ``tenancy simulate`` at every step; each namespace's claim really made (a PersistentVolume and
    a claim, Bound by the cluster's PV controller, or refused by its ResourceQuota), mounted by the pods that
    run; nothing left afterwards, the volumes neither."""
    mounted = []
    core = client.CoreV1Api(api)

    async def run():
        replay_run = Replay(str(example), kubeconfig=str(control_plane.kubeconfig))
        out = []
        async for report in replay_run.run():
            pods = core.list_pod_for_all_namespaces(label_selector=f"{REPLAY_LABEL}={replay_run.run_id}").items
            mounted.extend((p.metadata.namespace, v.persistent_volume_claim.claim_name)
                           for p in pods for v in p.spec.volumes or [] if v.persistent_volume_claim)
            claims = core.list_persistent_volume_claim_for_all_namespaces(
                label_selector=f"{REPLAY_LABEL}={replay_run.run_id}").items
            for name, states in report["datasets"].items():
                for ns, state in states.items():
                    made = [c for c in claims if c.metadata.name == name
                            and c.metadata.namespace == replay_run.names.namespace(ns)]
                    assert [c.status.phase for c in made] == (["Bound"] if state == "Bound" else []), (ns, state)
            out.append(report)
        return out, replay_run.run_id

    replayed, run_id = await run()
    simulated = simulate(example)
    assert_agree(simulated, replayed)
    for sim, rep in zip(simulated, replayed):
        step = f"step {sim['step']} ({sim['action']})"
        assert rep["datasets"] == sim["datasets"], step
        assert pod_lines(rep) == pod_lines(sim), step
    assert mounted and {claim for _, claim in mounted} == {"fashion-mnist"}
    assert not leftovers(api, run_id)
    assert not [v for v in core.list_persistent_volume(label_selector=f"{REPLAY_LABEL}={run_id}").items
                if v.metadata.deletion_timestamp is None]


def test_refused_by_rbac_is_one_line(control_plane, api):
    """A user who may not make nodes: the API server's refusal as one line, nothing left behind."""
    kubeconfig = control_plane.user_kubeconfig("replay-nobody")
    done = tenancy("replay", str(REPO / "examples" / "large-borrower.yaml"), "--kubeconfig", str(kubeconfig))
    one_line_error(done, "403", "replay-nobody")
    assert not client.CoreV1Api(api).list_node(label_selector=REPLAY_LABEL).items


def test_unreachable_cluster_is_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "away.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "away",
        "clusters": [{"name": "away", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                  "insecure-skip-tls-verify": True}}],
        "users": [{"name": "away", "user": {"token": "x"}}],
        "contexts": [{"name": "away", "context": {"cluster": "away", "user": "away"}}]}))
    one_line_error(tenancy("replay", str(REPO / "examples" / "large-borrower.yaml"), "--kubeconfig", str(kubeconfig)),
                   f"cannot reach the cluster at https://127.0.0.1:{port}")
