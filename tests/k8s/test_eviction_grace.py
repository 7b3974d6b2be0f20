"""A borrower's own grace period does not hold another team's reclaim: on a real control plane, a
job asking for an hour's grace (``gracePeriodSeconds: 3600``) that borrows above its team's
guarantee is evicted with ``TenancyService.max_reclaim_grace_seconds`` when the lender takes
its guarantee back, as the API server records it on the pod (``deletionGracePeriodSeconds``:
the kubelet kills the container once it has passed)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kubernetes import client, watch
from urllib3.exceptions import ProtocolError

from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.objects import MANAGED_BY, MANAGER
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store

from objects import running, two_team_cluster, two_teams  # tests/k8s/objects.py
from waiting import until

ADMIN = Identity(name="admin", admin=True)
CAP = 7


@pytest.fixture
def cluster(control_plane, api, seed_classes):
    yield from two_team_cluster(control_plane, api, "grace", "tenancy-test/grace")


class DeletionGraces:
    """The ``deletionGracePeriodSeconds`` the API server gave each of our pods in ``namespace``
    when it was deleted, read from a watch (kwok, the fake kubelet, then removes the pod at once)."""

    def __init__(self, api, namespace: str):
        self.seen: dict[str, int] = {}
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(api, namespace), daemon=True)
        self._thread.start()

    def _run(self, api, namespace):
        core = client.CoreV1Api(api)
        try:
            for event in self._watch.stream(core.list_namespaced_pod, namespace,
                                            label_selector=f"{MANAGED_BY}={MANAGER}", timeout_seconds=120):
                meta = event["object"].metadata
                if meta.deletion_timestamp is not None and meta.name not in self.seen:
                    self.seen[meta.name] = meta.deletion_grace_period_seconds
        except ProtocolError:  # the control plane stopped under a watch left after its test: nothing to see
            pass

    def stop(self):
        self._watch.stop()


def job(ns, cpu, **extra):
    return {"kind": "training", "namespace": ns, "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}, **extra}


def pods_of(api, ns):
    return client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{MANAGED_BY}={MANAGER}").items


@pytest.mark.asyncio
async def test_a_reclaimed_borrower_is_evicted_with_the_capped_grace(api, cluster, tmp_path):
    a, b, _, label = cluster
    key, value = next(iter(label.items()))
    backend = KubernetesBackend(api_client=api, node_label_selector=f"{key}={value}", node_selector=label,
                                poll_seconds=0.3)
    controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=two_teams(a, b))
    controller.engine.max_reclaim_grace = CAP  # as TenancyService.max_reclaim_grace_seconds sets it
    graces = DeletionGraces(api, b)
    try:
        borrower = controller.submit(ADMIN, job(b, 15, gracePeriodSeconds=3600))  # 5 above b's guarantee

        async def runs(ns, n):
            pods = await asyncio.to_thread(pods_of, api, ns)
            return len(running(pods)) == n == len(pods)

        await until(lambda: runs(b, 1), "the borrower to run", tick=controller.tick)
        [pod] = await asyncio.to_thread(pods_of, api, b)
        assert pod.spec.termination_grace_period_seconds == 3600  # what it asked for
        controller.submit(ADMIN, job(a, 10))  # a takes its guarantee back: only 5 are free
        await until(lambda: runs(a, 1), "the lender's job to run", tick=controller.tick)
        await until(lambda: graces.seen, "the borrower's pod to be deleted")
        assert graces.seen == {pod.metadata.name: CAP}
        view = controller.view(borrower, events=True)
        reclaimed = [e for e in view["events"] if e["type"] == "reclaimed"]
        assert reclaimed and reclaimed[-1]["details"]["gracePeriodSeconds"] == CAP, view["events"]
    finally:
        graces.stop()
        for task in list(controller._tasks):
            task.cancel()
        await asyncio.gather(*controller._tasks, return_exceptions=True)
