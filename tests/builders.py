"""Fluent helpers for engine tests: trees, clusters and pods in one line each."""

from __future__ import annotations

from dataclasses import dataclass, field

from hub_ext.quota.pods import parse_pod_spec
from hub_ext.quota.quantity import parse_resource_list
from hub_ext.quota.tree import parse_tree
from hub_ext.scheduler.engine import Engine
from hub_ext.scheduler.model import Phase


def node(name: str, min=None, max=None, namespaces=(), children=()) -> dict:
    """One quota tree node; ``min``/``max`` as plain dicts (``{"cpu": 4}``)."""
    out = {"name": name, "min": dict(min or {}), "max": dict(max or {})}
    if namespaces:
        out["namespaces"] = list(namespaces)
    if children:
        out["children"] = list(children)
    return out


def tree(root: dict):
    return parse_tree({"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
                       "metadata": {"name": "t"}, "spec": {"root": root}})


@dataclass
class PodDef:
    """A pod to submit: ``PodDef("ns/name", cpu=2, pc="critical-prod")``."""

    ref: str
    cpu: float | str | None = None
    gpu: int | None = None
    memory: str | None = None
    pc: str | None = None
    never: bool = False  # preemptionPolicy: Never
    preemptible: bool = True
    selector: dict = field(default_factory=dict)
    grace: int | None = None
    gang: int = 0  # > 1: a gang of that many pods, named ``<name>-0`` ... (``submit_pods``)

    @property
    def namespace(self) -> str:
        return self.ref.split("/")[0]

    @property
    def name(self) -> str:
        return self.ref.split("/")[1]

    @property
    def refs(self) -> list[str]:
        """The refs of its pods: itself, or a gang's members."""
        return [self.ref] if self.gang <= 1 else [f"{self.ref}-{i}" for i in range(self.gang)]

    def spec(self):
        requests = {}
        if self.cpu is not None:
            requests["cpu"] = str(self.cpu)
        if self.gpu is not None:
            requests["nvidia.com/gpu"] = str(self.gpu)
        if self.memory is not None:
            requests["memory"] = self.memory
        raw = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
        if self.pc:
            raw["priorityClassName"] = self.pc
        if self.never:
            raw["preemptionPolicy"] = "Never"
        if self.selector:
            raw["nodeSelector"] = self.selector
        if self.grace is not None:
            raw["terminationGracePeriodSeconds"] = self.grace
        return parse_pod_spec(raw, f"pod {self.ref}")


def engine(tree_obj=None, nodes: dict | None = None, labels: dict | None = None) -> Engine:
    """An engine with ``nodes`` (``{"n1": {"cpu": 8}}``)."""
    eng = Engine(tree_obj)
    for name, alloc in (nodes or {}).items():
        eng.add_node(name, parse_resource_list(alloc, f"node {name}"), (labels or {}).get(name))
    return eng


def submit(eng: Engine, pod: PodDef, now: float):
    assert pod.gang <= 1, "a gang: use submit_pods"
    return eng.submit(pod.namespace, pod.name, pod.spec(), now, preemptible=pod.preemptible)


def submit_pods(eng: Engine, pod: PodDef, now: float) -> list:
    """Submit ``pod``: one pod, or a gang of ``pod.gang`` pods (``Engine.submit_gang``)."""
    if pod.gang <= 1:
        return [submit(eng, pod, now)]
    return eng.submit_gang(pod.namespace, [r.split("/")[1] for r in pod.refs], pod.spec(), now,
                           preemptible=pod.preemptible, name=pod.ref)


def run_all(eng: Engine, pods, start: float = 0.0) -> dict:
    """Submit and admit ``pods`` one at a time (pod or gang i at time start + i); all must start."""
    out = {}
    for i, pod in enumerate(pods):
        ps = submit_pods(eng, pod, start + i)
        eng.schedule(start + i)
        for p in ps:
            assert p.phase is Phase.RUNNING, f"{pod.ref} did not start: {p.reason}"
            out[ref(p)] = p
    return out


def settle(eng: Engine, now: float) -> list:
    """Schedule until quiet, completing every eviction at once; returns the evictions."""
    evictions = []
    for _ in range(1000):
        d = eng.schedule(now)
        evictions.extend(d.evictions)
        for ev in d.evictions:
            eng.complete_eviction(ev.victim.uid, now)
        if not d:
            return evictions
    raise AssertionError("did not settle")


def ref(pod) -> str:
    return f"{pod.namespace}/{pod.name}"
