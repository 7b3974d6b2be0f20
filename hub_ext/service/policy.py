"""What the engine is told to enforce: the quota tree, the tenants (hub groups) grafted onto it, and
the namespace-level objects (ResourceQuota, LimitRange, PriorityClass) from configuration or the
cluster; and what a new tree would do, on a copy (the preview)."""

from __future__ import annotations

from ..quota.errors import ValidationError
from ..quota.limitrange import LimitRange
from ..quota.namespace import Namespace
from ..quota.priorityclass import PriorityClass
from ..quota.resourcequota import ResourceQuota
from ..quota.tree import ElasticQuotaTree
from ..tenants import Tenant, keep_last_good, tree_with_tenants
from .tree_edit import explain_preview

LAST_GOOD = "last-good-tenants"  # the store's setting: each group's last good properties


class Policy:
    def __init__(self, controller):
        self.c = controller
        self.engine = controller.engine  # never replaced
        # group -> its tenant as last read with good properties: kept while new ones are wrong; in the
        # store too (a restart after the typo keeps the team working), read at the first set_tenants
        self.last_good: dict[str, Tenant] | None = None

    def set_tenants(self, tenants: list[Tenant]) -> None:
        c = self.c
        if self.last_good is None:
            self.last_good = {g: _tenant(g, v) for g, v in (c.store.setting(LAST_GOOD) or {}).items()}
        tenants = keep_last_good(tenants, self.last_good, c.base_tree)
        last_good = {t.group: t for t in tenants if t.usable}  # groups gone are forgotten
        if _saved(last_good) != _saved(self.last_good):
            c.store.set_setting(LAST_GOOD, _saved(last_good))
            c.store.commit()
        self.last_good = last_good
        problems = [p for t in tenants for p in t.problems()]
        c.health.set("group-properties", " | ".join(problems) if problems else None, blocking=False)
        old = {(t.namespace, t.leaf) for t in c.tenants if t.usable}
        c.tenants = tenants
        c.backend.tenants_changed(tenants)
        c.datasets.changed()  # teams name datasets' users: every read, as the backend hears of tenants
        if {(t.namespace, t.leaf) for t in tenants if t.usable} != old:
            self.engine.set_tree(tree_with_tenants(c.base_tree, tenants))
            c.loop.poke()

    def set_tree(self, tree: ElasticQuotaTree | None) -> None:
        c = self.c
        c.base_tree = tree
        self.engine.set_tree(tree_with_tenants(tree, c.tenants))
        c.loop.poke()

    def apply_object(self, obj) -> None:
        """A ResourceQuota, LimitRange, PriorityClass or Namespace from configuration."""
        if isinstance(obj, ResourceQuota):
            self.engine.apply_resource_quota(obj)
        elif isinstance(obj, LimitRange):
            self.engine.apply_limit_range(obj)
        elif isinstance(obj, PriorityClass):
            self.engine.apply_priority_class(obj)
        elif not isinstance(obj, Namespace):
            raise ValidationError(f"{type(obj).__name__} cannot be configured here (ResourceQuota, LimitRange, PriorityClass, Namespace)")
        self.c.loop.poke()

    def remove_object(self, kind: str, namespace: str, name: str) -> None:
        """A ResourceQuota or LimitRange that was applied is gone (deleted on the cluster)."""
        if kind == "ResourceQuota":
            self.engine.remove_resource_quota(namespace, name)
        elif kind == "LimitRange":
            self.engine.remove_limit_range(namespace, name)
        self.c.loop.poke()

    def preview_tree(self, tree: ElasticQuotaTree | None) -> dict:
        """What changing the tree to ``tree`` would do now, on a copy: who would be evicted, who would start."""
        c = self.c
        engine = self.engine.replica(tree_with_tenants(tree, c.tenants), queue=True)
        now = c.clock()
        evictions, admitted = [], []
        for _ in range(100):
            d = engine.schedule(now)
            evictions += d.evictions
            admitted += d.admitted + d.nominated
            if not d:
                break
        # Named as the pages name them; nodes left above a lowered max and work that could never start, too.
        return explain_preview(c, engine, evictions, admitted)


def _saved(last_good: dict[str, Tenant]) -> dict:
    """What the store keeps of each group's last good properties (members are read from the hub)."""
    return {g: {"namespace": t.namespace, "leaf": t.leaf, "role": t.role, "profiles": t.profiles,
                "priorityClasses": t.priority_classes} for g, t in sorted(last_good.items())}


def _tenant(group: str, saved: dict) -> Tenant:
    return Tenant(group=group, namespace=saved["namespace"], leaf=saved.get("leaf"), role=saved.get("role", "researcher"),
                  profiles=list(saved.get("profiles") or []), priority_classes=list(saved.get("priorityClasses") or []))
