"""Measure admissions/s, one admission's latency (also behind a backlog of pods that cannot start) and
one preemption decision's latency at growing scale.

Every figure comes from the same engine the service runs, single process.
Latencies are wall-clock percentiles over repeated single decisions on a
loaded cluster; the growth lines compare the largest scale with the smallest.
"""

from __future__ import annotations

import gc
import json
import random
import time

from .synthetic import make_engine, pod_spec, submit_many

ADMISSION_SCALES = [  # (leaves, pending pods, nodes)
    (10, 1_000, 50),
    (100, 10_000, 500),
    (1_000, 10_000, 5_000),
    (1_000, 100_000, 5_000),
]
PREEMPTION_SCALES = [  # (leaves, running pods, nodes): 64 one-cpu pods fill a node
    (100, 1_024, 16),
    (100, 10_240, 160),
    (100, 51_200, 800),
    (1_000, 51_200, 800),  # and ten times the namespaces
]
# (leaves, pods, nodes) where most pods cannot start: leaves at their max, the cluster full.
# One admission must not cost more with a backlog (parked pods are woken only by what may help them).
BACKLOG_SCALES = [
    (1_000, 20_000, 250),  # about 10,000 left waiting
    (10_000, 100_000, 5_000),  # about 800 left waiting, behind ten times the leaves
]
QUICK_ADMISSION = [(10, 1_000, 50), (100, 5_000, 250)]
QUICK_BACKLOG = [(100, 4_000, 50)]
QUICK_PREEMPTION = [(50, 1_024, 16), (50, 5_120, 80)]
SAMPLES = 1000


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_admission(leaves: int, pods: int, nodes: int, seed: int, kind: str = "admission") -> dict:
    """Queue ``pods`` single-pod workloads, time the passes that admit them, then single admissions.

    With ``kind`` "backlog" the same measure is taken on a cluster that cannot hold them all:
    ``pending_after`` pods are left waiting while single admissions are timed.
    """
    rng = random.Random(seed)
    engine = make_engine(leaves, nodes)
    t0 = time.perf_counter()
    submit_many(engine, pods, leaves, rng, 0.0, priority_class="low-priority-dev")
    submit_s = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    admitted, rounds = 0, 0
    while True:
        rounds += 1
        got = len(engine.schedule(1.0).admitted)
        admitted += got
        if not got:
            break
    schedule_s = time.perf_counter() - t0
    # One admission on the loaded cluster: submit one pod, decide, remove it again.
    lat = []
    for i in range(SAMPLES):
        pod = engine.submit(f"ns-{rng.randrange(leaves)}", f"one-{i}", pod_spec(0, "low-priority-dev"), 2.0)
        t = time.perf_counter()
        engine.schedule(2.0)
        lat.append(time.perf_counter() - t)
        engine.delete(pod.uid)
    return {
        "bench": kind, "leaves": leaves, "pods": pods, "nodes": nodes,
        "admitted": admitted, "pending_after": len(engine.pending), "rounds": rounds,
        "submissions_per_s": round(pods / submit_s), "admissions_per_s": round(admitted / schedule_s),
        "admission_p50_ms": round(_pct(lat, 0.5) * 1e3, 3), "admission_p99_ms": round(_pct(lat, 0.99) * 1e3, 3),
    }


def bench_preemption(leaves: int, running: int, nodes: int, seed: int) -> dict:
    """Fill the cluster with low-priority pods, then time single preemption decisions of high-priority ones."""
    rng = random.Random(seed)
    engine = make_engine(leaves, nodes, tree=False)
    capacity_pods = nodes * 64  # 1-cpu pods
    assert running <= capacity_pods
    for i in range(running):
        engine.submit(f"ns-{rng.randrange(leaves)}", f"low-{i}", pod_spec(1, "low-priority-dev"), 0.0)
    engine.schedule(0.0)
    # Fill what is left so every further pod must preempt.
    filler = capacity_pods - running
    for i in range(filler):
        engine.submit(f"ns-{rng.randrange(leaves)}", f"fill-{i}", pod_spec(1, "low-priority-dev"), 0.0)
    engine.schedule(0.0)
    lat, evicted = _time_decisions(engine, lambda i: engine.submit(
        f"ns-{rng.randrange(leaves)}", f"hi-{i}", pod_spec(rng.randrange(1, 4), "critical-prod"), 1.0 + i))
    return {
        "bench": "preemption", "leaves": leaves, "running_pods": running + filler, "nodes": nodes,
        "decisions": SAMPLES, "evictions": evicted,
        "preemption_p50_ms": round(_pct(lat, 0.5) * 1e3, 3), "preemption_p99_ms": round(_pct(lat, 0.99) * 1e3, 3),
    }


def _time_decisions(engine, submit_one, *, drop_pending: bool = False, samples: int = SAMPLES):
    """Time single decisions: submit one pod, schedule; victims leave at once.

    Returns (latencies in seconds, evictions made).
    """
    gc.collect()
    lat, evicted = [], 0
    for i in range(samples):
        submit_one(i)
        t = time.perf_counter()
        decisions = engine.schedule(1.0 + i)
        lat.append(time.perf_counter() - t)
        evicted += len(decisions.evictions)
        for ev in decisions.evictions:
            engine.complete_eviction(ev.victim.uid, 1.0 + i)
            engine.delete(ev.victim.uid)
        if drop_pending:  # a reclaimer that could not get in leaves, so every sample starts alike
            for p in list(engine.pending):
                engine.delete(p.uid)
    return lat, evicted


