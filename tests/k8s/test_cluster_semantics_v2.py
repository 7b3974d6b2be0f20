"""Scheduling semantics v2 on a real control plane: a large borrower is reclaimed through the
Eviction API and the lender's pod is placed by kube-scheduler; a 4-replica gang waits whole
(nothing of it on the cluster) and then starts whole. The engine decides; what runs is
read from the API server."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client

from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.objects import JOB_NAME_LABEL, MANAGED_BY, MANAGER
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store

from objects import running, two_team_cluster, two_teams  # tests/k8s/objects.py
from waiting import quiet_passes, until

ADMIN = Identity(name="admin", admin=True)


@pytest.fixture
def cluster(control_plane, api, seed_classes):
    yield from two_team_cluster(control_plane, api, "team", "tenancy-test/v2")


def pods_of(api, ns):
    return client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{MANAGED_BY}={MANAGER}").items


def job(ns, cpu, replicas=1, **extra):
    return {"kind": "training", "namespace": ns, "command": ["sleep", "3600"], "replicas": replicas,
            "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}, **extra}


async def settle(controller, api, want: dict, timeout: float = 40.0):
    """Tick until the cluster shows ``want`` (namespace -> Running count) with nothing else of ours, stably."""
    last = None

    async def shows():
        nonlocal last
        pods = {ns: await asyncio.to_thread(pods_of, api, ns) for ns in want}
        last = {ns: [(p.metadata.name, p.status.phase, bool(p.metadata.deletion_timestamp)) for p in ps]
                for ns, ps in pods.items()}
        return pods if all(len(running(ps)) == want[ns] == len(ps) for ns, ps in pods.items()) else None

    return await until(shows, f"the cluster to show {want}", timeout, 0.3, show=lambda: last, tick=controller.tick,
                       times=3)


async def stop(controller):
    for task in list(controller._tasks):
        task.cancel()
    await asyncio.gather(*controller._tasks, return_exceptions=True)


def backend_for(api, label):
    key, value = next(iter(label.items()))
    backend = KubernetesBackend(api_client=api, node_label_selector=f"{key}={value}", node_selector=label,
                                poll_seconds=0.3)
    evictions = []
    original = backend.api.request

    def spy(method, path, **kw):
        if method == "POST" and path.endswith("/eviction"):
            evictions.append(path)
        return original(method, path, **kw)

    backend.api.request = spy
    return backend, evictions


@pytest.mark.asyncio
async def test_a_large_borrower_is_reclaimed_through_the_eviction_api(api, cluster, tmp_path):
    a, b, node, label = cluster
    backend, evictions = backend_for(api, label)
    controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=two_teams(a, b))
    big = controller.submit(ADMIN, job(b, 15))  # b borrows 5 above its 10
    controller.submit(ADMIN, job(a, 5))
    await settle(controller, api, {a: 1, b: 1})
    controller.submit(ADMIN, job(a, 5))  # a would be at 10: within its guarantee, the root is full
    pods = await settle(controller, api, {a: 2, b: 0})
    assert len(evictions) == 1 and evictions[0].startswith(f"/api/v1/namespaces/{b}/pods/")
    assert all(p.spec.node_name == node for p in running(pods[a]))  # placed by kube-scheduler
    # b's pod waits, and cannot take the room back (15 > its min): no ping-pong
    await quiet_passes(controller.tick, 5, 0.2)
    assert not await asyncio.to_thread(pods_of, api, b)
    assert controller.view(big)["state"] == "Pending"
    await stop(controller)



@pytest.mark.asyncio
async def test_a_gang_waits_whole_then_starts_whole(api, cluster, tmp_path):
    a, b, node, label = cluster
    backend, _ = backend_for(api, label)
    controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend,
                            tree=two_teams(a, b, leaf_max="16"))
    blocker = controller.submit(ADMIN, job(a, 8))
    await settle(controller, api, {a: 1})
    gang = controller.submit(ADMIN, job(a, 4, replicas=4))  # 16 CPUs: 2 pods would fit, so none starts
    assert gang.spec["gang"] is True
    await quiet_passes(controller.tick, 8, 0.25)
    pods = await asyncio.to_thread(pods_of, api, a)
    assert len(pods) == 1  # only the blocker: nothing of the gang was created on the cluster
    view = controller.view(gang)
    assert view["state"] == "Pending" and "4 pods" in view["message"], view["message"]
    assert all(p["phase"] == "Pending" for p in view["pods"]) and len(view["pods"]) == 4
    controller.cancel(ADMIN, blocker)
    pods = await settle(controller, api, {a: 4})
    assert {p.metadata.labels[JOB_NAME_LABEL] for p in running(pods[a])} == \
        {p["name"] for p in controller.view(gang)["pods"]}
    await stop(controller)

