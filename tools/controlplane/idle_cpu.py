"""What the control plane costs while nothing asks anything of it: CPU seconds per idle minute, per component.

    .venv/bin/python tools/controlplane/idle_cpu.py [--nodes 5] [--settle 30] [--seconds 120]
        [--tests] [--controllers LIST] [--apiserver-arg=--flag=value ...] [--kcm-arg ...]
        [--scheduler-arg ...] [--etcd-arg ...] [--kwok-arg ...] [--json]

starts a ControlPlane (as tests/k8s/conftest.py does with ``--tests``: its test-only
arguments, ``controlplane.TEST_ARGS``; else as the cluster benchmark does, the defaults),
adds ``--nodes`` kwok nodes, waits ``--settle`` seconds for the start-up work to end, then
reads each process's utime + stime (``/proc/<pid>/stat``) before and after ``--seconds``
of idling. Each ``--*-arg`` adds one argument to that component (repeat it), so that a
flag can be tried on its own. CPU seconds hold under load where wall figures do not;
still, say the load (printed) beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import controlplane  # noqa: E402


def measure(cp: controlplane.ControlPlane, nodes: int, settle: float, seconds: float) -> dict:
    started = time.monotonic()
    for i in range(nodes):
        cp.add_node(f"idle-{i}", {"cpu": "16", "memory": "64Gi"})
    # the start-up's own work (informers' first lists, CRDs, the nodes' first status) is
    # not idling: a fixed time is what this measures, not a condition to wait for
    time.sleep(settle)
    before, t0 = cp.cpu_usage(), time.monotonic()
    time.sleep(seconds)
    after, t1 = cp.cpu_usage(), time.monotonic()
    minutes = (t1 - t0) / 60
    per_minute = {n: round((after[n] - before[n]) / minutes, 2) for n in after if n in before}
    return {
        "start_cpu_seconds": {n: round(v, 2) for n, v in before.items()},
        "start_cpu_seconds_all": round(sum(before.values()), 2),
        "idle_cpu_seconds_per_minute": per_minute,
        "idle_cpu_seconds_per_minute_all": round(sum(per_minute.values()), 2),
        "idle_seconds": round(t1 - t0, 1),
        "from_start_seconds": round(t1 - started, 1),
        "load": os.getloadavg(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5, help="kwok nodes to add (the benchmark's test adds 5)")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds after the nodes are Ready before measuring")
    ap.add_argument("--seconds", type=float, default=120.0, help="seconds of idling measured")
    ap.add_argument("--tests", action="store_true", help="the test-only arguments tests/k8s/conftest.py passes")
    ap.add_argument("--controllers", help="kube-controller-manager --controllers (replaces the default or --tests')")
    for name in ("apiserver", "kcm", "scheduler", "etcd", "kwok"):
        ap.add_argument(f"--{name}-arg", action="append", default=[], metavar="ARG",
                        help=f"one more argument to {name} (use --{name}-arg=--flag=value)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    options = dict(controlplane.TEST_ARGS) if args.tests else {}
    if args.controllers:
        options["controllers"] = args.controllers
    for name, key in (("apiserver", "extra_apiserver_args"), ("kcm", "extra_controller_manager_args"),
                      ("scheduler", "extra_scheduler_args"), ("etcd", "extra_etcd_args"),
                      ("kwok", "extra_kwok_args")):
        options[key] = [*options.get(key, []), *getattr(args, f"{name}_arg")]
    with tempfile.TemporaryDirectory(prefix="tenancy-idle-cpu-") as work, \
            controlplane.ControlPlane(work, **options) as cp:
        result = measure(cp, args.nodes, args.settle, args.seconds)
    result["options"] = options
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"idle {result['idle_seconds']} s, {args.nodes} nodes, load {' '.join(f'{x:.2f}' for x in result['load'])}")
    print(f"{'component':<24} {'start CPU-s':>11} {'idle CPU-s/min':>14}")
    for name, v in result["idle_cpu_seconds_per_minute"].items():
        print(f"{name:<24} {result['start_cpu_seconds'][name]:>11.2f} {v:>14.2f}")
    print(f"{'all':<24} {result['start_cpu_seconds_all']:>11.2f} {result['idle_cpu_seconds_per_minute_all']:>14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
