"""What the quota views draw, from the service's answers: the team's quota path with numbers for bars.

The Lab extension's page (through hub_ext.labserver) and the notebook's widget
(hub_ext.client.render) draw the same model, so it sits beside both. Pure functions of ``/me`` and ``/tree`` answers, so they are tested without a server.
Quantities arrive as Kubernetes text (``"20"``, ``"500m"``, ``"10Gi"``); bars need numbers,
so each amount is sent both ways: the number (``cpu`` in cores, bytes for memory) and the
text as the service wrote it.
"""

from __future__ import annotations

from .quota.errors import ValidationError
from .quota.quantity import MILLI, parse_quantity

#: The order resources are listed in; others follow by name.
FIRST = ("cpu", "memory", "nvidia.com/gpu")


def amount(text) -> float:
    """A quantity's value as a number (``"500m"`` -> 0.5, ``"1Gi"`` -> 1073741824); 0 for junk."""
    if text is None:
        return 0.0
    try:
        return parse_quantity(text, "quantity") / MILLI
    except ValidationError:
        return 0.0


def path_to(tree: dict | None, leaf: str | None) -> list[str]:
    """Node names from ``leaf`` up to the root of an ElasticQuotaTree manifest ([] if not found)."""
    root = ((tree or {}).get("spec") or {}).get("root")
    if not root or not leaf:
        return []
    stack = [(root, [root.get("name")])]
    while stack:
        node, names = stack.pop()
        if node.get("name") == leaf:
            return list(reversed(names))
        stack.extend((child, names + [child.get("name")]) for child in node.get("children") or [])
    return []


def _order(names) -> list[str]:
    return sorted(set(names), key=lambda r: (FIRST.index(r) if r in FIRST else len(FIRST), r))


def node_view(name: str, quota: dict) -> dict:
    """One node's bars: per resource it manages, used / min (guarantee) / max (ceiling) / borrowed."""
    mins, maxs, used = quota.get("min") or {}, quota.get("max") or {}, quota.get("used") or {}
    resources = []
    for res in _order(list(mins) + list(maxs)):
        u, lo = amount(used.get(res, "0")), amount(mins.get(res, "0"))
        hi = amount(maxs[res]) if res in maxs else None
        resources.append({
            "resource": res, "used": u, "min": lo, "max": hi, "borrowed": max(0.0, u - lo),
            "usedText": used.get(res, "0"), "minText": mins.get(res, "0"), "maxText": maxs.get(res),
            "atMax": hi is not None and u >= hi > 0,
        })
    return {"name": name, "resources": resources}


def quota_path(tree: dict | None, quota: dict, leaf: str | None) -> list[dict]:
    """The team's leaf first, then each parent up to the root, as ``node_view``s."""
    names = path_to(tree, leaf) or ([leaf] if leaf in quota else [])
    return [node_view(n, quota[n]) for n in names if n in quota]


def current_tenant(tenants: list[dict], wanted: str | None) -> dict | None:
    """The team this server runs for (``TENANCY_TENANT``), else the user's only usable one."""
    usable = [t for t in tenants if not t.get("errors")]
    match = next((t for t in usable if t.get("group") == wanted), None) if wanted else None
    return match or (usable[0] if usable else None)
