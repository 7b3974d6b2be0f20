"""The controller and the Kubernetes backend serving in a process of their own, as ``tenancy serve`` runs them.

Unlike ``service_process.py`` (the controller alone), the backend's background work runs
too: the API server probe, start-up checks, node and pod watches. Submits ``jobs`` training
jobs first, then serves until killed. Log lines go to stderr (the fault tests count them);
``GET /health`` on ``port`` answers as the service's own health endpoint does::

    python service_runner.py '{"db": ..., "kubeconfig": ..., "label": [KEY, VALUE], "namespace": NS,
                              "jobs": N, "cpu": "1", "port": PORT, "backend": {trait: value}}'
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from tornado import web

from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.handlers import HealthHandler
from hub_ext.service.store import Store


async def main(cfg: dict) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    key, value = cfg["label"]
    traits = {"node_label_selector": f"{key}={value}", "node_selector": {key: value}, "poll_seconds": 0.3,
              "count_foreign_pods": False, "sync_cluster_limits": False, "quota_tree_object": "",
              **cfg.get("backend", {})}
    backend = KubernetesBackend(kubeconfig=cfg["kubeconfig"], **traits)
    log = logging.getLogger("tenancy")
    backend.log = log
    controller = Controller(store=Store(f"sqlite:///{cfg['db']}"), backend=backend, tree=None, log=log)
    app = web.Application([(r"/health", HealthHandler), (r"/health/(live|ready)", HealthHandler)], controller=controller)
    app.listen(cfg["port"], "127.0.0.1")
    controller.health.starting = True
    await backend.wait_ready()
    await controller.restore()
    controller.health.starting = False
    admin = Identity(name="admin", admin=True)
    for i in range(int(cfg.get("jobs", 0))):
        row = controller.submit(admin, {"kind": "training", "namespace": cfg["namespace"], "name": f"job{i}",
                                        "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cfg["cpu"]}}})
        print(f"submitted {row.id}", flush=True)
    await asyncio.gather(backend.run(), controller.run(0.3))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
