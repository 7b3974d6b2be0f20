"""``tenancy usage``: what each team (or leaf, or user) used, borrowed, lent and waited for over a period.

The timeline is built from the service's recorded history (workload and pod rows,
eviction events), not replayed: waits from each pod's creation to its admission,
runs from admission to end, evictions as recorded. ``measure`` turns it into the
keys of ``tenancy whatif``. Grouped ``by``:

- ``leaf``: the quota-tree leaf each namespace hangs on now (the namespace where none);
- ``team``: the hub group a workload was submitted for (its namespace where none),
  whose guarantee is its namespace's leaf's;
- ``user``: who submitted it; a user has no guarantee of their own, so borrowed, lent
  and below-guarantee are left out (``null``).

Capacity and guarantees are today's (the store keeps no history of either).
"""

from __future__ import annotations

from ..quota.errors import ValidationError
from ..quota.quantity import parse_resource_list
from ..scheduler.model import PREEMPTED, RECLAIMED
from .measure import measure
from .timeline import Eviction, Guarantees, Run, Timeline, Workload, merge_stretches

BY = ("team", "user", "leaf")


def _requests(row) -> dict:
    try:
        return parse_resource_list(((row.spec or {}).get("resources") or {}).get("requests") or {}, "requests")
    except ValidationError:
        return {}


class _Keys:
    """Which group a workload, a namespace or a pod belongs to."""

    def __init__(self, by: str, engine, rows):
        self.by, self.engine = by, engine
        self.by_name = {(r.namespace, r.name): r for r in rows}

    def leaf(self, namespace: str) -> str:
        leaf = self.engine.quota.leaf_of.get(namespace)
        return namespace if leaf is None or leaf.virtual else leaf.name

    def of_row(self, row) -> str:
        if self.by == "user":
            return row.user
        if self.by == "team":
            return row.tenant or row.namespace
        return self.leaf(row.namespace)

    def of_pod(self, ref: str) -> str | None:
        """``namespace/pod-name`` (an eviction's preemptor) -> its group, when its workload is known."""
        namespace, _, pod = ref.partition("/")
        name = pod.rsplit("-", 1)[0] if pod.rsplit("-", 1)[-1].isdigit() else pod
        row = self.by_name.get((namespace, name)) or self.by_name.get((namespace, pod))
        if row is not None:
            return self.of_row(row)
        return None if self.by == "user" else self.leaf(namespace)


def history_timeline(rows, eviction_events, *, start: float, end: float, engine, by: str = "team") -> Timeline:
    keys = _Keys(by, engine, rows)
    timeline = Timeline(start, end, capacity=[(start, dict(engine.cluster.capacity))], tree=engine.quota.tree is not None)
    mins, managed = {}, {}
    if by != "user":
        leaves = {name: node for name, node in engine.quota.nodes.items() if node.is_leaf}
        groups = {(keys.of_row(r), keys.leaf(r.namespace)) for r in rows} if by == "team" else \
            {(name, name) for name in leaves}
        for group, leaf in groups:
            node = leaves.get(leaf)
            if node is not None:
                mins[group], managed[group] = dict(node.min), frozenset(node.min) | frozenset(node.max)
    timeline.guarantees = [Guarantees(start, mins, managed)]
    evicted: dict[str, list[float]] = {}
    for event in eviction_events:
        evicted.setdefault(event.workload_id, []).append(event.time)
    by_id = {}
    for row in rows:
        requests = _requests(row)
        workload = Workload(f"{row.kind} {row.namespace}/{row.name}", row.namespace, keys.of_row(row), row.created,
                            requests=requests)
        waits = []
        for pod in row.pods:
            gone = pod.finished_at or row.finished
            # The service queues an evicted pod's replacement once the victim is gone; its wait began at the eviction.
            since = max((at for at in evicted.get(row.id, ()) if row.created <= at <= pod.created), default=pod.created)
            waits.append([since, pod.admitted_at if pod.admitted_at is not None else gone])
            if pod.admitted_at is not None:
                workload.runs.append(Run(pod.admitted_at, gone, requests))
        workload.waits = merge_stretches(waits)
        workload.runs.sort(key=lambda r: r.start)
        timeline.workloads.append(workload)
        by_id[row.id] = workload
    for event in eviction_events:
        victim = by_id.get(event.workload_id)
        if victim is None or not start <= event.time <= end:
            continue
        preemptor = (event.details or {}).get("preemptor") or ""
        timeline.evictions.append(Eviction(event.time, victim.key, victim.team, preemptor or None,
                                           keys.of_pod(preemptor) if preemptor else None))
    return timeline


def usage(controller, since_seconds: float, now: float, by: str = "team") -> dict | None:
    """``{"since", "by", "teams": [...], "cluster": {...}}`` over the last ``since_seconds``; None: no history."""
    store = controller.store
    rows = store.history_rows(now - since_seconds, now)
    if not rows:
        return None
    events = store.events_of_type(PREEMPTED) + store.events_of_type(RECLAIMED)
    timeline = history_timeline(rows, events, start=now - since_seconds, end=now, engine=controller.engine, by=by)
    teams, cluster = measure(timeline)
    if by == "user":
        for values in teams.values():
            values.update(borrowed_hours=None, lent_hours=None, below_guarantee_s=None)
    namespaces: dict[str, set] = {}
    keys = _Keys(by, controller.engine, rows)
    for row in rows:
        namespaces.setdefault(keys.of_row(row), set()).add(row.namespace)
    return {"since": since_seconds, "by": by,
            "teams": [{"name": name, "namespaces": sorted(namespaces.get(name, ())), **values}
                      for name, values in teams.items()],
            "cluster": cluster}


def seen_by(report: dict, who) -> dict:
    """The report as ``who`` may see it: admins everything; a user the groups of their teams' namespaces."""
    mine = who.namespaces()
    if mine is None:
        return report
    mine = set(mine)
    return {**report, "teams": [t for t in report["teams"] if set(t["namespaces"]) & mine]}


def csv_rows(report: dict) -> list[list]:
    """One row per group and resource (the per-resource hours side by side), then the cluster's."""
    header = ["name", "resource", "used_hours", "borrowed_hours", "lent_hours", "below_guarantee_s", "wait_p50_s",
              "wait_p95_s", "evictions_suffered", "evictions_caused", "never_started"]
    out = [header]
    for team in report["teams"]:
        resources = sorted(set(team["used_hours"]) | set(team["borrowed_hours"] or {}) | set(team["lent_hours"] or {}))
        for res in resources or [""]:
            out.append([team["name"], res, team["used_hours"].get(res, 0),
                        *(("" if team[k] is None else team[k].get(res, 0)) for k in ("borrowed_hours", "lent_hours")),
                        *("" if team[k] is None else team[k] for k in ("below_guarantee_s", "wait_p50_s", "wait_p95_s",
                                                                       "evictions_suffered", "evictions_caused",
                                                                       "never_started"))])
    return out
