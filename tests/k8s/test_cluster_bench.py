"""``tenancy bench --cluster`` at a small size on the real control plane: it answers, and the answers
are right (every pod runs, nothing is created twice, the JSON has its keys). Never on timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLAIN_STAGES = ("create sent", "Job created", "pod created", "pod bound", "Running")
SERVICE_STAGES = ("submitted", "admitted", "create queued", "create slot", "create sent", "Job created", "pod created",
                  "pod bound", "Running")
CORES = {f"cpu{n}" for n in range(os.cpu_count())}  # every core of the machine, each second

SETTINGS = {"bench", "run", "nodes", "node_cpu", "pod_cpu", "teams", "rounds", "components", "service"}
ROW = {"bench", "pods", "plain_pods_per_s", "service_pods_per_s", "ratio", "submit_p50_ms", "submit_p99_ms",
       "plain_cpu_seconds", "service_cpu_seconds", "plain", "service", "rounds"}
BACKLOG = {"bench", "queued", "queue_fill_seconds", "queued_submit_p50_ms", "queued_submit_p99_ms", "probes",
           "queued_single_submit_p50_ms", "queued_single_submit_p99_ms", "single_submits",
           "queued_waiting_submit_p50_ms", "queued_waiting_submit_p99_ms", "waiting_submits", "waiting_submits_pending"}


def test_cluster_bench_small(control_plane, tmp_path):
    pods = 50
    out = subprocess.run(
        [sys.executable, "-m", "hub_ext.cli", "bench", "--cluster", str(control_plane.kubeconfig), "--json",
         "--pods", str(pods), "--rounds", "2", "--nodes", "5", "--node-cpu", "16", "--queued", "30", "--probes", "10",
         "--settle", "1", "--timeout", "300", "--workdir", str(tmp_path), "--watched"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    settings, row, backlog = rows
    assert SETTINGS <= set(settings) and settings["bench"] == "cluster-settings"
    assert {"kube-apiserver", "etcd", "client"} <= set(settings["affinity"])  # the cores each may run on
    for name in ("kube-controller-manager", "kube-scheduler"):
        assert settings["components"][name]["source"] == "local process"  # this control plane's own
        assert settings["components"][name]["qps"] > 0
    assert ROW <= set(row) and row["pods"] == pods and settings["rounds"] == len(row["rounds"]) == 2
    for one in row["rounds"]:  # each round: the plain side, then the service's (the next one the other way)
        plain, service = one["plain"], one["service"]
        # every pod ran, once: one pod per Job, one Job per workload, one workload per submit
        assert plain["running"] == plain["pods_seen"] == pods
        assert service["running"] == service["pods_seen"] == service["jobs_created"] == service["workloads"] == pods
        assert service["submits"] == pods
        assert one["ratio"] == round(service["pods_per_s"] / plain["pods_per_s"], 2)
        # where the CPU went: this control plane's processes on both sides, the service and hub on its own
        for side in (plain, service):
            assert side["cpu_seconds"]["kube-apiserver"] > 0 and side["cpu_seconds"]["all"] > 0
        assert service["cpu_seconds"]["tenancy service"] > 0 and "jupyterhub" in service["cpu_seconds"]
        assert "tenancy service" not in plain["cpu_seconds"]
        # the service's CPU by thread, under the names its threads give themselves: its event loop does
        # the most, and the watches of our pods and Jobs, named, are among the others
        threads = service["threads_cpu_seconds"]
        assert list(threads)[0] == "main" and threads["main"] <= service["cpu_seconds"]["tenancy service"] + 0.05
        assert {"watch-our pods", "watch-our jobs", "k8s"} <= set(threads), threads
        # the plain side once more, with the service's watches held by a process of their own: every
        # pod and Job of the run came to it (added, then changed), and its CPU counts on that side
        watched = one["watched"]
        assert watched["running"] == watched["pods_seen"] == pods
        assert watched["watch_events"] >= 3 * pods, watched
        assert watched["cpu_seconds"]["watcher"] > 0 and "watcher" not in plain["cpu_seconds"]
        assert one["watched_ratio"] == round(watched["pods_per_s"] / plain["pods_per_s"], 2)
        # where each pod's time went: every stage recorded for every pod, on each side (stages.py), and
        # a timeline in which every pod reached each stage once, with each core's load
        for side, chain in ((plain, PLAIN_STAGES), (watched, PLAIN_STAGES), (service, SERVICE_STAGES)):
            assert list(side["stages"]) == list(chain[1:])
            for stage, f in side["stages"].items():
                assert f["pods"] == pods and 0 <= f["p50_ms"] <= f["p95_ms"] <= f["max_ms"], (stage, f)
            for stage in chain:
                assert sum(r["entered"].get(stage, 0) for r in side["timeline"]) == pods, stage
            assert [r["t"] for r in side["timeline"]] == list(range(len(side["timeline"])))
            assert all(set(r["cores"]) == CORES for r in side["timeline"][:-1]), side["timeline"]
        assert sum(r["entered"].get("answered", 0) for r in service["timeline"]) == pods
        # what each side asked of the API server (its counters): a Job and a binding per pod, the pods' watch events
        for side in (plain, watched, service):
            asked = side["api_server"]
            assert asked["requests"]["POST jobs"] >= pods and asked["requests"]["POST pods/binding"] >= pods, asked
            assert asked["watch_events"]["pods"] >= 3 * pods and asked["watch_bytes"]["pods"] > 0, asked
        assert service["affinity"]["tenancy service"] and service["affinity"]["jupyterhub"]
    assert row["ratio"] == round(sum(r["ratio"] for r in row["rounds"]) / 2, 2)  # the median of two
    assert row["ratio"] > 0 and row["submit_p99_ms"] >= row["submit_p50_ms"] > 0
    assert row["service_cpu_seconds"]["tenancy service"] == round(
        sum(r["service"]["cpu_seconds"]["tenancy service"] for r in row["rounds"]) / 2, 2)  # the median of two
    assert row["service_threads_cpu_seconds"]["main"] == round(
        sum(r["service"]["threads_cpu_seconds"]["main"] for r in row["rounds"]) / 2, 2)
    assert {"watched_pods_per_s", "watched_ratio", "watched_cpu_seconds"} <= set(row)
    assert row["watched_ratio"] == round(sum(r["watched_ratio"] for r in row["rounds"]) / 2, 2)
    assert row["watched_cpu_seconds"]["watcher"] > 0
    assert BACKLOG <= set(backlog) and backlog["queued"] == 30 and backlog["probes"] == 10
    assert backlog["single_submits"] == 10
    assert backlog["queued_single_submit_p99_ms"] >= backlog["queued_single_submit_p50_ms"] > 0
    # the backlog user's submits behind the queue: its team's ResourceQuota is full, so each is answered Pending
    assert backlog["waiting_submits"] == backlog["waiting_submits_pending"] == 10
    assert backlog["queued_waiting_submit_p99_ms"] >= backlog["queued_waiting_submit_p50_ms"] > 0
    # the README's tables from this output (tools/bench/cluster_report.py): the medians and each round's ratio
    saved = tmp_path / "run.json"
    saved.write_text(out.stdout)
    report = subprocess.run([sys.executable, str(REPO / "tools" / "bench" / "cluster_report.py"), str(saved),
                             "--timeline", "2", "--bucket", "2"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    text = report.stdout.splitlines()
    each = ", ".join(f"{r['ratio']:g}" for r in row["rounds"])
    assert f"**{row['ratio']:.2f}×** ({each}) | {row['watched_ratio']:.2f}×" in report.stdout
    assert f"| ten users at once (10) | {backlog['queued_submit_p50_ms']:g} / " in report.stdout
    assert any(line.startswith("| main | ") for line in text)  # the service's threads, a pod each round
    steps = [line.split(" | ") for line in text[text.index("round 2, every 2 s:") + 4:]]
    assert sum(int(cells[1]) for cells in steps if cells[1].strip()) == pods  # every Job of plain's side
    # everything the run made on the cluster is gone again
    from kubernetes import client

    api = control_plane.api_client()
    try:
        selector = f"tenancy-bench={settings['run']}"
        assert not client.CoreV1Api(api).list_node(label_selector=selector).items
        assert not client.CoreV1Api(api).list_namespace(label_selector=selector).items
    finally:
        api.close()


def test_only_this_clusters_control_plane_is_measured(control_plane, tmp_path):
    """Other control planes on the machine (another test's, other work's) are not counted: the
    processes are picked by the kubeconfig's server (the API server's port, its etcd, the
    components that talk to it)."""
    from hub_ext.bench.cpu import CpuMeter, _control_plane, affinity

    found = _control_plane(str(control_plane.kubeconfig))
    assert sorted(found.values()) == sorted(control_plane.pids())  # each of its five, by name
    assert {pid: role for pid, role in found.items()} == {pid: name for name, pid in control_plane.pids().items()}
    other = tmp_path / "other.kubeconfig"  # a cluster with no process here
    other.write_text(control_plane.kubeconfig.read_text().replace(control_plane.server, "https://127.0.0.1:1"))
    assert _control_plane(str(other)) == {}
    assert set(affinity(kubeconfig=str(control_plane.kubeconfig))) == {*control_plane.pids(), "client"}
    meter = CpuMeter(kubeconfig=str(control_plane.kubeconfig)).start()
    assert set(meter.stop()) <= {*control_plane.pids(), "client", "all"}