def bench_reclaim(leaves: int, running: int, nodes: int, seed: int) -> dict:
    """Half the leaves borrow the whole cluster; pods of the idle half reclaim their guarantee."""
    rng = random.Random(seed)
    # Leaves may borrow up to the whole cluster; the busy half takes all of it.
    engine = make_engine(leaves, nodes, leaf_max_factor=2 * leaves)
    busy = [f"ns-{i}" for i in range(0, leaves, 2)]
    for i in range(nodes * 64):  # fill the cluster
        engine.submit(busy[rng.randrange(len(busy))], f"b-{i}", pod_spec(1, "high-priority-research"), 0.0)
    engine.schedule(0.0)
    idle = [f"ns-{i}" for i in range(1, leaves, 2)]
    # Each idle leaf can take back its guarantee (in 1-cpu pods) and no more: time that many.
    guarantee = engine.quota.nodes["leaf-1"].min["cpu"] // 1000
    lat, evicted = _time_decisions(engine, lambda k: engine.submit(
        idle[rng.randrange(len(idle))], f"r-{k}", pod_spec(1, "low-priority-dev"), 1.0 + k),
        drop_pending=True, samples=min(SAMPLES, len(idle) * guarantee))
    running_now = sum(1 for p in engine.pods.values() if p.phase.value == "Running")
    return {
        "bench": "reclaim", "leaves": leaves, "running_pods": running_now, "nodes": nodes,
        "decisions": len(lat), "evictions": evicted,
        "reclaim_p50_ms": round(_pct(lat, 0.5) * 1e3, 3), "reclaim_p99_ms": round(_pct(lat, 0.99) * 1e3, 3),
    }


def run(quick: bool, seed: int):
    for scale in QUICK_ADMISSION if quick else ADMISSION_SCALES:
        yield bench_admission(*scale, seed)
    for scale in QUICK_BACKLOG if quick else BACKLOG_SCALES:
        yield bench_admission(*scale, seed, kind="backlog")
    for scale in QUICK_PREEMPTION if quick else PREEMPTION_SCALES:
        yield bench_preemption(*scale, seed)
    for scale in QUICK_PREEMPTION if quick else PREEMPTION_SCALES:
        yield bench_reclaim(*scale, seed)


def _growth(results, kind, metric, size_key):
    """Cost at the largest size against the smallest, with the number of leaves held fixed."""
    groups: dict = {}
    for r in results:
        if r["bench"] == kind:
            groups.setdefault(r["leaves"], []).append(r)
    comparable = [rows for rows in groups.values() if len(rows) >= 2]
    if not comparable:
        return None
    rows = max(comparable, key=lambda rows: rows[0]["leaves"])
    first, last = min(rows, key=lambda r: r[size_key]), max(rows, key=lambda r: r[size_key])
    return {
        "bench": f"{kind}-growth", "metric": metric, "leaves": first["leaves"],
        "scale_factor": round(last[size_key] / first[size_key], 1),
        "nodes_factor": round(last["nodes"] / first["nodes"], 1),
        "cost_factor": round(last[metric] / max(first[metric], 1e-9), 2),
    }


def main(args) -> int:
    results = []
    for row in run(args.quick, args.seed):
        results.append(row)
        print(json.dumps(row) if args.json else _line(row), flush=True)
    for growth in (
        _growth(results, "admission", "admission_p99_ms", "pods"),
        _growth(results, "preemption", "preemption_p99_ms", "running_pods"),
        _growth(results, "reclaim", "reclaim_p99_ms", "running_pods"),
    ):
        if growth:
            print(json.dumps(growth) if args.json else _line(growth), flush=True)
    return 0


def _line(row: dict) -> str:
    kind = row["bench"]
    if kind in ("admission", "backlog"):
        return (f"{kind:<11} leaves={row['leaves']:>5} pods={row['pods']:>7} nodes={row['nodes']:>5}  "
                f"{row['admissions_per_s']:>8} admissions/s  ({row['admitted']} admitted, "
                f"{row['pending_after']} left waiting)  "
                f"one admission p50 {row['admission_p50_ms']} ms p99 {row['admission_p99_ms']} ms  "
                f"submit {row['submissions_per_s']}/s")
    if kind in ("preemption", "reclaim"):
        return (f"{kind:<11} leaves={row['leaves']:>5} running={row['running_pods']:>7} nodes={row['nodes']:>5}  "
                f"decision p50 {row[kind + '_p50_ms']} ms p99 {row[kind + '_p99_ms']} ms  "
                f"({row['evictions']} evictions in {row['decisions']} decisions)")
    return (f"{kind:<20} {row['metric']} at {row['leaves']} leaves: x{row['scale_factor']} pods, "
            f"x{row['nodes_factor']} nodes -> x{row['cost_factor']} cost")
