"""The scenario file of ``tenancy simulate`` (DESIGN.md "Scenario format"), read and checked whole up front."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..quota import meta as m
from ..quota.dataset import Dataset, check_datasets
from ..quota.errors import ValidationError
from ..quota.manifests import PARSERS, flatten, parse_object, read_file
from ..quota.nodes import NodeSpec, parse_node

_CLUSTER_SCOPED = {"PriorityClass", "Namespace", "ElasticQuotaTree", "Node", "Dataset"}
_STEP_ACTIONS = ("apply", "delete", "advance")


@dataclass(frozen=True)
class Ref:
    kind: str
    namespace: str | None
    name: str


@dataclass
class Step:
    action: str
    objects: list = field(default_factory=list)  # apply
    refs: list[Ref] = field(default_factory=list)  # delete
    seconds: float = 0.0  # advance
    name: str | None = None

    def describe(self) -> str:
        if self.action == "apply":
            return "apply " + ", ".join(_label(o) for o in self.objects)
        if self.action == "delete":
            return "delete " + ", ".join(f"{r.kind} {r.namespace + '/' if r.namespace else ''}{r.name}" for r in self.refs)
        return f"advance {self.seconds:g}s"


@dataclass
class Scenario:
    nodes: list[NodeSpec]
    objects: list
    steps: list[Step]
    name: str | None = None


def _label(obj) -> str:
    kind = getattr(obj, "kind", None) or type(obj).__name__.replace("Spec", "")
    namespace = getattr(obj, "namespace", None)
    name = getattr(obj, "name", "")
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def is_scenario(doc) -> bool:
    return isinstance(doc, dict) and "kind" not in doc and any(k in doc for k in ("steps", "nodes", "objects"))


def load_scenario(path: str) -> Scenario:
    docs = read_file(path)
    if len(docs) != 1 or not is_scenario(docs[0]):
        raise ValidationError(f"{path}: a scenario is one YAML mapping with nodes, objects and steps")
    try:
        return parse_scenario(docs[0])
    except ValidationError as err:
        raise err.within(path) from None


def parse_scenario(doc) -> Scenario:
    doc = m.mapping(doc, "scenario")
    m.unknown_keys(doc, {"name", "description", "nodes", "objects", "steps"}, "scenario")
    nodes = [parse_node(raw, f"nodes[{i}]") for i, raw in enumerate(m.sequence(doc.get("nodes"), "nodes"))]
    seen = set()
    for node in nodes:
        if node.name in seen:
            raise ValidationError(f"nodes: node {node.name} is listed twice")
        seen.add(node.name)
    objects = _parse_all(m.sequence(doc.get("objects"), "objects"), "objects")
    steps = []
    for i, raw in enumerate(m.sequence(doc.get("steps"), "steps")):
        where = f"steps[{i}]"
        raw = m.mapping(raw, where)
        m.unknown_keys(raw, {*_STEP_ACTIONS, "name"}, where)
        actions = [a for a in _STEP_ACTIONS if a in raw]
        if len(actions) != 1:
            raise ValidationError(f"{where}: a step has exactly one of apply, delete, advance")
        action = actions[0]
        step = Step(action, name=raw.get("name"))
        if action == "apply":
            step.objects = _parse_all(m.sequence(raw["apply"], f"{where}.apply"), f"{where}.apply")
        elif action == "delete":
            step.refs = [_ref(r, f"{where}.delete[{j}]") for j, r in enumerate(m.sequence(raw["delete"], f"{where}.delete"))]
        else:
            step.seconds = m.duration(raw["advance"], f"{where}.advance")
        steps.append(step)
    return Scenario(nodes, objects, steps, doc.get("name"))


def _parse_all(raw_list, where: str) -> list:
    out = []
    for i, raw in enumerate(flatten(raw_list, where)):
        try:
            out.append(parse_object(raw))
        except ValidationError as err:
            raise err.within(f"{where}[{i}]") from None
    try:
        check_datasets(o for o in out if isinstance(o, Dataset))
    except ValidationError as err:
        raise err.within(where) from None
    return out


def _ref(raw, where: str) -> Ref:
    raw = m.mapping(raw, where)
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in PARSERS:
        raise ValidationError(f"{where}: unsupported kind {kind!r} (known: {', '.join(PARSERS)})")
    meta = m.mapping(raw.get("metadata"), f"{where}: metadata", optional=True)
    name = m.object_name(raw.get("name") or meta.get("name"), f"{where}: name")
    namespace = None
    if kind not in _CLUSTER_SCOPED:
        namespace = m.namespace_name(raw.get("namespace") or meta.get("namespace") or "default", f"{where}: namespace")
    return Ref(kind, namespace, name)
