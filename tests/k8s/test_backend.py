"""The Kubernetes backend on a real control plane: the second seed's capacity-scheduling demo.

The engine decides (ElasticQuotaTree of the ACK demo: root 40 CPU, four leaves of
min 10 / max 20); the backend creates a Job per admitted pod (bare Pods in the
second test, the path for servers without Jobs) that kube-scheduler places and
kwok runs, and evicts victims through the Eviction API. The Running pods per
namespace are read from the API server, not from the engine.
"""

from __future__ import annotations

import asyncio
import copy
import uuid

import pytest
import yaml

from kubernetes import client

from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.objects import JOB_NAME_LABEL, MANAGED_BY, MANAGER, WORKLOAD_LABEL
from hub_ext.quota.quantity import parse_resource_list
from hub_ext.quota.tree import parse_tree
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store

from objects import remove, running  # tests/k8s/objects.py
from waiting import until

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
ADMIN = Identity(name="admin", admin=True)


def demo_tree(suffix: str):
    """The ACK demo's ElasticQuotaTree with namespace<i> renamed namespace<i>-<suffix>."""
    doc = yaml.safe_load((REPO / "examples" / "ack-demo.yaml").read_text())
    obj = copy.deepcopy(next(o for o in doc["objects"] if o["kind"] == "ElasticQuotaTree"))

    def rename(node):
        if "namespaces" in node:
            node["namespaces"] = [f"{ns}-{suffix}" for ns in node["namespaces"]]
        for child in node.get("children") or []:
            rename(child)

    rename(obj["spec"]["root"])
    return parse_tree(obj)


def cluster_pods(api, namespace):
    core = client.CoreV1Api(api)
    return core.list_namespaced_pod(namespace, label_selector=f"{MANAGED_BY}={MANAGER}").items


@pytest.fixture
def demo(control_plane, api, seed_classes):
    suffix = uuid.uuid4().hex[:6]
    namespaces = [f"namespace{i}-{suffix}" for i in range(1, 5)]
    for ns in namespaces:
        control_plane.create_namespace(ns)
    node = f"kb-{suffix}"
    label = {"tenancy-test/backend": suffix}
    control_plane.add_node(node, {"cpu": "56", "memory": "256Gi", "nvidia.com/gpu": "8"}, labels=label)
    yield suffix, namespaces, node, label
    remove(api, namespaces, node)


