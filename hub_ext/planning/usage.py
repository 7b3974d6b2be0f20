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

Capacity is the nodes' as the service noted them (an event ``nodes`` at its start and
whenever a node joined, changed or went: a step function over the period); today's
where nothing was noted by the period's start. Guarantees are today's (the tree's
edits are kept, but a team's ``min`` is not re-derived from each of them).
"""

from __future__ import annotations

from collections import Counter

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


def _total(nodes: list) -> dict:
    total: Counter = Counter()
    for n in nodes:
        try:
            total.update(parse_resource_list(n.get("allocatable") or {}, "allocatable"))
        except ValidationError:
            continue  # a node noted with an amount we cannot read adds nothing rather than failing the report
    return dict(total)


def capacity_steps(node_events, start: float, end: float, now_capacity: dict) -> list:
    """[(at, capacity)]: the nodes noted last by ``start`` (today's when none was), then each change noted
    within the period."""
    before = [e for e in node_events if e.time <= start and (e.details or {}).get("nodes") is not None]
    steps = [(start, _total(before[-1].details["nodes"]) if before else dict(now_capacity))]
    for e in node_events:
        if start < e.time <= end and (e.details or {}).get("nodes") is not None:
            steps.append((e.time, _total(e.details["nodes"])))
    return steps


def history_timeline(rows, eviction_events, *, start: float, end: float, engine, by: str = "team",
                     node_events=()) -> Timeline:
    keys = _Keys(by, engine, rows)
    timeline = Timeline(start, end, capacity=capacity_steps(node_events, start, end, engine.cluster.capacity),
                        tree=engine.quota.tree is not None)
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
    timeline = history_timeline(rows, events, start=now - since_seconds, end=now, engine=controller.engine, by=by,
                                node_events=store.events_of_type("nodes"))
    teams, cluster = measure(timeline)
    used: Counter = Counter()
    for values in teams.values():
        used.update(values["used_hours"])
    # Named, and with what was used in all: one row among the teams' in a table or a CSV file.
    cluster = {"name": "cluster", "used_hours": {r: round(v, 3) for r, v in sorted(used.items())}, **cluster}
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


CSV_COLUMNS = ["name", "resource", "used_hours", "borrowed_hours", "lent_hours", "below_guarantee_s", "wait_p50_s",
               "wait_p95_s", "evictions_suffered", "evictions_caused", "never_started", "utilisation", "idle_hours"]


def csv_rows(report: dict) -> list[list]:
    """One row per group and resource (the per-resource hours side by side), then the cluster's, one per
    resource (named ``cluster``: used, utilisation and idle hours; the teams' columns empty)."""
    out = [list(CSV_COLUMNS)]
    for team in report["teams"]:
        resources = sorted(set(team["used_hours"]) | set(team["borrowed_hours"] or {}) | set(team["lent_hours"] or {}))
        for res in resources or [""]:
            out.append([team["name"], res, team["used_hours"].get(res, 0),
                        *(("" if team[k] is None else team[k].get(res, 0)) for k in ("borrowed_hours", "lent_hours")),
                        *("" if team[k] is None else team[k] for k in ("below_guarantee_s", "wait_p50_s", "wait_p95_s",
                                                                       "evictions_suffered", "evictions_caused",
                                                                       "never_started")), "", ""])
    cluster = report["cluster"]
    for res in sorted(set(cluster.get("used_hours") or {}) | set(cluster["utilisation"]) | set(cluster["idle_hours"])):
        out.append([cluster.get("name", "cluster"), res, (cluster.get("used_hours") or {}).get(res, 0), "", "", "", "",
                    "", "", "", "", cluster["utilisation"].get(res, ""), cluster["idle_hours"].get(res, "")])
    return out
