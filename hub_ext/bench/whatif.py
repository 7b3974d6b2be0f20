"""``tenancy bench --whatif``: a week of work replayed under two trees, as ``tenancy whatif`` does it.

The week (``week.week_scenario``) is made and parsed once (timed apart: that is
reading a file, not replaying it); then the figure: both plays (in two
processes when there are two cores) and their measures, wall-clock, from the
parsed scenario to the rows ``whatif --json`` prints. The proposed tree lets
every leaf use four times its guarantee instead of twice.
"""

from __future__ import annotations

import json
import time

from ..quota.tree import parse_tree
from ..sim.scenario import parse_scenario
from ..planning.whatif import compare, play_both, with_tree
from .synthetic import tree_manifest
from .week import week_scenario

# (workloads, leaves, nodes): a busy week (some work waits an hour, hundreds of evictions), and the same
# week on fewer nodes, overloaded (work waits most of a day): the engine's decisions cost more there.
FULL = ((10_000, 100, 14), (10_000, 100, 10))
QUICK = ((1_000, 100, 10),)


def bench_whatif(workloads: int, leaves: int, nodes: int, seed: int) -> dict:
    t0 = time.perf_counter()
    scenario = parse_scenario(week_scenario(workloads, leaves, nodes, seed))
    proposed = with_tree(scenario, parse_tree(tree_manifest(leaves, nodes, leaf_max_factor=4)))
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    (cur_teams, cur_cluster), (new_teams, new_cluster) = play_both(scenario, proposed)
    rows = compare(cur_teams, cur_cluster, new_teams, new_cluster)
    whatif_s = time.perf_counter() - t0
    teams = [r for r in rows if r["scope"] == "team"]
    waits = [r["current"]["wait_p95_s"] for r in teams if r["current"] and r["current"]["wait_p95_s"] is not None]

    def total(side: str, key: str) -> int:
        return sum((r[side] or {}).get(key, 0) for r in teams)

    return {
        "bench": "whatif", "workloads": workloads, "leaves": leaves, "nodes": nodes,
        "steps": len(scenario.steps), "parse_s": round(parse_s, 2), "whatif_s": round(whatif_s, 2),
        "evictions": [total("current", "evictions_suffered"), total("proposed", "evictions_suffered")],
        "worst_team_wait_p95_s": max(waits, default=None),
        "utilisation_cpu": [rows[-1]["current"]["utilisation"].get("cpu"), rows[-1]["proposed"]["utilisation"].get("cpu")],
    }


def main(args) -> int:
    for scale in QUICK if args.quick else FULL:
        _print(bench_whatif(*scale, args.seed), args.json)
    return 0


def _print(row: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(row), flush=True)
    else:
        print(f"whatif      {row['workloads']} workloads over {row['leaves']} leaves, {row['nodes']} nodes, a week "
              f"({row['steps']} steps) under two trees: {row['whatif_s']} s  (evictions {row['evictions'][0]} -> "
              f"{row['evictions'][1]}, worst team wait p95 under the current tree {row['worst_team_wait_p95_s']} s, cpu utilisation {row['utilisation_cpu'][0]} -> {row['utilisation_cpu'][1]}; "
              f"making and parsing the week {row['parse_s']} s)", flush=True)
