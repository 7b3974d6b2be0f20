"""The service's recorded history as a scenario (DESIGN.md "Scenario format"), for ``tenancy history export``.

What the scenario holds, and where it comes from:

- ``nodes``: the cluster's nodes at the period's start, as the service noted them
  (an event ``nodes`` at its start and whenever a node joined, changed or went);
  today's when none was noted by then. Changes within the period are not replayed
  (the scenario format adds nodes only at its start).
- ``objects``: the quota tree in force at the period's start (from the ``tree``
  events an admin's edit records, with the tree before and after; else the tree
  in force now), the ResourceQuotas and the PriorityClasses of our own (not the
  three built-in ones) the engine holds now.
- ``steps``: each workload applied at its submission (a training job as a Job of
  its replicas, a notebook as a bare Pod, with its priority class, requests and
  grace period), with its observed run time as ``tenancy.jupyter.org/duration``;
  a cancellation (or a stopped notebook) as a delete at that time; each tree an
  admin put in force as an apply of it; ``advance`` steps between. Workloads of
  a namespace that share a name (the service tells them apart by id) get their
  id after the name, or the scenario would apply the second as an update of the first.

Observed run time: of a workload that succeeded, its pods' longest run (from
admission to end; an evicted attempt does not count, the replay evicts it
again); of one that ended otherwise or still runs, its last pod's run until it
ended (or until the period's end: a lower bound); of one that never ran, the
time from its submission until it ended or the period ended (so the replay of a
what-if still has an end for it). Work submitted before the period that was
still active at its start is applied at time 0.
"""

from __future__ import annotations

from collections import Counter

from ..quota.quantity import format_list
from ..scheduler.model import PREEMPTED, RECLAIMED
from ..service.workloads import NOTEBOOK

#: States in which the workload was ended by someone (the user, the hub): a delete in the scenario.
CANCELLED = ("Cancelled", "Stopped")


def _seconds(value: float) -> str:
    return f"{max(0.0, round(value, 3)):g}s"


def run_time(row, end: float) -> float:
    """The workload's observed run time in seconds (see the module's docstring)."""
    ran = [p for p in row.pods if p.admitted_at is not None]
    if row.state == "Succeeded" and ran:
        done = [p for p in ran if p.phase == "Succeeded" and p.finished_at is not None] or ran
        return max((p.finished_at or end) - p.admitted_at for p in done)
    if ran:
        last = max(ran, key=lambda p: p.admitted_at)
        return (last.finished_at or row.finished or end) - last.admitted_at
    return (row.finished or end) - row.created


def scenario_names(rows) -> dict[str, str]:
    """workload id -> its name in the scenario. The service tells work apart by id, so two of a namespace's
    workloads may share a name (bob's two "bob-train" jobs); a scenario keys objects by kind, namespace and
    name, and would take the second for an update of the first. Those get their id after their name."""
    same = Counter((r.kind == NOTEBOOK, r.namespace, r.name) for r in rows)
    return {r.id: r.name if same[(r.kind == NOTEBOOK, r.namespace, r.name)] == 1 else f"{r.name[:54]}-{r.id}"
            for r in rows}


def workload_manifest(row, end: float, name: str | None = None) -> dict:
    spec = row.spec or {}
    annotations = {"tenancy.jupyter.org/duration": _seconds(run_time(row, end))}
    pod = {"priorityClassName": spec.get("priorityClassName"),
           "containers": [{"name": row.kind, "resources": spec.get("resources") or {}}]}
    if spec.get("gracePeriodSeconds") is not None:
        pod["terminationGracePeriodSeconds"] = spec["gracePeriodSeconds"]
    meta = {"name": name or row.name, "namespace": row.namespace, "annotations": annotations}
    if row.kind == NOTEBOOK:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod}
    replicas = spec.get("replicas", 1)
    if spec.get("gang") and replicas > 1:
        annotations["tenancy.jupyter.org/gang"] = "true"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": replicas, "completions": replicas, "template": {"spec": pod}}}


def _ref(row, name: str) -> dict:
    return {"kind": "Pod" if row.kind == NOTEBOOK else "Job", "namespace": row.namespace, "name": name}


def tree_at(events, start: float, now_manifest):
    """The tree manifest in force at ``start``: the last edit before it, else what the first edit after it
    replaced, else the tree in force now."""
    before = [e for e in events if e.time <= start and (e.details or {}).get("manifest")]
    if before:
        return before[-1].details["manifest"]
    after = [e for e in events if e.time > start and "before" in (e.details or {})]
    return after[0].details["before"] if after else now_manifest


def node_list(engine) -> list[dict]:
    """The engine's nodes as a scenario lists them."""
    return [{"name": n.name, "allocatable": format_list(n.allocatable), **({"labels": n.labels} if n.labels else {})}
            for n in engine.cluster.nodes.values()]


def record_nodes(store, engine, now: float, why: str) -> None:
    """Note the cluster's nodes as they are from ``now`` (an event ``nodes``): what an export starts from."""
    store.record(now, "nodes", why, details={"nodes": node_list(engine)})


