"""Tenants are hub groups: their properties say which namespace and quota leaf they own.

Group properties are flat string keys, so the stock admin panel edits them:

``tenancy.namespace``         the team's namespace (default: the group's name)
``tenancy.quota-leaf``        the leaf of the quota tree the group maps to, 1:1
``tenancy.role``              ``researcher`` (default) or ``admin`` (admin includes researcher)
``tenancy.profiles``          comma-separated notebook profile slugs members may pick
``tenancy.priority-classes``  comma-separated classes members may use for training
                              (default: low-priority-dev, high-priority-research)

A group is a tenant when it sets ``tenancy.namespace`` or ``tenancy.quota-leaf``.
A tenant whose properties are wrong (unknown leaf, a namespace that hangs on
another leaf, ...) is listed with its errors, and for each what to do, for the
admin, and cannot be used; nothing crashes. A group that sets other
``tenancy.*`` properties but neither of those two is listed the same way (a
typo such as ``tenancy.quota_leaf`` would otherwise go unnoticed).

A team that had good properties before keeps them while its new ones are wrong
(``keep_last_good``; the service keeps them across restarts): one typo in the admin
panel does not lock its members out; the new errors are listed as ``rejected``.

The admin panel's save is checked first (``check_properties``, through the service's
``POST /api/v1/tenants/{group}/check``): wrong properties are refused with one line
(``refusal``) before the hub stores them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from .quota.errors import ValidationError
from .quota.meta import namespace_name
from .quota.tree import ElasticQuotaTree
from .vocabulary import sentence

PREFIX = "tenancy."
NAMESPACE, LEAF, ROLE, PROFILES, CLASSES = (PREFIX + k for k in ("namespace", "quota-leaf", "role", "profiles", "priority-classes"))
KNOWN = {NAMESPACE, LEAF, ROLE, PROFILES, CLASSES}
ROLES = ("researcher", "admin")
DEFAULT_CLASSES = ("low-priority-dev", "high-priority-research")


@dataclass
class Tenant:
    group: str
    namespace: str
    leaf: str | None = None
    role: str = "researcher"
    profiles: list[str] = field(default_factory=list)
    priority_classes: list[str] = field(default_factory=lambda: list(DEFAULT_CLASSES))
    members: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # for each error, what an admin does about it
    # Kept on its last good properties: the errors of the properties it has now, and their fixes.
    rejected: list[str] = field(default_factory=list)
    rejected_fixes: list[str] = field(default_factory=list)

    def fault(self, error: str, fix: str) -> None:
        self.errors.append(error)
        self.fixes.append(fix)

    @property
    def usable(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        return {
            "group": self.group, "namespace": self.namespace, "quotaLeaf": self.leaf, "role": self.role,
            "profiles": self.profiles, "priorityClasses": self.priority_classes, "members": self.members,
            "errors": self.errors, "fixes": self.fixes,
            "keptLastGood": bool(self.rejected), "rejected": self.rejected, "rejectedFixes": self.rejected_fixes,
        }

    def problems(self) -> list[str]:
        """One sentence per wrong property, for admins (``/health``): the group, the property, the fix."""
        if self.rejected:
            return [f"group {self.group}: {err}; its members keep its last good properties until this is "
                    f"fixed. {fix}" for err, fix in zip(self.rejected, self.rejected_fixes)]
        return [f"group {self.group} cannot be used: {err}. {fix}" for err, fix in zip(self.errors, self.fixes)]


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _edit(group: str) -> str:
    """How every fix starts: where the admin changes the property."""
    return f"In the hub's admin panel (Groups, {group}), "


def tenants_from_groups(groups: list[dict], tree: ElasticQuotaTree | None, priority_classes=(),
                        profiles=()) -> list[Tenant]:
    """Tenants from hub group models (``{"name", "users", "properties"}``), checked against the tree,
    the PriorityClasses and the notebook profiles (each check only when they are given)."""
    out: list[Tenant] = []
    leaf_owner: dict[str, str] = {}
    ns_owner: dict[str, str] = {}
    for group in sorted(groups, key=lambda g: g.get("name", "")):
        props = group.get("properties") or {}
        if not isinstance(props, dict):
            continue
        name = group["name"]
        edit = _edit(name)
        if not (NAMESPACE in props or LEAF in props):
            stray = sorted(k for k in props if isinstance(k, str) and k.startswith(PREFIX))
            if stray:  # meant as a team, surely: say why it is not one
                tenant = Tenant(group=name, namespace=name, members=sorted(group.get("users") or []))
                tenant.fault(f"sets {', '.join(stray)} but neither {NAMESPACE} nor {LEAF}, so it is not a team",
                             edit + f"add {NAMESPACE} (the team's namespace) or {LEAF} (its quota leaf), or remove "
                             "the tenancy properties if this group is not a team.")
                out.append(tenant)
            continue
        tenant = Tenant(group=name, namespace=str(props.get(NAMESPACE, name)), members=sorted(group.get("users") or []))
        for key, value in props.items():
            if key.startswith(PREFIX) and key not in KNOWN:
                tenant.fault(f"unknown property {key} (known: {', '.join(sorted(KNOWN))})",
                             edit + f"rename {key} to one of the known properties, or remove it.")
            elif key in KNOWN and not isinstance(value, str):
                tenant.fault(f"property {key} must be a string, got {type(value).__name__}",
                             edit + f"set {key} to a plain text value.")
        try:
            namespace_name(tenant.namespace, f"property {NAMESPACE}")
        except ValidationError as err:
            tenant.fault(str(err), edit + f"set {NAMESPACE} to a valid Kubernetes namespace name: lowercase "
                         "letters, digits and '-', at most 63 characters.")
        role = props.get(ROLE, "researcher")
        if role not in ROLES:
            tenant.fault(f"property {ROLE} must be researcher or admin, got {role!r}",
                         edit + f"set {ROLE} to researcher or admin, or remove it (researcher).")
        else:
            tenant.role = role
        if isinstance(props.get(PROFILES), str):
            tenant.profiles = _csv(props[PROFILES])
            unknown = [p for p in tenant.profiles if profiles and p not in profiles]
            if unknown:
                tenant.fault(f"property {PROFILES}: no notebook profile named {', '.join(unknown)}",
                             edit + f"list only the hub's profiles in {PROFILES} ({', '.join(profiles)}).")
        if isinstance(props.get(CLASSES), str):
            tenant.priority_classes = _csv(props[CLASSES])
            unknown = [c for c in tenant.priority_classes if priority_classes and c not in priority_classes]
            if unknown:
                tenant.fault(f"property {CLASSES}: no PriorityClass named {', '.join(unknown)}",
                             edit + f"list only existing classes in {CLASSES} "
                             f"({', '.join(sorted(priority_classes))}).")
        _check_leaf(tenant, props.get(LEAF), tree, edit)
        _check_owners(tenant, leaf_owner, ns_owner)
        if not tenant.errors:
            if tenant.leaf:
                leaf_owner[tenant.leaf] = name
            ns_owner[tenant.namespace] = name
        out.append(tenant)
    return out


def _check_owners(tenant: Tenant, leaf_owner: dict[str, str], ns_owner: dict[str, str]) -> None:
    """A leaf and a namespace belong to one team each (``*_owner``: leaf or namespace -> its group)."""
    edit = _edit(tenant.group)
    if tenant.leaf and tenant.leaf in leaf_owner:
        tenant.fault(f"quota leaf {tenant.leaf} already belongs to group {leaf_owner[tenant.leaf]} "
                     "(a group maps 1:1 to a leaf)",
                     edit + f"point {LEAF} at a leaf no other team uses, or add a leaf in the quota-tree editor.")
    if tenant.namespace in ns_owner:
        tenant.fault(f"namespace {tenant.namespace} already belongs to group {ns_owner[tenant.namespace]}",
                     edit + f"give this team a namespace of its own in {NAMESPACE}.")


def check_properties(group: str, properties: dict, teams: list[Tenant], tree: ElasticQuotaTree | None,
                     priority_classes=(), profiles=()) -> list[tuple[str, str]]:
    """What is wrong with giving hub group ``group`` these ``properties``, as (error, fix) pairs; [] when
    nothing. ``teams``: the teams as the service runs them now (kept ones included): a leaf or namespace
    one of them holds is taken. A group that is no team and does not try to be one is always right."""
    checked = tenants_from_groups([{"name": group, "properties": properties}], tree, priority_classes, profiles)
    if not checked:
        return []
    tenant = checked[0]
    others = [t for t in teams if t.usable and t.group != group]
    _check_owners(tenant, {t.leaf: t.group for t in others if t.leaf}, {t.namespace: t.group for t in others})
    return list(zip(tenant.errors, tenant.fixes))


def refusal(group: str, problems: list[tuple[str, str]]) -> str:
    """The one line an admin reads when a save is refused: the group, each property's error and its fix
    (said without the "in the admin panel" the admin is in already)."""
    said = []
    for error, fix in problems:
        error = sentence(error)  # one ending in "(...)" needs its full stop still
        said.append(f"{error}{'' if error.endswith('.') else '.'} {sentence(fix.removeprefix(_edit(group)))}")
    return f"The properties of group {group} were not saved. " + " ".join(said)


def keep_last_good(tenants: list[Tenant], last_good: dict[str, Tenant], tree: ElasticQuotaTree | None) -> list[Tenant]:
    """``tenants`` with each one whose properties are wrong now replaced by its group's ``last_good``
    tenant (its members as they are now), the new errors in ``rejected``: one typo in the admin panel
    must not lock a whole team out. Not when the last good namespace or leaf now belongs to another
    team, or the leaf is no longer a leaf of ``tree``: then the group is unusable, as before."""
    namespaces = {t.namespace for t in tenants if t.usable}
    leaves = {t.leaf for t in tenants if t.usable and t.leaf}
    out = []
    for tenant in tenants:
        good = last_good.get(tenant.group)
        if tenant.usable or good is None or good.namespace in namespaces or (good.leaf and (
                good.leaf in leaves or tree is None or good.leaf not in tree.nodes or not tree.nodes[good.leaf].is_leaf)):
            out.append(tenant)
            continue
        namespaces.add(good.namespace)
        if good.leaf:
            leaves.add(good.leaf)
        out.append(replace(good, members=list(tenant.members), profiles=list(good.profiles),
                           priority_classes=list(good.priority_classes), errors=[], fixes=[],
                           rejected=list(tenant.errors), rejected_fixes=list(tenant.fixes)))
    return out


def _check_leaf(tenant: Tenant, leaf, tree: ElasticQuotaTree | None, edit: str) -> None:
    current = tree.leaf_of.get(tenant.namespace) if tree else None
    if leaf is None:
        tenant.leaf = current.name if current else None
        return
    if not isinstance(leaf, str):
        return
    if tree is None:
        tenant.fault(f"property {LEAF} is {leaf!r}, but there is no quota tree",
                     edit + f"remove {LEAF}, or define a quota tree (TenancyService.tree_file) with that leaf.")
        return
    node = tree.nodes.get(leaf)
    leaves = ", ".join(sorted(n.name for n in tree.leaves()))
    if node is None:
        tenant.fault(f"property {LEAF}: {leaf!r} is not a node of the quota tree (leaves: {leaves})",
                     edit + f"set {LEAF} to one of the leaves ({leaves}), or add {leaf} in the quota-tree editor.")
    elif not node.is_leaf:
        tenant.fault(f"property {LEAF}: {leaf!r} has children; a tenant maps to a leaf",
                     edit + f"set {LEAF} to a leaf ({leaves}).")
    elif current is not None and current.name != leaf:
        tenant.fault(f"namespace {tenant.namespace} hangs on quota leaf {current.name}, not on {leaf}",
                     edit + f"set {LEAF} to {current.name}, or move namespace {tenant.namespace} to {leaf} in the "
                     "quota-tree editor.")
    else:
        tenant.leaf = leaf


def tree_with_tenants(tree: ElasticQuotaTree | None, tenants: list[Tenant]) -> ElasticQuotaTree | None:
    """The tree with every usable tenant's namespace hung on its leaf (the tree itself is not changed)."""
    if tree is None:
        return None
    # A tenant whose leaf this tree lacks hangs nowhere (the next refresh flags it).
    extra = [(t.namespace, t.leaf) for t in tenants
             if t.usable and t.leaf in tree.nodes and tree.nodes[t.leaf].is_leaf and t.namespace not in tree.leaf_of]
    if not extra:
        return tree
    out = copy.deepcopy(tree)
    for namespace, leaf in extra:
        node = out.nodes[leaf]
        node.namespaces.append(namespace)
        out.leaf_of[namespace] = node
    return out


def tenants_of(user: str, tenants: list[Tenant]) -> list[Tenant]:
    return [t for t in tenants if user in t.members]
