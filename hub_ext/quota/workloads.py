"""Workload manifests (Pod, Deployment, ReplicaSet, StatefulSet, Job) reduced to what scheduling needs."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import meta as m
from .errors import ValidationError
from .pods import PodSpec, parse_pod_spec

# Annotations (on the workload or its pod template) our scheduler reads.
DURATION_ANNOTATION = "tenancy.jupyter.org/duration"  # simulated run time of a pod
PREEMPTIBLE_ANNOTATION = "tenancy.jupyter.org/preemptible"  # "false": admitted only within min
GANG_ANNOTATION = "tenancy.jupyter.org/gang"  # "true": the pods are admitted and evicted all together
DATASETS_ANNOTATION = "tenancy.jupyter.org/datasets"  # "a,b": the Datasets its pods mount (ready before they start)

POD_KINDS = {"Pod": "v1", "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


@dataclass(frozen=True)
class WorkloadSpec:
    kind: str
    namespace: str
    name: str
    template: PodSpec
    pods: int = 1  # replicas, or a Job's parallelism
    completions: int | None = None  # Jobs: successful pods needed
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    duration_seconds: float | None = None
    preemptible: bool = True
    gang: bool = False  # its pods are one gang: admitted all together or not at all, evicted together
    datasets: tuple[str, ...] = ()  # names of the Datasets it mounts

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def owned(self) -> bool:
        """Whether a controller recreates its evicted pods (everything but a bare Pod)."""
        return self.kind != "Pod"


def parse_workload(obj) -> WorkloadSpec:
    obj = m.mapping(obj, "workload")
    kind = obj.get("kind")
    if kind not in POD_KINDS:
        raise ValidationError(f"unsupported workload kind {kind!r} (known: {', '.join(POD_KINDS)})")
    meta = m.metadata(obj, kind, namespaced=True)
    where = f"{kind} {meta.namespace}/{meta.name}"
    if kind == "Pod":
        template_meta, spec, pods, completions = meta, obj.get("spec"), 1, None
    else:
        body = m.mapping(obj.get("spec"), f"{where}: spec")
        template = m.mapping(body.get("template"), f"{where}: spec.template")
        tmeta = m.mapping(template.get("metadata"), f"{where}: spec.template.metadata", optional=True)
        template_meta = m.Meta(
            meta.name,
            meta.namespace,
            m.string_map(tmeta.get("labels"), f"{where}: spec.template.metadata.labels"),
            m.string_map(tmeta.get("annotations"), f"{where}: spec.template.metadata.annotations"),
        )
        spec = template.get("spec")
        if kind == "Job":
            pods = m.integer(body.get("parallelism", 1), f"{where}: spec.parallelism")
            completions = body.get("completions")
            completions = pods if completions is None else m.integer(completions, f"{where}: spec.completions")
        else:
            pods, completions = m.integer(body.get("replicas", 1), f"{where}: spec.replicas"), None
    annotations = {**template_meta.annotations, **meta.annotations}
    duration = annotations.get(DURATION_ANNOTATION)
    preemptible = _flag(annotations, PREEMPTIBLE_ANNOTATION, "true", where)
    gang = _flag(annotations, GANG_ANNOTATION, "false", where)
    return WorkloadSpec(
        kind=kind,
        namespace=meta.namespace,
        name=meta.name,
        template=parse_pod_spec(spec, where),
        pods=pods,
        completions=completions,
        labels={**template_meta.labels, **meta.labels},
        annotations=annotations,
        duration_seconds=None if duration is None else m.duration(duration, f"{where}: annotation {DURATION_ANNOTATION}"),
        preemptible=preemptible == "true",
        gang=gang == "true",
        datasets=_datasets(annotations.get(DATASETS_ANNOTATION, ""), where),
    )


def _flag(annotations: dict, key: str, default: str, where: str) -> str:
    value = annotations.get(key, default)
    if value not in ("true", "false"):
        raise ValidationError(f"{where}: annotation {key} must be \"true\" or \"false\", got {value!r}")
    return value


def _datasets(value: str, where: str) -> tuple[str, ...]:
    """``"a, b"``: dataset names, each once, in the order given."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    for name in names:
        m.label_name(name, f"{where}: annotation {DATASETS_ANNOTATION}", "dataset name")
    return tuple(dict.fromkeys(names))
