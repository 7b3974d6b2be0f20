"""A synthetic week of work as a scenario (the format of ``tenancy simulate``), deterministic for a seed.

Single-pod Jobs arrive more by day than by night, in every leaf's namespace of
``synthetic.tree_manifest``; each runs for its ``tenancy.jupyter.org/duration``.
"""

from __future__ import annotations

import math
import random

from .synthetic import CLASSES, NODE_CPU, NODE_MEM_GI, SIZES, tree_manifest

WEEK_S = 7 * 24 * 3600
MEAN_RUN_S = 2 * 3600


def _arrivals(count: int, rng: random.Random) -> list[int]:
    """Whole seconds in the week, twice as dense at midday as at midnight."""
    out = []
    while len(out) < count:
        t = rng.uniform(0, WEEK_S)
        if rng.random() < (2 + math.sin(2 * math.pi * (t % 86400) / 86400 - math.pi / 2)) / 3:
            out.append(int(t))
    return sorted(out)


def _job(i: int, ns: str, size: int, priority_class: str, seconds: int) -> dict:
    cpu, mem = SIZES[size]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{i}", "namespace": ns,
            "annotations": {"tenancy.jupyter.org/duration": f"{seconds}s"}},
            "spec": {"template": {"spec": {"priorityClassName": priority_class, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}}}


def week_scenario(workloads: int, leaves: int, nodes: int, seed: int, *, leaf_max_factor: int = 2) -> dict:
    """The scenario document: ``nodes`` nodes, the bench tree of ``leaves`` leaves, ``workloads`` Jobs over a week."""
    rng = random.Random(seed)
    steps, now, batch = [], 0, []
    for i, at in enumerate(_arrivals(workloads, rng)):
        if at > now:
            if batch:
                steps.append({"apply": batch})
                batch = []
            steps.append({"advance": f"{at - now}s"})
            now = at
        seconds = max(60, int(rng.expovariate(1 / MEAN_RUN_S)))
        batch.append(_job(i, f"ns-{rng.randrange(leaves)}", rng.randrange(len(SIZES)), CLASSES[rng.randrange(2)],
                          seconds))
    if batch:
        steps.append({"apply": batch})
    steps.append({"advance": "24h"})  # let the last of them finish
    return {
        "name": f"a week of {workloads} jobs over {leaves} leaves",
        "nodes": [{"name": f"node-{i}", "allocatable": {"cpu": str(NODE_CPU), "memory": f"{NODE_MEM_GI}Gi"}}
                  for i in range(nodes)],
        "objects": [tree_manifest(leaves, nodes, leaf_max_factor)],
        "steps": steps,
    }
