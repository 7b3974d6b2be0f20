"""Synthetic clusters, quota trees and workloads of a given size, deterministic for a seed."""

from __future__ import annotations

import math
import random

from ..quota.pods import parse_pod_spec
from ..quota.tree import parse_tree
from ..scheduler.engine import Engine

NODE_CPU, NODE_MEM_GI, NODE_GPU = 64, 256, 8
SIZES = (("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("4", "8Gi"))
CLASSES = ("low-priority-dev", "high-priority-research", "critical-prod")


def make_tree(leaves: int, nodes: int, leaf_max_factor: int = 2):
    """root -> departments -> leaves; guarantees split half the cluster, leaf ceilings a multiple of the guarantee."""
    return parse_tree(tree_manifest(leaves, nodes, leaf_max_factor))


def tree_manifest(leaves: int, nodes: int, leaf_max_factor: int = 2) -> dict:
    """The ElasticQuotaTree manifest ``make_tree`` parses (a scenario's object)."""
    depts = max(1, round(math.sqrt(leaves)))
    cpu, mem = nodes * NODE_CPU, nodes * NODE_MEM_GI
    per_leaf_cpu, per_leaf_mem = cpu // (2 * leaves), mem // (2 * leaves)
    children, n = [], 0
    for d in range(depts):
        count = leaves // depts + (1 if d < leaves % depts else 0)
        kids = []
        for _ in range(count):
            kids.append({
                "name": f"leaf-{n}", "namespaces": [f"ns-{n}"],
                "min": {"cpu": per_leaf_cpu, "memory": f"{per_leaf_mem}Gi"},
                "max": {"cpu": leaf_max_factor * per_leaf_cpu or 1, "memory": f"{leaf_max_factor * per_leaf_mem or 1}Gi"},
            })
            n += 1
        children.append({
            "name": f"dept-{d}", "children": kids,
            "min": {"cpu": per_leaf_cpu * count, "memory": f"{per_leaf_mem * count}Gi"},
            "max": {"cpu": cpu, "memory": f"{mem}Gi"},
        })
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
        "metadata": {"name": "bench"},
        "spec": {"root": {"name": "root", "min": {"cpu": cpu, "memory": f"{mem}Gi"},
                          "max": {"cpu": cpu, "memory": f"{mem}Gi"}, "children": children}},
    }


def make_engine(leaves: int, nodes: int, *, tree: bool = True, leaf_max_factor: int = 2) -> Engine:
    engine = Engine(make_tree(leaves, nodes, leaf_max_factor) if tree else None)
    for i in range(nodes):
        engine.add_node(f"node-{i}", {"cpu": NODE_CPU * 1000, "memory": NODE_MEM_GI * 1024**3 * 1000})
    return engine


_SPECS: dict = {}


def pod_spec(size: int, priority_class: str):
    key = (size, priority_class)
    if key not in _SPECS:
        cpu, mem = SIZES[size]
        _SPECS[key] = parse_pod_spec({
            "priorityClassName": priority_class,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
        }, "bench pod")
    return _SPECS[key]


def submit_many(engine: Engine, count: int, leaves: int, rng: random.Random, now: float, *,
                priority_class: str | None = None, prefix: str = "p") -> list:
    pods = []
    for i in range(count):
        ns = f"ns-{rng.randrange(leaves)}"
        pc = priority_class or CLASSES[rng.randrange(2)]
        pods.append(engine.submit(ns, f"{prefix}-{i}", pod_spec(rng.randrange(len(SIZES)), pc), now))
    return pods
