"""The README's cluster tables, read from the JSON lines of ``cluster_bench.py ... --json``.

    .venv/bin/python tools/bench/cluster_report.py RUN.json [RUN.json ...] [--timeline ROUND] [--bucket 5]

For each file, as Markdown: the figures row (pods/s of both sides, the ratio, submit p50/p99, the
service's CPU per pod: medians, each round in brackets, and with ``--watched`` the watches-only
side's ratio); a row per round of where the CPU went (the control plane's CPU-s plain / the
service side, and their ratio: pinned, that ratio is what pods/s follows; all the CPU, for
unpinned runs; the service's, the hub's and each client's); the service's CPU by thread per pod
(runs whose rounds have ``threads_cpu_seconds``); each stage's wait (the medians of
the rounds' p50s, ms), both sides; the submit latencies with ``--queued`` jobs waiting; and
with ``--timeline ROUND`` that round's timeline in ``--bucket``-second steps (pods reaching
each stage, each core's mean load) for both sides.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from hub_ext.bench.cpu import CONTROL_PLANE  # the roles the benchmark's CPU meter names its control plane by

#: the timeline's columns: a stage each side reaches, shortened
TIMELINE = (("Job created", "Jobs"), ("pod created", "pods"), ("Running", "Running"))


class ReportError(Exception):
    """A file that is not a cluster benchmark's JSON output; the message names it."""


def load(path: str) -> dict[str, dict]:
    """The rows of one run's output by their ``bench``: ``cluster-settings``, ``cluster`` (the
    first size's), ``cluster-backlog`` (with ``--queued``)."""
    rows: dict[str, dict] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ReportError(f"{path}:{number}: not a JSON line ({err.msg})") from None
                if isinstance(row, dict):
                    rows.setdefault(str(row.get("bench")), row)
    except OSError as err:
        raise ReportError(f"{path}: cannot be read ({err.strerror})") from None
    if "cluster" not in rows or not rows["cluster"].get("rounds"):
        raise ReportError(f"{path}: no cluster row with rounds (the output of cluster_bench.py ... --json?)")
    return rows


def control_plane(side: dict) -> float:
    return sum(side["cpu_seconds"].get(name, 0.0) for name in CONTROL_PLANE)


def per_pod_ms(side: dict, role: str, meter: str = "cpu_seconds") -> float:
    """A role's CPU a pod (ms) in one side of a round; ``meter="threads_cpu_seconds"``: a thread's."""
    return 1000 * side[meter].get(role, 0.0) / side["pods"]


