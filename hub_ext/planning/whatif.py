"""``tenancy whatif``: the same arrivals under the scenario's tree and under a proposed one, measured alike.

The proposed run is the scenario with its quota tree replaced: the proposed
tree stands where the scenario's first ElasticQuotaTree stood (at the start
when it had none), and trees the scenario applies or deletes in its steps are
left out of it, so every other object and every arrival is the same. Both runs
are played by the simulator on a recording engine (``recorder``), each over
the scenario's whole time, and measured by ``measure``; they run in two
processes when the machine has two cores.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os

from ..quota.errors import ValidationError
from ..quota.manifests import flatten, parse_object, read_file
from ..quota.tree import ElasticQuotaTree
from ..quota.workloads import DURATION_ANNOTATION, WorkloadSpec
from ..sim.scenario import Scenario, is_scenario, load_scenario
from ..sim.simulator import Simulator
from .measure import measure
from .recorder import RecordingEngine


def load_proposed_tree(path: str) -> ElasticQuotaTree:
    """The one ElasticQuotaTree of ``path``, checked as ``tenancy validate`` checks it (the same messages)."""
    from ..validate import validate_file

    docs = read_file(path)
    if len(docs) == 1 and is_scenario(docs[0]):
        raise ValidationError(f"{path}: --tree takes a quota tree (one ElasticQuotaTree), not a scenario")
    validate_file(path)
    trees = [obj for obj in (parse_object(raw) for raw in flatten(docs, path)) if isinstance(obj, ElasticQuotaTree)]
    if len(trees) != 1:
        raise ValidationError(f"{path}: --tree takes one ElasticQuotaTree; the file has {len(trees)}")
    return trees[0]


def check_durations(scenario: Scenario, path: str) -> None:
    """Work that never ends makes waits meaningless: every workload must say how long it runs."""
    steps = [("objects", scenario.objects)] + [(f"steps[{i}]", s.objects) for i, s in enumerate(scenario.steps)]
    for where, objects in steps:
        for obj in objects:
            if isinstance(obj, WorkloadSpec) and obj.duration_seconds is None:
                raise ValidationError(
                    f"{path}: {where}: {obj.kind} {obj.namespace}/{obj.name} has no {DURATION_ANNOTATION} "
                    "annotation; what-if needs every workload's run time (work that never ends waits forever "
                    "behind it)")


def with_tree(scenario: Scenario, tree: ElasticQuotaTree) -> Scenario:
    """``scenario`` with ``tree`` in place of its quota tree (see the module's docstring)."""
    objects, placed = [], False
    for obj in scenario.objects:
        if isinstance(obj, ElasticQuotaTree):
            if not placed:
                objects.append(tree)
                placed = True
            continue
        objects.append(obj)
    if not placed:
        objects.insert(0, tree)
    steps = []
    for step in scenario.steps:
        if step.action == "apply":
            step = dataclasses.replace(step, objects=[o for o in step.objects if not isinstance(o, ElasticQuotaTree)])
        elif step.action == "delete":
            step = dataclasses.replace(step, refs=[r for r in step.refs if r.kind != "ElasticQuotaTree"])
        steps.append(step)
    return dataclasses.replace(scenario, objects=objects, steps=steps)


def play(scenario: Scenario):
    """The timeline of ``scenario`` played through, from time 0."""
    engine = RecordingEngine()
    Simulator(scenario, engine).play()
    return engine.timeline()


def _over(timeline, end: float) -> tuple[dict, dict]:
    timeline.end = end
    return measure(timeline)


def _worker(scenario: Scenario, conn) -> None:
    try:
        timeline = play(scenario)
        conn.send(("end", timeline.end))
        conn.send(("measures", _over(timeline, conn.recv())))
    except Exception as err:  # noqa: BLE001 - handed to the parent, which says it in one line
        conn.send(("error", err))
    finally:
        conn.close()


def play_both(current: Scenario, proposed: Scenario) -> list[tuple[dict, dict]]:
    """Both plays measured over the same period (from 0 to the later of their ends: a grace period that
    moved one clock on is idle time of the other), in two forked processes when there are two cores."""
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        timelines = [play(current), play(proposed)]
        end = max(t.end for t in timelines)
        return [_over(t, end) for t in timelines]
    ctx = multiprocessing.get_context("fork")  # the children inherit the scenarios: a week of work is large
    pipes, procs = [], []
    for scenario in (current, proposed):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(scenario, child), daemon=True)
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    try:
        answers = [_receive(conn) for conn in pipes]
        end = max(answers)
        for conn in pipes:
            conn.send(end)
        return [_receive(conn) for conn in pipes]
    finally:
        for proc in procs:
            proc.join(timeout=5)


def _receive(conn):
    kind, value = conn.recv()
    if kind == "error":
        raise value
    return value


def whatif(scenario_path: str, tree_path: str) -> list[dict]:
    """The rows of ``tenancy whatif --json``: one per team, then the cluster's."""
    scenario = load_scenario(scenario_path)
    check_durations(scenario, scenario_path)
    tree = load_proposed_tree(tree_path)
    try:
        return under_both(scenario, tree)
    except ValidationError as err:
        raise err.within(scenario_path) from None


def under_both(scenario: Scenario, tree: ElasticQuotaTree) -> list[dict]:
    """The rows of ``scenario`` played under its own tree and under ``tree`` (``tenancy whatif`` and the
    service's "Compare with last week")."""
    (cur_teams, cur_cluster), (new_teams, new_cluster) = play_both(scenario, with_tree(scenario, tree))
    return compare(cur_teams, cur_cluster, new_teams, new_cluster)


def compare(cur_teams: dict, cur_cluster: dict, new_teams: dict, new_cluster: dict) -> list[dict]:
    """Rows side by side; a team that exists under one tree only has ``null`` under the other."""
    rows = [{"scope": "team", "name": name, "current": cur_teams.get(name), "proposed": new_teams.get(name)}
            for name in sorted(set(cur_teams) | set(new_teams))]
    rows.append({"scope": "cluster", "current": cur_cluster, "proposed": new_cluster})
    return rows
