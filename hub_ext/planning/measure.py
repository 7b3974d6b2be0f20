"""What a timeline measures, per team and for the cluster: the keys of ``tenancy whatif`` and ``tenancy usage``.

Per team (DESIGN.md "Capacity planning"):

- ``wait_p50_s``, ``wait_p95_s``: nearest-rank percentiles of the team's wait
  stretches that began in the period (from submission, or from an eviction, until
  the workload's pods run); a stretch still open when the period ends counts up to
  the end (a lower bound), so work that never starts is not left out. ``null`` when
  the team had none.
- ``evictions_suffered`` / ``evictions_caused``: evictions in the period whose victim
  / preemptor is of the team (a gang stopped at once is one eviction).
- ``used_hours``, ``borrowed_hours``, ``lent_hours``: resource-hours per resource,
  in the resource's base unit (cores, bytes, GPUs). A team *borrows* what it uses
  above its ``min`` of each resource its leaf names (a team outside any tree borrows
  all it uses). *Lent* is attributed in proportion to unused guarantee: at each
  instant, for each resource, the cluster's borrowed total ``B`` comes first out of
  the teams' unused guarantees ``U`` (each team's ``min - used``, when positive);
  a team lends ``unused * min(1, B / U)``, so the lenders together lend ``min(B, U)``
  and whatever is borrowed beyond ``U`` came from room nobody guaranteed.
- ``below_guarantee_s``: seconds during which the team had work waiting, was below
  its ``min`` of a resource that work asks for, and another team borrowed that
  resource (a team below its ``min`` borrows nothing itself).
- ``never_started``: workloads submitted in the period none of whose pods ever ran.

Cluster: ``utilisation`` (used resource-time over capacity-time, 0..1) and
``idle_hours`` (capacity not used, resource-hours), per resource.
"""

from __future__ import annotations

import math
from collections import defaultdict

from .timeline import Timeline

# Amounts are the engine's milli-units; hours of them in the resource's base unit.
_HOURS = 1000 * 3600


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class _Team:
    """One team's running totals, brought up to date only when the team (or the guarantees) change."""

    __slots__ = ("used", "waiting", "min", "managed", "in_tree", "since", "f_since", "h_since", "below_set",
                 "used_i", "borrowed_i", "lent_i", "below_s", "res")

    def __init__(self):
        self.used: dict = defaultdict(int)
        self.waiting: dict = defaultdict(int)  # resource -> waiting workloads that ask for it
        self.min: dict = {}
        self.managed: frozenset = frozenset()
        self.in_tree = False
        self.since = 0.0
        self.f_since: dict = {}
        self.h_since = 0.0
        self.below_set: frozenset = frozenset()
        self.used_i: dict = defaultdict(float)
        self.borrowed_i: dict = defaultdict(float)
        self.lent_i: dict = defaultdict(float)
        self.below_s = 0.0
        self.res: tuple = ()  # every resource it used or was guaranteed so far

    def borrowed(self, res: str) -> int:
        if not self.in_tree:
            return self.used.get(res, 0)
        if res not in self.managed:
            return 0
        return max(0, self.used.get(res, 0) - self.min.get(res, 0))

    def unused(self, res: str) -> int:
        return max(0, self.min.get(res, 0) - self.used.get(res, 0)) if self.in_tree else 0

    def below(self) -> frozenset:
        return frozenset(r for r, n in self.waiting.items()
                         if n > 0 and self.in_tree and self.used.get(r, 0) < self.min.get(r, 0))


class _Sweep:
    def __init__(self, start: float):
        self.now = start
        self.teams: dict[str, _Team] = defaultdict(_Team)
        self.capacity: dict = {}
        self.borrowed: dict = defaultdict(int)  # B per resource
        self.unused: dict = defaultdict(int)  # U per resource
        self.lend_rate_cum: dict = defaultdict(float)  # the integral of min(1, B/U) per resource
        self.any_borrowed_cum: dict = {frozenset(): 0.0}  # per set of resources: time any of them was borrowed
        self.used_cum: dict = defaultdict(float)
        self.cap_cum: dict = defaultdict(float)
        self.used_total: dict = defaultdict(int)

    def advance(self, t: float) -> None:
        dt = t - self.now
        if dt <= 0:
            return
        for res, b in self.borrowed.items():
            u = self.unused.get(res, 0)
            if b and u:
                self.lend_rate_cum[res] += dt * min(1.0, b / u)
        for key in self.any_borrowed_cum:
            if any(self.borrowed.get(r, 0) > 0 for r in key):
                self.any_borrowed_cum[key] += dt
        for res, cap in self.capacity.items():
            self.cap_cum[res] += dt * cap
        for res, used in self.used_total.items():
            self.used_cum[res] += dt * used
        self.now = t  # each team's own integrals are brought up to date when it changes (``settle``)

    def settle(self, team: _Team) -> None:
        """Bring ``team``'s integrals up to ``now`` (its state has been constant since ``team.since``)."""
        dt = self.now - team.since
        lend_rate_cum = self.lend_rate_cum
        f_since = team.f_since
        for res in team.res:
            amount = team.used.get(res, 0)
            if amount and dt > 0:
                team.used_i[res] += dt * amount
                b = team.borrowed(res)
                if b:
                    team.borrowed_i[res] += dt * b
            u = team.unused(res)
            if u:
                team.lent_i[res] += u * (lend_rate_cum[res] - f_since.get(res, 0.0))
            f_since[res] = lend_rate_cum[res]
        team.below_s += self.any_borrowed_cum[team.below_set] - team.h_since
        team.since = self.now
        team.h_since = self.any_borrowed_cum[team.below_set]

    def change(self, name: str, fn, touched=None) -> None:
        """Apply ``fn(team)`` to one team, keeping the cluster's B and U and the team's integrals right.

        ``touched``: the resources whose use or guarantee ``fn`` may change (None: any)."""
        team = self.teams[name]
        self.settle(team)
        resources = team.res if touched is None else touched
        before = [(r, team.borrowed(r), team.unused(r)) for r in resources]
        fn(team)
        for res, b0, u0 in before:
            self.borrowed[res] += team.borrowed(res) - b0
            self.unused[res] += team.unused(res) - u0
        new = [r for r in (*team.used, *team.min) if r not in team.res]
        for res in dict.fromkeys(new):
            self.borrowed[res] += team.borrowed(res)
            self.unused[res] += team.unused(res)
            team.f_since[res] = self.lend_rate_cum[res]
        if new:
            team.res = tuple(dict.fromkeys((*team.res, *new)))
        team.below_set = team.below()
        self.any_borrowed_cum.setdefault(team.below_set, 0.0)
        team.h_since = self.any_borrowed_cum[team.below_set]