@pytest.mark.asyncio
async def test_ack_demo_on_a_real_cluster(control_plane, api, demo, tmp_path):
    suffix, namespaces, node, label = demo
    evictions_seen = []

    async def main():
        key, value = next(iter(label.items()))
        backend = KubernetesBackend(api_client=api, node_label_selector=f"{key}={value}", node_selector=label,
                                    poll_seconds=0.3)
        # Count the Eviction API calls the backend makes (they still go to the real server).
        original = backend.api.request

        def spy(method, path, **kw):
            if method == "POST" and path.endswith("/eviction"):
                evictions_seen.append(path)
            return original(method, path, **kw)

        backend.api.request = spy
        controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend,
                                tree=demo_tree(suffix))
        assert [n.name for n in backend.nodes()] == [node]

        async def counts():
            out = []
            for ns in namespaces:
                pods = await asyncio.to_thread(cluster_pods, api, ns)
                out.append(pods)
            return out

        async def settle(expected, timeout=40.0):
            """Tick the controller until the cluster shows ``expected`` Running pods per namespace, stably."""
            last = None

            async def shows():
                nonlocal last
                pods = await counts()
                got = [len(running(p)) for p in pods]
                # every pod we created is Running (none Pending in the scheduler, none terminating)
                settled = all(len(running(p)) == len(p) for p in pods)
                last = (got, [[(x.metadata.name, x.status.phase, bool(x.metadata.deletion_timestamp))
                                for x in p] for p in pods])
                return pods if got[:len(expected)] == expected and settled else None

            return await until(shows, f"the cluster to show {expected} Running", timeout, 0.3, show=lambda: last,
                               tick=controller.tick, times=3)

        def engine_running(ns):
            return sum(1 for p in controller.engine.pods.values()
                       if p.namespace == ns and p.phase.value == "Running")

        expected = [[4], [4, 4], [3, 3, 2], [2, 2, 2, 2]]
        rows = []
        for step, ns in enumerate(namespaces):
            rows.append(controller.submit(ADMIN, {"kind": "training", "namespace": ns, "command": ["sleep", "3600"],
                                                  "replicas": 5, "gang": False,  # the seed's Deployment: pods apart
                                                  "resources": {"requests": {"cpu": "5"}}}))
            pods = await settle(expected[step])
            # the engine and the cluster agree: per namespace, who runs and how much CPU it uses
            report = controller.engine.quota.report()
            for i, ns_pods in enumerate(pods[:step + 1]):
                ns_name = namespaces[i]
                assert engine_running(ns_name) == len(running(ns_pods)), ns_name
                leaf = f"root.{'a' if i < 2 else 'b'}.{1 if i % 2 == 0 else 2}"
                cluster_cpu = sum(parse_resource_list(c.resources.requests, "pod")["cpu"]
                                  for p in running(ns_pods) for c in p.spec.containers)
                assert report[leaf]["used"].get("cpu", 0) == cluster_cpu, (leaf, report[leaf], cluster_cpu)
                engine_names = {p.name for p in controller.engine.pods.values()
                                if p.namespace == ns_name and p.phase.value == "Running"}
                # each running engine pod is one Job of ours, with one pod
                assert engine_names == {p.metadata.labels[JOB_NAME_LABEL] for p in running(ns_pods)}

        # evictions went through the Eviction API: 1 (step 3) + 1 + 1 + 1 (step 4) at least
        assert len(evictions_seen) >= 4, evictions_seen
        assert all(p.startswith("/api/v1/namespaces/namespace") for p in evictions_seen)

        # the pods carry what the workload says
        p = running((await counts())[0])[0]
        assert p.spec.priority_class_name == "high-priority-research"
        assert p.spec.priority == 500_000
        assert p.spec.node_name == node  # placed by kube-scheduler, not by us
        assert p.metadata.labels[WORKLOAD_LABEL] == rows[0].id
        assert p.spec.containers[0].command == ["sleep", "3600"]
        assert p.spec.containers[0].image == "python:3.11-slim"

        assert p.metadata.owner_references[0].kind == "Job"
        job = client.BatchV1Api(api).read_namespaced_job(p.metadata.labels[JOB_NAME_LABEL], namespaces[0])
        assert job.spec.backoff_limit == 0 and job.metadata.labels[WORKLOAD_LABEL] == rows[0].id

        # recover: a running pod is "running", a missing one "gone"
        prow = next(r for r in rows[0].pods if r.name == job.metadata.name)
        pod = next(x for x in controller.engine.pods.values() if x.name == job.metadata.name)
        assert await backend.recover(rows[0], prow, pod) == "running"

        # cancelling stops the pods in the cluster
        for row in rows:
            controller.cancel(ADMIN, row)
        await until(lambda: _empty(counts()), "the cancelled workloads' pods to go", 30, 0.3, show=counts)
        assert await backend.recover(rows[0], prow, pod) == "gone"
        for task in list(controller._tasks):
            task.cancel()
        await asyncio.gather(*controller._tasks, return_exceptions=True)

    await main()


class FakeController:
    """Records what the backend reports."""

    def __init__(self):
        self.exited, self.evicted, self.tasks = {}, [], set()

    def pod_exited(self, uid, code, reason=None):
        self.exited[uid] = code

    def eviction_done(self, uid):
        self.evicted.append(uid)

    def _spawn(self, coro):
        self.tasks.add(asyncio.ensure_future(coro))


