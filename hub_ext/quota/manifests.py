"""YAML in, typed objects out: the single entry for reading manifests and scenario files."""

from __future__ import annotations

import yaml

from . import meta as m
from .dataset import KIND as DATASET_KIND, Dataset, parse_dataset
from .errors import ValidationError
from .limitrange import LimitRange, parse_limit_range
from .namespace import Namespace, parse_namespace
from .nodes import NodeSpec, parse_node
from .priorityclass import PriorityClass, parse_priority_class
from .resourcequota import ResourceQuota, parse_resource_quota
from .tree import KIND as TREE_KIND, ElasticQuotaTree, parse_tree
from .workloads import POD_KINDS, WorkloadSpec, parse_workload

Object = ElasticQuotaTree | ResourceQuota | LimitRange | PriorityClass | Namespace | NodeSpec | WorkloadSpec | Dataset

MAX_NESTING = 32

PARSERS = {
    TREE_KIND: parse_tree,
    "ResourceQuota": parse_resource_quota,
    "LimitRange": parse_limit_range,
    "PriorityClass": parse_priority_class,
    "Namespace": parse_namespace,
    "Node": parse_node,
    DATASET_KIND: parse_dataset,
    **{kind: parse_workload for kind in POD_KINDS},
}


def load_yaml(text: str, source: str) -> list:
    """All YAML documents of ``text`` (empty documents dropped); errors name ``source`` and the line."""
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise ValidationError(f"{where}: invalid YAML: {err.problem or err}") from None
    except (yaml.YAMLError, RecursionError, ValueError) as err:
        raise ValidationError(f"{source}: invalid YAML: {err}") from None


def read_file(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise ValidationError(f"{path}: cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path}: not a UTF-8 text file") from None
    return load_yaml(text, path)


def flatten(docs, where: str) -> list[dict]:
    """Expand ``kind: List`` and plain YAML lists into single manifests (iteratively: depth is the input's to choose)."""
    out = []
    stack = [(list(docs), where, 0)]
    while stack:
        items, at, i = stack.pop()
        if i >= len(items):
            continue
        stack.append((items, at, i + 1))
        doc = items[i]
        if len(stack) > MAX_NESTING:
            raise ValidationError(f"{at}: lists nested deeper than {MAX_NESTING} levels")
        if isinstance(doc, list):
            stack.append((doc, f"{at}[{i}]", 0))
        elif isinstance(doc, dict) and doc.get("kind") == "List":
            stack.append((m.sequence(doc.get("items"), f"{at}[{i}]: List items"), f"{at}[{i}]", 0))
        else:
            out.append(m.mapping(doc, f"{at}[{i}]"))
    return out


def parse_object(obj) -> Object:
    obj = m.mapping(obj, "manifest")
    kind = obj.get("kind")
    parser = PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise ValidationError(f"unsupported kind {kind!r} (known: {', '.join(PARSERS)})")
    return parser(obj)
