"""What a watcher pays per event: the stored size of the service's training Job and its pod against
plain's, and without the service's environment variables or extra labels, on a control plane of
its own (tools/controlplane). Prints JSON and protobuf bytes of each, as the API server sends them.

    .venv/bin/python tools/bench/object_sizes.py
"""

from __future__ import annotations

import copy
import ssl
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "controlplane"))

from controlplane import ControlPlane  # noqa: E402

RUN = {"tenancy-bench": "r1"}  # the benchmark's node selector and extra label


def manifests() -> dict[str, dict]:
    """name -> Job manifest: the service's (as the benchmark's service makes it), two variants, plain's."""
    from hub_ext.backends.kubernetes.backend import KubernetesBackend
    from hub_ext.bench.plain import job as plain_job
    from hub_ext.service.workloads import check_body

    backend = KubernetesBackend(api_client=object(), node_selector=RUN, extra_labels=RUN, quota_tree_object="")
    try:
        spec = check_body({"kind": "training", "name": "job-1", "command": ["sleep", "3600"],
                           "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}})
        spec["priorityClassName"] = "system-cluster-critical"
        row = SimpleNamespace(id="1a2b3c4d", name="job-1", namespace="sizes", kind="training", spec=spec)
        service = backend.job_manifest(row, SimpleNamespace(name="job-1-0"))
    finally:
        backend.close()
    no_env = copy.deepcopy(service)
    no_env["metadata"]["name"] = "job-2-0"
    del no_env["spec"]["template"]["spec"]["containers"][0]["env"]
    no_labels = copy.deepcopy(service)
    no_labels["metadata"]["name"] = "job-3-0"
    for meta in (no_labels["metadata"], no_labels["spec"]["template"]["metadata"]):
        meta["labels"] = dict(RUN)
    plain = plain_job("plain-1", RUN["tenancy-bench"], "500m", "64Mi", "system-cluster-critical")
    return {"the service": service, "the service without its environment variables": no_env,
            "the service without its two extra labels": no_labels, "plain": plain}


def main() -> int:
    from kubernetes import client

    jobs = manifests()
    with tempfile.TemporaryDirectory(prefix="tenancy-sizes-") as work, ControlPlane(work) as cp:
        cp.add_node("n1", {"cpu": "32", "memory": "64Gi"}, labels=RUN)
        cp.create_namespace("sizes")
        api = cp.api_client()
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        for body in jobs.values():
            batch.create_namespaced_job("sizes", body)
        deadline = time.monotonic() + 120
        while True:
            pods = core.list_namespaced_pod("sizes").items
            if len(pods) == len(jobs) and all(p.status.phase == "Running" for p in pods):
                break
            if time.monotonic() > deadline:
                print("the pods did not all run within 120 s", file=sys.stderr)
                return 1
            time.sleep(0.5)
        time.sleep(3)  # the Job controller's status writes settle
        cfg = api.configuration
        tls = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        tls.load_cert_chain(cfg.cert_file, cfg.key_file)

        def size(path: str, accept: str) -> int:
            request = urllib.request.Request(cfg.host + path, headers={"Accept": accept})
            with urllib.request.urlopen(request, context=tls) as resp:
                return len(resp.read())

        by_job = {p.metadata.labels["job-name"]: p.metadata.name for p in pods}
        print(f"{'':56} {'JSON':>6} {'protobuf':>9} bytes")
        for title, body in jobs.items():
            name = body["metadata"]["name"]
            for kind, path in (("Job", f"/apis/batch/v1/namespaces/sizes/jobs/{name}"),
                               ("pod", f"/api/v1/namespaces/sizes/pods/{by_job[name]}")):
                print(f"{title + ': ' + kind:56} {size(path, 'application/json'):>6} "
                      f"{size(path, 'application/vnd.kubernetes.protobuf'):>9}")
        api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