def nodes_at(events, start: float, now_nodes: list) -> list:
    """The nodes recorded last at or before ``start``; the nodes of now when none was recorded by then."""
    before = [e for e in events if e.time <= start and (e.details or {}).get("nodes")]
    return before[-1].details["nodes"] if before else now_nodes


def cluster_objects(engine) -> tuple[list, list]:
    """(nodes, ResourceQuotas and our own PriorityClasses) as the engine holds them now."""
    nodes = node_list(engine)
    objects = []
    for pc in engine.classes.by_name.values():
        if pc.builtin:
            continue
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc.name},
                        "value": pc.value, "globalDefault": pc.global_default,
                        "preemptionPolicy": pc.preemption_policy, "description": pc.description})
    for namespace, quotas in sorted(engine.resource_quotas.items()):
        for rq in quotas.values():
            objects.append({"apiVersion": "v1", "kind": "ResourceQuota",
                            "metadata": {"name": rq.name, "namespace": namespace},
                            "spec": {"hard": format_list(rq.hard)}})
    return nodes, objects


def settling(rows, eviction_events) -> dict[float, float]:
    """decision time -> when the last eviction decided then was done (its victim gone).

    The simulator runs each step until the evictions it made are done, moving its clock
    through their grace periods; so the step after one that evicted starts from then.
    """
    decided: dict[str, list[float]] = {}
    for e in eviction_events:
        decided.setdefault(e.workload_id, []).append(e.time)
    out: dict[float, float] = {}
    for row in rows:
        for pod in row.pods:
            if pod.phase != "Evicted" or pod.finished_at is None:
                continue
            at = max((t for t in decided.get(row.id, ()) if t <= pod.finished_at), default=None)
            if at is not None:
                out[at] = max(out.get(at, at), pod.finished_at)
    return out


def export(rows, tree_events, *, start: float, end: float, engine, tree_manifest, settled=None,
           node_events=()) -> dict:
    """The scenario document of the workloads ``rows`` (with their pod rows) from ``start`` to ``end``.

    ``settled`` (``settling``): a step followed by evictions (decided before the next step) is taken to
    end when they were done, as the simulator's does; the next ``advance`` counts from then."""
    settled = settled or {}
    nodes, objects = cluster_objects(engine)
    nodes = nodes_at(node_events, start, nodes)
    tree = tree_at(tree_events, start, tree_manifest)
    if tree:
        objects.insert(0, tree)
    actions = []  # (time, order, step): at one time, trees first, then deletes, then submissions
    for e in tree_events:
        if start < e.time <= end and (e.details or {}).get("manifest"):
            actions.append((e.time, 0, {"name": "the quota tree changed", "apply": [e.details["manifest"]]}))
    kept = [r for r in sorted(rows, key=lambda r: (r.created, r.id))
            if not (r.created > end or (r.finished is not None and r.finished < start))]
    names = scenario_names(kept)
    for row in kept:
        at, name = max(row.created, start), names[row.id]
        actions.append((at, 2, {"name": f"{row.user} submitted {name}", "apply": [workload_manifest(row, end, name)]}))
        if row.state in CANCELLED and row.finished is not None and row.finished <= end:
            actions.append((row.finished, 1, {"name": f"{name} was cancelled", "delete": [_ref(row, name)]}))
    actions.sort(key=lambda a: (a[0], a[1]))
    steps, now = [], start
    for i, (at, _, step) in enumerate(actions):
        if at > now:
            steps.append({"advance": _seconds(at - now)})
            now = at
        steps.append(step)
        following = actions[i + 1][0] if i + 1 < len(actions) else end
        # The evictions decided after this step and before the next were made by it: it ends when they are done.
        now = max([now, *(done for decided, done in settled.items() if at <= decided < following or
                          (decided == following == at))])
    if end > now:
        steps.append({"advance": _seconds(end - now)})
    return {"name": "recorded history", "description": f"recorded by the tenancy service from {start:.0f} to "
            f"{end:.0f} (Unix time); replays with tenancy simulate", "nodes": nodes, "objects": objects,
            "steps": steps}


def recorded_scenario(controller, since_seconds: float | None, now: float) -> dict | None:
    """The service's history of the last ``since_seconds`` (None: all of it) as a scenario; None when no work
    was recorded in that period."""
    store = controller.store
    start = now - since_seconds if since_seconds is not None else 0.0
    rows = store.history_rows(start, now)
    if not rows:
        return None
    if since_seconds is None:
        start = min(r.created for r in rows)
    evictions = store.events_of_type(PREEMPTED) + store.events_of_type(RECLAIMED)
    return export(rows, store.events_of_type("tree"), start=start, end=now, engine=controller.engine,
                  tree_manifest=store.setting("tree") or controller.tree_manifest, settled=settling(rows, evictions),
                  node_events=store.events_of_type("nodes"))
