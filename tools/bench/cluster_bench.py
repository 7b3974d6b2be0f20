"""The cluster benchmark on a control plane of its own, its controller-manager and scheduler at a high client QPS.

    .venv/bin/python tools/bench/cluster_bench.py [--qps 500 --burst 1000] [tenancy bench options...]

starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler (both with
``--kube-api-qps``/``--kube-api-burst``) and kwok from tools/controlplane, runs
``tenancy bench --cluster <its kubeconfig>`` with the other options (e.g. ``--pods 1000,5000
--json``), and stops it. A tool, not part of ``tenancy bench``: the package does not ship
Kubernetes binaries; against a cluster of your own, run ``tenancy bench --cluster KUBECONFIG``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "controlplane"))

from controlplane import ControlPlane  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qps", type=float, default=500.0, help="--kube-api-qps of the controller-manager and scheduler")
    parser.add_argument("--burst", type=int, default=1000, help="--kube-api-burst of both")
    ours, rest = parser.parse_known_args(argv)
    from hub_ext.cli import main as tenancy

    flags = [f"--kube-api-qps={ours.qps:g}", f"--kube-api-burst={ours.burst}"]
    with tempfile.TemporaryDirectory(prefix="tenancy-bench-cp-") as work:
        with ControlPlane(work, extra_controller_manager_args=flags, extra_scheduler_args=flags) as cp:
            return tenancy(["bench", "--cluster", str(cp.kubeconfig), *rest])


if __name__ == "__main__":
    sys.exit(main())
