"""Namespace objects: the unit of isolation, hung on a quota leaf."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import meta as m


@dataclass(frozen=True)
class Namespace:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def parse_namespace(obj) -> Namespace:
    obj = m.mapping(obj, "Namespace")
    meta = m.metadata(obj, "Namespace", namespaced=False)
    m.namespace_name(meta.name, "Namespace metadata.name")
    return Namespace(meta.name, meta.labels, meta.annotations)
