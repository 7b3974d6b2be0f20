"""The elastic quota tree: ACK's ``ElasticQuotaTree`` object, parsed and validated.

Semantics (DESIGN.md "Quota tree"): each node has per-resource ``min``
(guaranteed) and ``max`` (ceiling). A node manages only the resources it
names: named in ``max`` but not ``min`` means ``min`` 0; named in ``min`` but
not ``max`` means no ceiling; not named means the node neither guarantees nor
caps it. Namespaces hang on leaves; a namespace is bound by every node on the
path from its leaf to the root.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import meta as m
from .errors import ValidationError
from .quantity import ResourceList, format_milli, parse_resource_list

API_VERSIONS = ("scheduling.sigs.k8s.io/v1beta1", "scheduling.sigs.k8s.io/v1alpha1")
KIND = "ElasticQuotaTree"
MAX_DEPTH = 64
_NODE_FIELDS = {"name", "min", "max", "namespaces", "children", "attributes"}


@dataclass(eq=False)
class QuotaNode:
    name: str
    min: ResourceList
    max: ResourceList
    namespaces: list[str] = field(default_factory=list)
    children: list["QuotaNode"] = field(default_factory=list)
    parent: "QuotaNode | None" = None
    depth: int = 0
    attributes: dict = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def names(self, resource: str) -> bool:
        """Whether this node manages ``resource`` (guarantees or caps it)."""
        return resource in self.min or resource in self.max

    def guaranteed(self, resource: str) -> int:
        """``min`` of a managed resource (0 when only ``max`` names it)."""
        return self.min.get(resource, 0)

    def path(self) -> list["QuotaNode"]:
        """This node and its ancestors, leaf first."""
        node, out = self, []
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def walk(self):
        """Pre-order iteration over the subtree."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass(eq=False)
class ElasticQuotaTree:
    root: QuotaNode
    name: str = "elasticquotatree"
    namespace: str = "kube-system"
    nodes: dict[str, QuotaNode] = field(default_factory=dict)
    leaf_of: dict[str, QuotaNode] = field(default_factory=dict)

    def leaves(self) -> list[QuotaNode]:
        return [n for n in self.nodes.values() if n.is_leaf]


def parse_tree(obj) -> ElasticQuotaTree:
    """Parse and validate an ``ElasticQuotaTree`` manifest (an existing ACK tree loads unchanged)."""
    obj = m.mapping(obj, KIND)
    if obj.get("apiVersion") not in API_VERSIONS:
        raise ValidationError(f"{KIND}: apiVersion must be {API_VERSIONS[0]}, got {obj.get('apiVersion')!r}")
    meta = m.mapping(obj.get("metadata"), f"{KIND}: metadata", optional=True)
    name = meta.get("name", "elasticquotatree")
    m.object_name(name, f"{KIND} metadata.name")
    spec = m.mapping(obj.get("spec"), f"{KIND} {name}: spec")
    if "root" not in spec:
        raise ValidationError(f"{KIND} {name}: spec.root is missing")
    tree = ElasticQuotaTree(root=_parse_nodes(spec["root"]), name=name, namespace=meta.get("namespace", "kube-system"))
    _index(tree)
    validate(tree)
    return tree


def _parse_nodes(raw_root) -> QuotaNode:
    # Iterative, so a hostile depth gives a message rather than a RecursionError.
    root = _parse_node(raw_root, "spec.root", None)
    stack = [(root, raw_root)]
    while stack:
        node, raw = stack.pop()
        for i, raw_child in enumerate(m.sequence(raw.get("children"), f"quota node {node.name}: children")):
            if node.depth + 1 > MAX_DEPTH:
                raise ValidationError(f"quota node {node.name}: tree deeper than {MAX_DEPTH} levels")
            child = _parse_node(raw_child, f"quota node {node.name}: children[{i}]", node)
            node.children.append(child)
            stack.append((child, raw_child))
    return root


def _parse_node(raw, where: str, parent: QuotaNode | None) -> QuotaNode:
    raw = m.mapping(raw, where)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"{where}: name is missing")
    # Names reach pages, labels and log lines: DNS-1123 labels joined by dots (ACK's `root.a.1`).
    m.object_name(name, f"{where}: quota node name")
    where = f"quota node {name}"
    m.unknown_keys(raw, _NODE_FIELDS, where)
    namespaces = m.sequence(raw.get("namespaces"), f"{where}: namespaces")
    for ns in namespaces:
        m.namespace_name(ns, f"{where}: namespaces")
    return QuotaNode(
        name=name,
        min=parse_resource_list(raw.get("min"), f"{where}: min"),
        max=parse_resource_list(raw.get("max"), f"{where}: max"),
        namespaces=list(namespaces),
        parent=parent,
        depth=0 if parent is None else parent.depth + 1,
        attributes=m.mapping(raw.get("attributes"), f"{where}: attributes", optional=True),
    )


def _index(tree: ElasticQuotaTree) -> None:
    for node in tree.root.walk():
        if node.name in tree.nodes:
            raise ValidationError(f"quota node {node.name}: name is used by more than one node")
        tree.nodes[node.name] = node
        if node.namespaces and node.children:
            raise ValidationError(
                f"quota node {node.name}: namespaces may only hang on leaves, but this node has children"
            )
        for ns in node.namespaces:
            other = tree.leaf_of.get(ns)
            if other is not None:
                raise ValidationError(f"namespace {ns}: on two quota leaves, {other.name} and {node.name}")
            tree.leaf_of[ns] = node


def validate(tree: ElasticQuotaTree) -> None:
    """Check min <= max on every node and that children's guarantees fit in their parent's."""
    # Each node's own min <= max first: a node's own mistake is the clearest one to name.
    for node in tree.nodes.values():
        for res, low in node.min.items():
            high = node.max.get(res)
            if high is not None and low > high:
                raise ValidationError(
                    f"{node.name}: min {res} {format_milli(res, low)} exceeds max {format_milli(res, high)}"
                )
    for node in tree.nodes.values():
        if not node.children:
            continue
        sums: ResourceList = {}
        for child in node.children:
            for res, low in child.min.items():
                sums[res] = sums.get(res, 0) + low
        for res, total in sorted(sums.items()):
            if node.names(res) and total > node.guaranteed(res):
                note = "" if res in node.min else f" ({res} is named in max but not min)"
                raise ValidationError(
                    f"{node.name}: children's min {res} {format_milli(res, total)} exceeds this node's min "
                    f"{format_milli(res, node.guaranteed(res))}{note}"
                )
