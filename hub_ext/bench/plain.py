"""The baseline: the same single-pod Jobs created directly, scheduled by plain kube-scheduler."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from . import apiserver, stages
from .cpu import CoreSampler, CpuMeter
from .kube import RUN_LABEL, Cluster, RunningCounter


def job(name: str, run: str, cpu: str, memory: str, priority_class: str) -> dict:
    labels = {RUN_LABEL: run}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "restartPolicy": "Never", "priorityClassName": priority_class,
                         "nodeSelector": {RUN_LABEL: run},
                         "containers": [{"name": "training", "image": "python:3.12-slim",
                                         "command": ["sleep", "3600"],
                                         "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def run_plain(cluster: Cluster, namespaces: list[str], pods: int, *, cpu: str, memory: str, priority_class: str,
              concurrency: int, timeout: float, pids: dict | None = None,
              profile: apiserver.Profile | None = None) -> dict:
    """Create ``pods`` Jobs round-robin over ``namespaces`` from ``concurrency`` threads; pods/s from the
    first create to the last pod Running. ``pids``: more processes whose CPU counts (role -> pid);
    ``profile``: kube-apiserver's CPU profile, started with the side."""
    counter = RunningCounter(cluster.kubeconfig, cluster.selector).start()
    try:
        sent: dict[str, dict[str, float]] = {}  # "namespace/job" -> the client's moments (stages.py)

        def create(i: int) -> None:
            ns = namespaces[i % len(namespaces)]
            moments = sent[f"{ns}/plain-{i}"] = {"create sent": time.time()}
            cluster.batch.create_namespaced_job(ns, job(f"plain-{i}", cluster.run, cpu, memory, priority_class))
            moments["Job created"] = time.time()

        meter = CpuMeter(pids, cluster.kubeconfig).start()
        asked = apiserver.scrape(cluster.api)
        cores = CoreSampler().start()
        if profile is not None:
            profile.start()
        started, wall = time.monotonic(), cores.started
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(create, range(pods)))
        created_s = time.monotonic() - started
        last = counter.wait(pods, timeout)
        took = last - started
        used = meter.stop()
        samples = cores.stop()
        asked = apiserver.difference(asked, apiserver.scrape(cluster.api))
        seen = counter.seen()
        moments = {key: {**m, **seen.get(key, {})} for key, m in sent.items()}
        profiled = {"apiserver_profile": profile.stop()} if profile is not None else {}
        return {**profiled, "pods": pods, "seconds": round(took, 2), "pods_per_s": round(pods / took, 1),
                "create_seconds": round(created_s, 2), "pods_made_seconds": round(counter.last_created - started, 2),
                "running": len(counter.running),
                "pods_seen": len(counter.created), "cpu_seconds": used, "api_server": asked,
                **stages.figures(moments, stages.PLAIN, wall, samples)}
    finally:
        counter.stop()
