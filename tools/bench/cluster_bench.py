"""The cluster benchmark on a control plane of its own, its controller-manager and scheduler at a high client QPS.

    .venv/bin/python tools/bench/cluster_bench.py [--qps 500 --burst 1000] [--pin 0:1] [tenancy bench options...]

starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler (both with
``--kube-api-qps``/``--kube-api-burst``) and kwok from tools/controlplane, runs
``tenancy bench --cluster <its kubeconfig>`` with the other options (e.g. ``--pods 1000,5000
--json``), and stops it. A tool, not part of ``tenancy bench``: the package does not ship
Kubernetes binaries; against a cluster of your own, run ``tenancy bench --cluster KUBECONFIG``.

``--pin CONTROL_PLANE_CPUS:REST_CPUS`` (e.g. ``0:1``, ``0-1:2,3``) runs the control plane's
processes on the first cores and everything else (the client, and the hub, the service and the
watcher it starts) on the others, as on a cluster whose service runs on a worker node: the
control plane is started from this process while it is pinned to the first set (its processes
and all their threads inherit it), then this process moves to the second. The settings row's
``affinity`` says where each ran.

With ``--apiserver-profile PREFIX`` kube-apiserver is started with ``--profiling=true`` and each
side's CPU profile is written to ``PREFIX-<pods>-<round>-<side>.pprof`` (``go tool pprof -top``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "controlplane"))

from controlplane import ControlPlane  # noqa: E402


def cpu_list(text: str) -> set[int]:
    """``0-2,5`` -> {0, 1, 2, 5}; ValueError naming what is wrong."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{part.strip()!r} is not a core number or a range like 0-3")
        if high and int(high) < int(low):
            raise ValueError(f"{part.strip()!r} is a range that ends before it starts")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin(text: str) -> tuple[set[int], set[int]]:
    """``--pin CONTROL_PLANE_CPUS:REST_CPUS``, each set of cores one this process may run on."""
    control, sep, rest = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: give two sets of cores, CONTROL_PLANE_CPUS:REST_CPUS, e.g. 0:1")
    allowed = os.sched_getaffinity(0)
    sets = []
    for name, part in (("the control plane's", control), ("the rest's", rest)):
        try:
            cpus = cpu_list(part)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {name} cores: {err}") from None
        if not cpus <= allowed:
            raise argparse.ArgumentTypeError(f"{text!r}: {name} cores {sorted(cpus - allowed)} are not among this "
                                             f"machine's usable cores {sorted(allowed)}")
        sets.append(cpus)
    return sets[0], sets[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qps", type=float, default=500.0, help="--kube-api-qps of the controller-manager and scheduler")
    parser.add_argument("--burst", type=int, default=1000, help="--kube-api-burst of both")
    parser.add_argument("--pin", type=pin, metavar="CONTROL_PLANE_CPUS:REST_CPUS",
                        help="the control plane's processes on the first cores, the client, hub and service on the "
                             "others (e.g. 0:1)")
    ours, rest = parser.parse_known_args(argv)
    from hub_ext.cli import main as tenancy

    flags = [f"--kube-api-qps={ours.qps:g}", f"--kube-api-burst={ours.burst}"]
    # kube-apiserver serves /debug/pprof only with --profiling (tools/controlplane turns it off for tests)
    apiserver = ["--profiling=true"] if any(a.startswith("--apiserver-profile") for a in rest) else []
    with tempfile.TemporaryDirectory(prefix="tenancy-bench-cp-") as work:
        if ours.pin:  # what the control plane's processes start with, they and their threads keep
            os.sched_setaffinity(0, ours.pin[0])
        with ControlPlane(work, extra_apiserver_args=apiserver, extra_controller_manager_args=flags,
                          extra_scheduler_args=flags) as cp:
            if ours.pin:
                os.sched_setaffinity(0, ours.pin[1])
            return tenancy(["bench", "--cluster", str(cp.kubeconfig), *rest])


if __name__ == "__main__":
    sys.exit(main())