def _each(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def figures(row: dict) -> str:
    """The figures row: medians, each round in brackets."""
    rounds = row["rounds"]
    plain = [r["plain"]["pods_per_s"] for r in rounds]
    service = [r["service"]["pods_per_s"] for r in rounds]
    ratios = [r["ratio"] for r in rounds]
    cpu = [round(per_pod_ms(r["service"], "tenancy service"), 1) for r in rounds]
    watched = ""
    if all("watched_ratio" in r for r in rounds):
        each = [r["watched_ratio"] for r in rounds]
        watched = f" | {row['watched_ratio']:.2f}× ({_each(each)})"
    return (f"| {row['pods']:,} | {row['plain_pods_per_s']:g} ({_each(plain)}) | {row['service_pods_per_s']:g} "
            f"({_each(service)}) | **{row['ratio']:.2f}×** ({_each(ratios)}){watched} | "
            f"{row['submit_p50_ms']:.0f} / {row['submit_p99_ms']:.0f} ms | "
            f"{statistics.median(cpu):.1f} ms ({_each(cpu)}) |")


def cpu_rows(row: dict) -> list[str]:
    """Where each round's CPU went, both sides."""
    out = ["| round | control plane, CPU-s plain / the service side | ratio | all the CPU | ratio | "
           "the service; the hub a pod (ms) | client CPU-s plain / the service side | measured ratio |",
           "|---|---|---|---|---|---|---|---|"]
    for number, r in enumerate(row["rounds"], 1):
        plain, service = r["plain"], r["service"]
        cp_plain, cp_service = control_plane(plain), control_plane(service)
        all_plain, all_service = plain["cpu_seconds"]["all"], service["cpu_seconds"]["all"]
        out.append(f"| {number} | {cp_plain:.1f} / {cp_service:.1f} | {cp_plain / cp_service:.2f} | "
                   f"{all_plain:.1f} / {all_service:.1f} | {all_plain / all_service:.2f} | "
                   f"{per_pod_ms(service, 'tenancy service'):.1f}; {per_pod_ms(service, 'jupyterhub'):.1f} | "
                   f"{plain['cpu_seconds'].get('client', 0):.1f} / {service['cpu_seconds'].get('client', 0):.1f} | "
                   f"{r['ratio']:.2f} |")
    return out


def thread_rows(row: dict) -> list[str]:
    """The service's CPU by thread, ms a pod, each round (a thread of no CPU in every round left out);
    nothing for runs made before the benchmark read it."""
    rounds = [r["service"] for r in row["rounds"]]
    if not all("threads_cpu_seconds" in side for side in rounds):
        return []
    names = sorted({name for side in rounds for name, seconds in side["threads_cpu_seconds"].items() if seconds},
                   key=lambda name: -max(side["threads_cpu_seconds"].get(name, 0.0) for side in rounds))
    out = ["| the service's threads, ms of CPU a pod | " + " | ".join(f"round {n}" for n in range(1, len(rounds) + 1))
           + " |", "|---" * (len(rounds) + 1) + "|"]
    for name in names:
        cells = (f"{per_pod_ms(side, name, 'threads_cpu_seconds'):.2f}" for side in rounds)
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def stage_medians(row: dict, side: str) -> dict[str, float | None]:
    """Each stage's median over the rounds of its p50 (ms), in the chain's order; None where no
    round recorded it (the benchmark's "not recorded")."""
    names: list[str] = []
    for r in row["rounds"]:
        names += [n for n in r[side].get("stages", {}) if n not in names]
    recorded = {n: [r[side]["stages"][n]["p50_ms"] for r in row["rounds"]
                    if r[side].get("stages", {}).get(n, {}).get("pods")] for n in names}
    return {n: statistics.median(p50s) if p50s else None for n, p50s in recorded.items()}


def stage_rows(row: dict) -> list[str]:
    plain, service = stage_medians(row, "plain"), stage_medians(row, "service")

    def cell(medians: dict, name: str) -> str:  # blank: the side has no such moment; a dash: not recorded
        return " " if name not in medians else " – " if medians[name] is None else f" {medians[name]:,.0f} "

    out = ["| stage (the wait from the one before, ms) | plain | the service |", "|---|---|---|"]
    for name in list(service) + [n for n in plain if n not in service]:
        out.append(f"| {name} |{cell(plain, name)}|{cell(service, name)}|")
    return out


def backlog_rows(backlog: dict) -> list[str]:
    return ["| with {queued:,} jobs waiting | p50 / p99 |".format(**backlog), "|---|---|",
            f"| ten users at once ({backlog['probes']:,}) | {backlog['queued_submit_p50_ms']:g} / "
            f"{backlog['queued_submit_p99_ms']:g} ms |",
            f"| one user's submits that start at once ({backlog['single_submits']}) | "
            f"{backlog['queued_single_submit_p50_ms']:g} / {backlog['queued_single_submit_p99_ms']:g} ms |",
            f"| one user's submits that join the queue ({backlog['waiting_submits']}) | "
            f"{backlog['queued_waiting_submit_p50_ms']:g} / {backlog['queued_waiting_submit_p99_ms']:g} ms |"]


def buckets(timeline: list[dict], seconds: int) -> list[dict]:
    """Per-second rows summed into ``seconds``-long steps (pods reaching each stage), each core's load averaged."""
    out = []
    for start in range(0, len(timeline), seconds):
        rows = timeline[start:start + seconds]
        entered = {stage: sum(r["entered"].get(stage, 0) for r in rows) for stage, _ in TIMELINE}
        cores = sorted({c for r in rows for c in r["cores"]})
        load = {c: statistics.mean(r["cores"][c] for r in rows if c in r["cores"]) for c in cores}
        out.append({"t": start, "entered": entered, "cores": load})
    return out


def timeline_rows(row: dict, number: int, seconds: int) -> list[str]:
    """Round ``number``'s timeline, both sides side by side."""
    if not 1 <= number <= len(row["rounds"]):
        raise ReportError(f"--timeline {number}: the run has rounds 1 to {len(row['rounds'])}")
    r = row["rounds"][number - 1]
    sides = {side: buckets(r[side].get("timeline", []), seconds) for side in ("plain", "service")}
    cores = sorted({c for rows in sides.values() for b in rows for c in b["cores"]})
    columns = [short for _, short in TIMELINE] + [f"{c} %" for c in cores]
    out = ["| s | " + " | ".join(f"plain: {c}" for c in columns) + " | " +
           " | ".join(f"the service: {c}" for c in columns) + " |",
           "|---" * (1 + 2 * len(columns)) + "|"]
    for i in range(max(len(rows) for rows in sides.values())):
        cells = []
        for side in ("plain", "service"):
            b = sides[side][i] if i < len(sides[side]) else None
            if b is None:
                cells += [""] * len(columns)
                continue
            cells += [str(b["entered"][stage]) for stage, _ in TIMELINE]
            cells += [f"{round(100 * b['cores'][c])}" if c in b["cores"] else "" for c in cores]
        out.append(f"| {i * seconds} | " + " | ".join(cells) + " |")
    return out


def report(path: str, timeline: int | None, seconds: int) -> list[str]:
    rows = load(path)
    row, settings = rows["cluster"], rows.get("cluster-settings", {})
    affinity = settings.get("affinity") or {}
    where = (f"pinned: the control plane on cores {affinity.get('kube-apiserver')}, the rest on {affinity.get('client')}"
             if len(set(affinity.values())) > 1 else "unpinned")
    watched = " | watches only / plain (each round)" if all("watched_ratio" in r for r in row["rounds"]) else ""
    count = len(row["rounds"])
    out = [f"{path}: {row['pods']:,} pods, {count} round{'s' if count != 1 else ''}, {where}", "",
           f"| pods | plain, pods/s | the service, pods/s | service / plain (each round){watched} | "
           f"submit p50 / p99 | the service's CPU a pod |",
           "|---" * (6 + bool(watched)) + "|", figures(row), "", *cpu_rows(row), ""]
    threads = thread_rows(row)
    out += [*threads, "", *stage_rows(row)] if threads else stage_rows(row)
    if "cluster-backlog" in rows:
        out += ["", *backlog_rows(rows["cluster-backlog"])]
    if timeline is not None:
        out += ["", f"round {timeline}, every {seconds} s:", "", *timeline_rows(row, timeline, seconds)]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="RUN.json", help="cluster_bench.py --json output")
    parser.add_argument("--timeline", type=int, metavar="ROUND", help="also this round's timeline (1 = the first)")
    parser.add_argument("--bucket", type=int, default=5, metavar="SECONDS", help="the timeline's step (default 5 s)")
    args = parser.parse_args(argv)
    if args.bucket < 1:
        parser.error(f"--bucket {args.bucket}: give a whole number of seconds, 1 or more")
    try:
        for i, path in enumerate(args.files):
            try:
                text = report(path, args.timeline, args.bucket)
            except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:  # a row of another shape
                raise ReportError(f"{path}: not the output of this version's cluster_bench.py "
                                  f"({type(err).__name__}: {err})") from None
            print(("\n" if i else "") + "\n".join(text))
    except ReportError as err:
        print(f"cluster_report: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
