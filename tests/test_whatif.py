"""``tenancy whatif`` on a hand-made two-team scenario, its waits and evictions worked out by hand for both trees.

The cluster: one node of 4 CPUs. Two teams, a and b (leaves of the same name, namespaces a and b).
Each Job has one pod, a 10 s grace period and a run time (tenancy.jupyter.org/duration).

    t=0   a submits a1: 3 CPUs for 100 s
    t=10  b submits b1: 2 CPUs for 50 s
    then the clock runs on by 190 s

Current tree (a: min 2 max 4; b: min 2 max 4):
    t=0   a1 runs (a uses 3: 1 borrowed from b's idle guarantee). Wait: 0 s.
    t=10  b1 would keep b within its min (2) and only 1 CPU is free: b reclaims. a is above its min, so a1
          (its only pod, the victim that takes a to 0) is evicted; its Job queues a replacement at once.
    t=20  a1 is gone (10 s grace); b1 runs. b1 waited 10 s. The replacement needs 3 CPUs, 2 are free: it waits
          (cluster capacity; it cannot reclaim, it would take a above its min).
    t=70  b1 ends (50 s); the replacement runs (until t=170). a's second wait: 10 -> 70 = 60 s.
    The settling of b1's step moved the clock to 20, so the run ends at 20 + 190 = 210.
  a: waits [0, 60] -> p50 0 (nearest rank), p95 60; 1 eviction suffered, 0 caused.
  b: waits [10] -> p50 10, p95 10; 0 suffered, 1 caused.
  borrowed (a, above its min of 2): 1 CPU over 0..20 (a1 holds its node until gone) and 1 CPU over 70..170:
     120 CPU-s = 0.033 h. b never borrows. b lends what a borrows (its unused guarantee covers it): 0.033 h.
  below guarantee: b had b1 waiting over 10..20 with 0 < 2 CPUs while a borrowed: 10 s. a's replacement
     waited over 20..70 below a's min, but b used exactly its min (borrowed nothing): 0 s.
  cluster: used 3*20 + 2*50 + 3*100 = 460 CPU-s of 4*210 = 840: 54.76 %, idle 380 CPU-s = 0.106 h.

Proposed tree (a: min 3 max 4; b: min 1 max 4):
    t=0   a1 runs within a's min. Wait 0 s.
    t=10  b1 would take b to 2 > its min 1: no reclaim, equal priority: no preemption. It waits.
    t=100 a1 ends; b1 runs (until 150). b1 waited 90 s. The run ends at 10 + 190 = 200; both are measured to 210.
  a: waits [0] -> 0 / 0; no evictions. b: waits [90] -> 90 / 90; no evictions.
  b borrows 1 CPU (2 used, min 1) over 100..150 once a1 is gone: 50 CPU-s = 0.014 h, lent by a (idle then).
  below guarantee: b waited over 10..100 below its min, but a used exactly its min (borrowed nothing): 0 s.
  cluster: used 3*100 + 2*50 = 400 CPU-s of 840: 47.62 %, idle 440 CPU-s = 0.122 h.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hub_ext.cli import main

REPO = Path(__file__).resolve().parents[1]


def _job(ns: str, name: str, cpu: int, seconds: int) -> str:
    return (f"{{apiVersion: batch/v1, kind: Job, metadata: {{name: {name}, namespace: {ns}, annotations: "
            f"{{tenancy.jupyter.org/duration: {seconds}s}}}}, spec: {{template: {{spec: "
            f"{{terminationGracePeriodSeconds: 10, containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}}}}}}}")


def _tree(a_min: int, b_min: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: scheduling.sigs.k8s.io/v1beta1
        kind: ElasticQuotaTree
        metadata: {{name: teams}}
        spec:
          root:
            name: root
            min: {{cpu: 4}}
            max: {{cpu: 4}}
            children:
            - {{name: a, namespaces: [a], min: {{cpu: {a_min}}}, max: {{cpu: 4}}}}
            - {{name: b, namespaces: [b], min: {{cpu: {b_min}}}, max: {{cpu: 4}}}}
        """)


def _scenario(jobs_a: str = _job("a", "a1", 3, 100)) -> str:
    tree = textwrap.indent(_tree(2, 2), "    ").lstrip()
    return textwrap.dedent("""\
        nodes:
          - {name: n1, allocatable: {cpu: "4", memory: 16Gi}}
        objects:
          - """) + tree + textwrap.dedent(f"""\
        steps:
          - apply: [{jobs_a}]
          - advance: 10s
          - apply: [{_job("b", "b1", 2, 50)}]
          - advance: 190s
        """)


@pytest.fixture
def files(tmp_path):
    scenario, proposed = tmp_path / "week.yaml", tmp_path / "proposed.yaml"
    scenario.write_text(_scenario())
    proposed.write_text(_tree(3, 1))
    return scenario, proposed


