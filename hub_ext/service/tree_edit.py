"""Changing the quota tree: what a change would do (the preview), what it changed (the audit trail).

``explain_preview`` turns the engine's dry run of a new tree into what an admin
needs before pressing "apply": the workloads that would be evicted and admitted
(with their user, team and name), the workloads that could never start under
the new tree (inadmissible) or that could start again, and every quota node
left above a lowered ``max``, with what that means. ``tree_changes`` lists the
differences between two trees in words, for the audit trail (``tree`` events).
"""

from __future__ import annotations

from sqlalchemy import select

from ..quota.quantity import format_list, format_milli, parse_resource_list
from ..scheduler.model import Phase
from .store import EventRow


def _workload(controller, namespace: str, pod_name: str) -> dict:
    """The workload a pod of the live engine belongs to, as the pages name it."""
    for wid, owner in controller.owners.items():
        if any(p.namespace == namespace and p.name == pod_name for p in owner.pods):
            row = controller.rows.get(wid)
            if row is not None:
                return {"workload": row.id, "kind": row.kind, "name": row.name, "user": row.user,
                        "team": row.tenant, "namespace": row.namespace, "pod": pod_name}
    return {"workload": None, "kind": None, "name": pod_name, "user": None, "team": None, "namespace": namespace,
            "pod": pod_name}


def explain_preview(controller, engine, evictions, admitted) -> dict:
    """The dry run of a tree change (``engine`` after its passes) in the words and names of the pages."""
    evicted = [{**_workload(controller, e.victim.namespace, e.victim.name), "message": e.victim.reason.message}
               for e in evictions]
    started = [_workload(controller, p.namespace, p.name) for p in admitted]
    live_inadmissible = {(p.namespace, p.name) for p in controller.engine.pods.values() if p.inadmissible}
    never, again = [], []
    for pod in engine.pods.values():
        if pod.phase is not Phase.PENDING:
            continue
        key = (pod.namespace, pod.name)
        if pod.inadmissible and key not in live_inadmissible:
            never.append({**_workload(controller, *key), "message": pod.reason.message if pod.reason else ""})
        elif not pod.inadmissible and key in live_inadmissible:
            again.append(_workload(controller, *key))
    over = []
    report = engine.quota.report()
    for name, values in report.items():
        for res, cap in sorted(values["max"].items()):
            used = values["used"].get(res, 0)
            if used <= cap:
                continue
            node = engine.quota.nodes[name]
            running = [_workload(controller, p.namespace, p.name) for p in engine.pods.values()
                       if p.phase is Phase.RUNNING and not p.occupying and p.leaf is not None
                       and node in p.leaf.path and p.requests.get(res)]
            over.append({
                "node": name, "resource": res, "used": format_milli(res, used), "max": format_milli(res, cap),
                "workloads": running,
                "message": f"{name} would use {format_milli(res, used)} {res} of a max of {format_milli(res, cap)}: "
                           "nothing new starts there until it drains (running work is not stopped for this)",
            })
    quota = {name: {k: format_list(values[k]) for k in ("min", "max", "used")} for name, values in report.items()}
    warnings = list(engine.warnings) + [o["message"] for o in over]
    return {"evictions": evicted, "admitted": started, "overMax": over, "inadmissible": never,
            "admissibleAgain": again, "quota": quota, "warnings": warnings}


# -- the audit trail --------------------------------------------------------------------------
def _nodes(manifest: dict | None) -> dict[str, dict]:
    """name -> {parent, min, max, namespaces} of a tree manifest (as written; amounts normalised)."""
    out: dict[str, dict] = {}
    if not manifest:
        return out

    def walk(node: dict, parent: str | None) -> None:
        name = node.get("name")
        out[name] = {"parent": parent, "namespaces": list(node.get("namespaces") or []),
                     "min": _amounts(node.get("min")), "max": _amounts(node.get("max"))}
        for child in node.get("children") or []:
            walk(child, name)

    root = ((manifest.get("spec") or {}).get("root")) or {}
    if root:
        walk(root, None)
    return out


def _amounts(raw) -> dict[str, str]:
    try:
        return {r: format_milli(r, v) for r, v in parse_resource_list(raw or {}, "tree").items()}
    except Exception:  # noqa: BLE001 - an old manifest that no longer parses: shown as written
        return {str(k): str(v) for k, v in (raw or {}).items()}


def tree_changes(old: dict | None, new: dict | None) -> list[str]:
    """What changed from tree ``old`` to tree ``new``, one sentence each, in tree order."""
    before, after = _nodes(old), _nodes(new)
    changes = []
    for name, node in after.items():
        was = before.get(name)
        if was is None:
            changes.append(f"added {name}" + (f" under {node['parent']}" if node["parent"] else ""))
            continue
        if was["parent"] != node["parent"]:
            changes.append(f"moved {name} from under {was['parent']} to under {node['parent']}")
        for kind in ("min", "max"):
            for res in sorted(set(was[kind]) | set(node[kind])):
                a, b = was[kind].get(res), node[kind].get(res)
                if a != b:
                    changes.append(f"{name}: {kind} {res} {a if a is not None else 'unset'} -> "
                                   f"{b if b is not None else 'unset'}")
        if sorted(was["namespaces"]) != sorted(node["namespaces"]):
            changes.append(f"{name}: namespaces {', '.join(was['namespaces']) or 'none'} -> "
                           f"{', '.join(node['namespaces']) or 'none'}")
    changes += [f"removed {name}" for name in before if name not in after]
    return changes


#: The events of the audit trail: changes to the quota tree and to datasets.
AUDITED = ("tree", "dataset")


def audit_trail(store, limit: int = 50) -> list[dict]:
    """The latest changes to the tree and the datasets, newest first: when, who, what (``kind``)."""
    store.flush_events()
    q = select(EventRow).where(EventRow.type.in_(AUDITED)).order_by(EventRow.id.desc()).limit(limit)
    return [{"time": e.time, "kind": e.type, "message": e.message, "by": (e.details or {}).get("by"),
             "changes": (e.details or {}).get("changes") or []} for e in store.session.scalars(q)]


def evictions_log(store, namespaces=None, limit: int = 100) -> list[dict]:
    """Reclaims and preemptions, newest first: who lost what to whom, and when (``namespaces``: only
    those whose victim or preemptor is in one of them; None: all)."""
    from .store import WorkloadRow

    store.flush_events()
    q = (select(EventRow, WorkloadRow).join(WorkloadRow, WorkloadRow.id == EventRow.workload_id)
         .where(EventRow.type.in_(("reclaimed", "preempted"))).order_by(EventRow.id.desc()).limit(limit * 4))
    out = []
    for event, row in store.session.execute(q):
        preemptor = (event.details or {}).get("preemptor") or ""
        if namespaces is not None and row.namespace not in namespaces and preemptor.split("/")[0] not in namespaces:
            continue
        out.append({"time": event.time, "kind": event.type, "victim": {"workload": row.id, "name": row.name,
                    "kind": row.kind, "user": row.user, "team": row.tenant, "namespace": row.namespace},
                    "preemptor": preemptor, "message": event.message})
        if len(out) >= limit:
            break
    return out