@pytest.mark.asyncio
async def test_exits_notebook_eviction_delete_fallback_and_recover(control_plane, api, namespace, seed_classes):
    from types import SimpleNamespace as NS

    suffix = uuid.uuid4().hex[:6]
    node = f"kb-{suffix}"
    label = {"tenancy-test/backend": suffix}
    control_plane.add_node(node, {"cpu": "8", "memory": "16Gi"}, labels=label)
    core = client.CoreV1Api(api)

    def row(wid, kind="training"):
        return NS(id=wid, kind=kind, name=f"w-{wid}", namespace=namespace,
                  spec={"kind": kind, "command": ["sleep", "1"], "replicas": 1, "priorityClassName": "low-priority-dev",
                        "resources": {"requests": {"cpu": "1"}, "limits": {}}, "env": {}})

    async def phase(name):
        obj = await asyncio.to_thread(lambda: core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}"))
        return obj.items[0].status.phase if obj.items else None

    async def main():
        # bare pods: the path for servers without batch/v1 Jobs
        backend = KubernetesBackend(api_client=api, node_label_selector=f"tenancy-test/backend={suffix}",
                                    node_selector=label, poll_seconds=0.2, stop_grace_seconds=0, use_jobs=False)
        fake = backend.controller = FakeController()
        nodes = backend.nodes()
        assert [(n.name, n.allocatable["cpu"], n.labels["tenancy-test/backend"]) for n in nodes] == [(node, 8000, suffix)]

        # a pod deleted under us is reported as killed (137)
        r1, p1 = row("a1"), NS(uid=1, name="a1-0")
        t1 = asyncio.ensure_future(backend.start(r1, p1, NS(name="a1-0")))
        await until(lambda: _eq(phase("a1-0"), "Running"), "a1-0 Running")
        assert await backend.recover(r1, NS(name="a1-0"), p1) == "running"
        await asyncio.to_thread(core.delete_namespaced_pod, "a1-0", namespace, grace_period_seconds=0)
        await asyncio.wait_for(t1, 30)
        assert fake.exited[1] == 137
        # one we stop ourselves is not reported (the controller cancelled it)
        r4, p4 = row("a4"), NS(uid=4, name="a4-0")
        t4 = asyncio.ensure_future(backend.start(r4, p4, NS(name="a4-0")))
        await until(lambda: _eq(phase("a4-0"), "Running"), "a4-0 Running")
        await backend.stop(r4, p4, NS(name="a4-0"))
        await asyncio.wait_for(t4, 30)
        assert 4 not in fake.exited

        # the delete fallback where policy/v1 is not served
        r2, p2 = row("a2"), NS(uid=2, name="a2-0")
        t2 = asyncio.ensure_future(backend.start(r2, p2, NS(name="a2-0")))
        await until(lambda: _eq(phase("a2-0"), "Running"), "a2-0 Running")
        backend.evictions.policy_v1 = False
        await backend.evict(r2, p2, NS(name="a2-0"), 0, None)
        assert fake.evicted == [2] and await phase("a2-0") is None
        await asyncio.wait_for(t2, 30)
        backend.evictions.policy_v1 = None

        # a notebook: start/stop are no-ops, eviction deletes the pod labelled for the workload
        nb = row("nb1", "notebook")
        await backend.start(nb, NS(uid=3, name="nb1"), NS(name="nb1"))
        assert not core.list_namespaced_pod(namespace, label_selector=f"{WORKLOAD_LABEL}=nb1").items
        await asyncio.to_thread(core.create_namespaced_pod, namespace, client.V1Pod(
            metadata=client.V1ObjectMeta(name="jupyter-x", labels={WORKLOAD_LABEL: "nb1"}),
            spec=client.V1PodSpec(node_selector=label, containers=[client.V1Container(name="nb", image="x")])))
        await until(lambda: _eq(phase("jupyter-x"), "Running"), "notebook Running")
        assert await backend.recover(nb, NS(name="jupyter-x"), NS(uid=3)) == "running"
        await backend.evict(nb, NS(uid=3, name="nb1"), NS(name="nb1"), 1, None)
        assert fake.evicted == [2, 3] and await phase("jupyter-x") is None
        assert await backend.recover(nb, NS(name="jupyter-x"), NS(uid=3)) == "gone"

        # recover: Succeeded and Failed pods (their status written as a kubelet would)
        for name, status, want in (("done-0", "Succeeded", ("exited", 0)), ("bad-0", "Failed", ("exited", 1))):
            await asyncio.to_thread(core.create_namespaced_pod, namespace, client.V1Pod(
                metadata=client.V1ObjectMeta(name=name, labels={WORKLOAD_LABEL: "r3"}),
                spec=client.V1PodSpec(node_name="no-such-node", containers=[client.V1Container(name="c", image="x")])))
            await asyncio.to_thread(core.patch_namespaced_pod_status, name, namespace, {"status": {"phase": status}})
            assert await backend.recover(row("r3"), NS(name=name), NS(uid=9)) == want
        assert await backend.recover(row("r3"), NS(name="missing-0"), NS(uid=9)) == "gone"

    try:
        await main()
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        core.delete_node(node)


async def _eq(coro, value):
    return (await coro) == value


async def _empty(coro):
    return not any(await coro)
