"""The scheduler's controller with the Kubernetes backend, in a process of its own, until it is killed.

``tests/k8s/test_cluster_service.py`` runs it, waits for the cluster to show what
it admitted, then kills it with SIGKILL (no clean-up code runs) and restarts
from the same database::

    python service_process.py DB KUBECONFIG NODE_LABEL_KEY NODE_LABEL_VALUE NAMESPACE COUNT CPU
"""

from __future__ import annotations

import asyncio
import sys

from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store


def backend_for(kubeconfig: str, key: str, value: str) -> KubernetesBackend:
    return KubernetesBackend(kubeconfig=kubeconfig, node_label_selector=f"{key}={value}", node_selector={key: value},
                             poll_seconds=0.3, count_foreign_pods=False, sync_cluster_limits=False,
                             quota_tree_object="")


async def main(db, kubeconfig, key, value, namespace, count, cpu) -> None:
    controller = Controller(store=Store(f"sqlite:///{db}"), backend=backend_for(kubeconfig, key, value), tree=None)
    admin = Identity(name="admin", admin=True)
    for i in range(int(count)):
        row = controller.submit(admin, {"kind": "training", "namespace": namespace, "name": f"job{i}",
                                        "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu}}})
        print(f"submitted {row.id}", flush=True)
    await controller.run(0.3)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
