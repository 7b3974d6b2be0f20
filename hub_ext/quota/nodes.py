"""Cluster nodes, from a scenario's ``nodes:`` entries or ``kind: Node`` manifests."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import meta as m
from .errors import ValidationError
from .quantity import ResourceList, parse_resource_list


@dataclass(frozen=True)
class NodeSpec:
    name: str
    allocatable: ResourceList
    labels: dict[str, str] = field(default_factory=dict)


def parse_node(obj, where: str = "node") -> NodeSpec:
    """``{name, allocatable, labels}`` or a v1 Node (``metadata.name``, ``status.allocatable``)."""
    obj = m.mapping(obj, where)
    if obj.get("kind") == "Node":
        meta = m.metadata(obj, "Node", namespaced=False)
        status = m.mapping(obj.get("status"), f"Node {meta.name}: status")
        allocatable = status.get("allocatable", status.get("capacity"))
        name, labels = meta.name, meta.labels
    else:
        m.unknown_keys(obj, {"name", "allocatable", "labels"}, where)
        name = m.object_name(obj.get("name"), f"{where}: name")
        allocatable, labels = obj.get("allocatable"), m.string_map(obj.get("labels"), f"node {name}: labels")
    if allocatable is None:
        raise ValidationError(f"node {name}: allocatable is missing")
    return NodeSpec(name, parse_resource_list(allocatable, f"node {name}: allocatable"), labels)