def _events(timeline: Timeline) -> list:
    """(time, order, kind, payload): guarantees and capacity first at a time, then ends, then starts."""
    out = []
    for at, caps in timeline.capacity:
        out.append((at, 0, len(out), "capacity", caps))
    for g in timeline.guarantees:
        out.append((g.at, 0, len(out), "guarantees", g))
    for w in timeline.workloads:
        for run in w.runs:
            out.append((run.start, 2, len(out), "run", (w.team, run.requests, 1)))
            if run.end is not None:
                out.append((run.end, 1, len(out), "run", (w.team, run.requests, -1)))
        asks = tuple(r for r, a in w.requests.items() if a)
        for start, end in w.waits:
            if end is not None and end <= start:
                continue  # no time waited: nothing to integrate (its length still counts among the waits)
            out.append((start, 2, len(out), "wait", (w.team, asks, 1)))
            if end is not None:
                out.append((end, 1, len(out), "wait", (w.team, asks, -1)))
    out.sort()  # by time, ends before starts, then as made (the third field is unique: payloads never compared)
    return out


def measure(timeline: Timeline) -> tuple[dict[str, dict], dict]:
    """Per team (the keys above) and for the cluster, over ``timeline.start`` .. ``timeline.end``."""
    start, end = timeline.start, timeline.end
    sweep = _Sweep(start)

    def set_guarantees(g) -> None:
        for name in set(sweep.teams) | set(g.mins):
            def apply(team, name=name):
                team.min = dict(g.mins.get(name, {}))
                team.managed = g.managed.get(name, frozenset())
                team.in_tree = name in g.mins
            sweep.change(name, apply)

    for at, _, _, kind, payload in _events(timeline):
        at = min(max(at, start), end)
        sweep.advance(at)
        if kind == "capacity":
            sweep.capacity = dict(payload)
        elif kind == "guarantees":
            set_guarantees(payload)
        elif kind == "run":
            name, requests, sign = payload

            def run(team, requests=requests, sign=sign):
                for res, amount in requests.items():
                    team.used[res] += sign * amount
            sweep.change(name, run, tuple(r for r in requests if r in sweep.teams[name].res))
            for res, amount in requests.items():
                sweep.used_total[res] += sign * amount
        else:
            name, asks, sign = payload

            def wait(team, asks=asks, sign=sign):
                for res in asks:
                    team.waiting[res] += sign
            sweep.change(name, wait, ())
    sweep.advance(end)
    for team in sweep.teams.values():
        sweep.settle(team)
    return _per_team(timeline, sweep), _cluster(sweep)


def _hours(values: dict) -> dict:
    return {res: round(v / _HOURS, 3) for res, v in sorted(values.items()) if v}


def _per_team(timeline: Timeline, sweep: _Sweep) -> dict[str, dict]:
    start, end = timeline.start, timeline.end
    waits: dict = defaultdict(list)
    never: dict = defaultdict(int)
    for w in timeline.workloads:
        for s, e in w.waits:
            if start <= s < end or (s == end == start):
                waits[w.team].append(min(end, e if e is not None else end) - s)
        if start <= w.submitted <= end and not w.started:
            never[w.team] += 1
    suffered: dict = defaultdict(set)
    caused: dict = defaultdict(set)
    for ev in timeline.evictions:
        if start <= ev.at <= end:
            suffered[ev.victim_team].add((ev.victim, ev.at))
            if ev.preemptor_team is not None:
                caused[ev.preemptor_team].add((ev.victim, ev.at))
    out = {}
    for name in sorted(set(sweep.teams) | set(waits)):
        team = sweep.teams.get(name) or _Team()
        p50, p95 = percentile(waits[name], 0.5), percentile(waits[name], 0.95)
        out[name] = {
            "wait_p50_s": None if p50 is None else round(p50, 3),
            "wait_p95_s": None if p95 is None else round(p95, 3),
            "evictions_suffered": len(suffered[name]),
            "evictions_caused": len(caused[name]),
            "used_hours": _hours(team.used_i),
            "borrowed_hours": _hours(team.borrowed_i),
            "lent_hours": _hours(team.lent_i),
            "below_guarantee_s": round(team.below_s, 3),
            "never_started": never[name],
            "waits": len(waits[name]),
        }
    return out


def _cluster(sweep: _Sweep) -> dict:
    return {
        "utilisation": {res: round(sweep.used_cum[res] / cap, 4) for res, cap in sorted(sweep.cap_cum.items()) if cap},
        "idle_hours": {res: round(max(0.0, cap - sweep.used_cum[res]) / _HOURS, 3)
                       for res, cap in sorted(sweep.cap_cum.items())},
    }