def _rows(capsys, *argv) -> dict:
    assert main(["whatif", *map(str, argv), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return {r.get("name", "cluster"): r for r in rows}


def test_waits_and_evictions_worked_out_by_hand_for_both_trees(files, capsys):
    rows = _rows(capsys, files[0], "--tree", files[1])
    assert set(rows) == {"a", "b", "cluster"}
    a, b, cluster = rows["a"], rows["b"], rows["cluster"]
    assert [a["scope"], b["scope"], cluster["scope"]] == ["team", "team", "cluster"]
    cur = {name: rows[name]["current"] for name in "ab"}
    new = {name: rows[name]["proposed"] for name in "ab"}
    assert (cur["a"]["wait_p50_s"], cur["a"]["wait_p95_s"], cur["b"]["wait_p50_s"], cur["b"]["wait_p95_s"]) == \
        (0, 60, 10, 10)
    assert (new["a"]["wait_p50_s"], new["a"]["wait_p95_s"], new["b"]["wait_p50_s"], new["b"]["wait_p95_s"]) == \
        (0, 0, 90, 90)
    assert [(t["evictions_suffered"], t["evictions_caused"]) for t in (cur["a"], cur["b"])] == [(1, 0), (0, 1)]
    assert [(t["evictions_suffered"], t["evictions_caused"]) for t in (new["a"], new["b"])] == [(0, 0), (0, 0)]
    assert cur["a"]["borrowed_hours"] == {"cpu": round(120 / 3600, 3)} == cur["b"]["lent_hours"]
    assert cur["b"]["borrowed_hours"] == cur["a"]["lent_hours"] == {}
    assert (cur["a"]["below_guarantee_s"], cur["b"]["below_guarantee_s"]) == (0, 10)
    assert new["b"]["borrowed_hours"] == {"cpu": round(50 / 3600, 3)} == new["a"]["lent_hours"]
    assert new["a"]["borrowed_hours"] == new["b"]["lent_hours"] == {}
    assert new["a"]["below_guarantee_s"] == new["b"]["below_guarantee_s"] == 0
    assert [t["never_started"] for t in (*cur.values(), *new.values())] == [0, 0, 0, 0]
    assert cluster["current"]["utilisation"]["cpu"] == round(460 / 840, 4)
    assert cluster["proposed"]["utilisation"]["cpu"] == round(400 / 840, 4)
    assert cluster["current"]["idle_hours"]["cpu"] == round(380 / 3600, 3)
    assert cluster["proposed"]["idle_hours"]["cpu"] == round(440 / 3600, 3)


def test_the_table_puts_both_trees_side_by_side(files, capsys):
    assert main(["whatif", str(files[0]), "--tree", str(files[1])]) == 0
    out = capsys.readouterr().out
    assert "team b" in out and "current tree" in out and "proposed tree" in out
    wait_line = next(line for line in out.split("team b")[1].splitlines() if "wait p50" in line)
    # the columns are two spaces apart; the durations are the vocabulary's, as on every screen
    assert re.split(r"\s{2,}", wait_line.strip())[1:] == ["10 s", "1 min 30 s"]


def test_work_that_can_never_start_is_counted(tmp_path, capsys):
    # a 6-CPU Job on a 4-CPU node never starts under either tree; its wait counts up to the end (210 s).
    scenario = tmp_path / "s.yaml"
    scenario.write_text(_scenario(_job("a", "a1", 3, 100) + ", " + _job("a", "huge", 6, 10)))
    (tmp_path / "p.yaml").write_text(_tree(3, 1))
    rows = _rows(capsys, scenario, "--tree", tmp_path / "p.yaml")
    assert rows["a"]["current"]["never_started"] == rows["a"]["proposed"]["never_started"] == 1
    assert rows["a"]["current"]["wait_p95_s"] == 210


def _error(*argv) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "hub_ext.cli", "whatif", *map(str, argv)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("case, expected", [
    ("invalid proposed tree", ["proposed.yaml", "min", "max"]),
    ("scenario without durations", ["week.yaml", "steps[0]", "Job a/a1", "tenancy.jupyter.org/duration"]),
    ("unreadable scenario", ["missing.yaml", "cannot read"]),
    ("unreadable tree", ["nothing.yaml", "cannot read"]),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_input_is_one_line(files, case, expected):
    scenario, proposed = files
    if case == "invalid proposed tree":
        proposed.write_text(_tree(3, 1).replace("max: {cpu: 4}}", "max: {cpu: 2}}", 1))  # a: min 3 > max 2
    elif case == "scenario without durations":
        scenario.write_text(scenario.read_text().replace("annotations: {tenancy.jupyter.org/duration: 100s}", ""))
    elif case == "unreadable scenario":
        scenario = scenario.with_name("missing.yaml")
    else:
        proposed = proposed.with_name("nothing.yaml")
    code, err = _error(scenario, "--tree", proposed)
    assert code == 1 and err.count("\n") == 1 and err.startswith("tenancy: error: "), err
    for word in expected:
        assert word in err, (word, err)


def test_invariants_over_a_synthetic_week():
    """Lenders together lend at most what borrowers borrow (min(B, U) at each instant), and the teams'
    resource-hours add up to the cluster's utilisation."""
    from hub_ext.bench.week import week_scenario
    from hub_ext.planning.measure import measure
    from hub_ext.planning.whatif import play
    from hub_ext.sim.scenario import parse_scenario

    timeline = play(parse_scenario(week_scenario(600, 20, 2, seed=3)))
    teams, cluster = measure(timeline)
    assert timeline.evictions and any(t["borrowed_hours"] for t in teams.values())  # a week with something in it
    for res in ("cpu", "memory"):
        borrowed = sum(t["borrowed_hours"].get(res, 0) for t in teams.values())
        lent = sum(t["lent_hours"].get(res, 0) for t in teams.values())
        used = sum(t["used_hours"].get(res, 0) for t in teams.values())
        assert lent <= borrowed + 0.01 * len(teams)  # rounding: 3 decimals per team
        capacity_hours = used + cluster["idle_hours"][res]
        assert abs(used / capacity_hours - cluster["utilisation"][res]) < 1e-3
