"""``tools/bench/cluster_report.py``: the README's cluster tables from a run's JSON lines, in the shape
``tenancy bench --cluster --json`` writes them (``cluster.summary`` over rounds whose stages and
timeline come from ``stages.figures``); bad files get one line and exit 2. The k8s tier runs it on a
real run's output (tests/k8s/test_cluster_bench.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hub_ext.bench import stages
from hub_ext.bench.cluster import summary

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "bench" / "cluster_report.py"
PLAIN = ("create sent", "Job created", "pod created", "Running")
SERVICE = ("submitted", "admitted", "Job created", "pod created", "Running")


def _side(chain, pods: int, seconds: float, cpu: dict, start: float = 1000.0) -> dict:
    # pod i reaches each moment of the chain 0.5 s after the one before, pod i starting i/4 s in
    moments = {f"ns/p{i}": {m: start + i / 4 + 0.5 * k for k, m in enumerate(chain)} for i in range(pods)}
    cores = [(start + s + 1, {"cpu0": 1.0, "cpu1": 0.5}) for s in range(int(seconds))]
    return {"pods": pods, "seconds": seconds, "pods_per_s": round(pods / seconds, 1), "submit_p50_ms": 20.0,
            "submit_p99_ms": 90.0, "cpu_seconds": cpu, **stages.figures(moments, chain, start, cores)}


def _run(tmp_path, pods=8) -> Path:
    rounds = []
    for plain_s, service_s, service_cpu in ((4.0, 5.0, 0.04), (4.0, 4.0, 0.02), (5.0, 4.0, 0.03)):
        plain = _side(PLAIN, pods, plain_s, {"kube-apiserver": 3.0, "etcd": 1.0, "client": 0.5, "all": 4.5})
        service = _side(SERVICE, pods, service_s, {"kube-apiserver": 3.5, "etcd": 1.5, "client": 0.25,
                                                   "tenancy service": service_cpu, "jupyterhub": 0.008, "all": 5.3})
        service["threads_cpu_seconds"] = {"main": service_cpu * 0.75, "watch-our pods": service_cpu * 0.25, "k8s": 0.0}
        rounds.append({"plain": plain, "service": service, "ratio": round(service["pods_per_s"] / plain["pods_per_s"], 2)})
    settings = {"bench": "cluster-settings", "affinity": {"kube-apiserver": "0", "client": "1", "etcd": "0"}}
    backlog = {"bench": "cluster-backlog", "queued": 5000, "probes": 500, "queued_submit_p50_ms": 16.0,
               "queued_submit_p99_ms": 51.0, "single_submits": 100, "queued_single_submit_p50_ms": 2.8,
               "queued_single_submit_p99_ms": 8.6, "waiting_submits": 100, "queued_waiting_submit_p50_ms": 1.9,
               "queued_waiting_submit_p99_ms": 6.7}
    path = tmp_path / "run.json"
    path.write_text("\n".join(json.dumps(r) for r in (settings, summary(pods, rounds), backlog)) + "\n")
    return path


def _report(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_the_report_gives_the_medians_each_round_the_cpu_the_stages_and_a_rounds_timeline(tmp_path):
    out = _report(_run(tmp_path), "--timeline", "1", "--bucket", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "8 pods, 3 rounds, pinned: the control plane on cores 0, the rest on 1" in lines[0]
    # pods/s 2.0 / 1.6 (plain 2, 2, 1.6; the service 1.6, 2, 2): each round's ratio, their median
    assert "| 8 | 2 (2, 2, 1.6) | 2 (1.6, 2, 2) | **1.00×** (0.8, 1, 1.25) | 20 / 90 ms | 3.8 ms (5, 2.5, 3.8) |" in lines
    # each round: control plane 4.0 / 5.0 CPU-s, all 4.5 / 5.3, the service's and the hub's ms a pod, the clients
    assert "| 1 | 4.0 / 5.0 | 0.80 | 4.5 / 5.3 | 0.85 | 5.0; 1.0 | 0.5 / 0.2 | 0.80 |" in lines
    # the service's threads, ms a pod each round (8 pods); the pool that used nothing is left out
    assert "| main | 3.75 | 1.88 | 2.81 |" in lines and "| watch-our pods | 1.25 | 0.62 | 0.94 |" in lines
    assert not any(line.startswith("| k8s |") for line in lines)
    assert "| Job created | 500 | 500 |" in lines and "| admitted | | 500 |" in lines
    assert "| ten users at once (500) | 16 / 51 ms |" in lines
    # round 1 in 2-second steps: 8 pods, one every 0.25 s, each step's pods summed, the cores averaged
    rows = [line for line in lines[lines.index("round 1, every 2 s:") + 4:] if line.startswith("| ")]
    plain_jobs = [int(r.split(" | ")[1]) for r in rows if r.split(" | ")[1].strip()]
    assert sum(plain_jobs) == 8 and rows[0].split(" | ")[4:6] == ["100", "50"]


def test_a_file_that_is_not_a_runs_output_gets_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.json"
    cases = {"{not json\n": "bad.json:1: not a JSON line",
             '{"bench": "cluster-settings"}\n': "no cluster row with rounds",
             '{"bench": "cluster", "rounds": [{"plain": {}}]}\n': "not the output of this version's cluster_bench.py"}
    for text, words in cases.items():
        bad.write_text(text)
        out = _report(bad)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    out = _report(tmp_path / "missing.json")
    assert out.returncode == 2 and "missing.json: cannot be read (No such file or directory)" in out.stderr
    out = _report(_run(tmp_path), "--timeline", "4")
    assert out.returncode == 2 and "--timeline 4: the run has rounds 1 to 3" in out.stderr
    out = _report(_run(tmp_path), "--bucket", "0")
    assert out.returncode == 2 and "--bucket 0" in out.stderr and "Traceback" not in out.stderr


def test_a_stage_no_round_recorded_is_a_dash_not_a_figure(tmp_path):
    path = _run(tmp_path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows[1]["rounds"]:  # the service's "admitted" moment missing for every pod of every round
        r["service"]["stages"]["admitted"] = {"from": "submitted", "pods": 0}
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = _report(path)
    assert out.returncode == 0, out.stderr
    assert "| admitted | | – |" in out.stdout.splitlines() and "| Job created | 500 | 500 |" in out.stdout

