"""The scheduler service's Kubernetes side on a real control plane.

- killed mid-queue (SIGKILL, a process of its own) and restarted from its database:
  no workload lost, none admitted twice, the queue in its order;
- training pods as batch/v1 Jobs: success and an exit status read from the cluster;
- pods created by other means count as usage; the cluster's ResourceQuota refuses
  before anything is created;
- ``tenancy serve`` picks the backend from configuration and fails in one line
  without credentials.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kubernetes import client
from kubernetes.client.exceptions import ApiException

import controlplane
from hub_ext.backends.kubernetes.objects import JOB_NAME_LABEL, WORKLOAD_LABEL
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store
from hub_ext.tenants import Tenant

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from provision_fixtures import until  # noqa: E402
from service_process import backend_for  # noqa: E402
from waiting import quiet_passes  # noqa: E402

ADMIN = Identity(name="admin", admin=True)
EXIT = controlplane.EXIT_CODE_ANNOTATION


@pytest.fixture
def node(control_plane, api, seed_classes):
    """A fresh 10-CPU kwok node only our backend uses (by label); its pods are cleaned up."""
    suffix = uuid.uuid4().hex[:6]
    name, key = f"svc-{suffix}", "tenancy-test/service"
    control_plane.add_node(name, {"cpu": "10", "memory": "64Gi"}, labels={key: suffix})
    yield name, key, suffix
    try:
        client.CoreV1Api(api).delete_node(name)
    except ApiException:
        pass


def jobs(api, namespace):
    return client.BatchV1Api(api).list_namespaced_job(namespace).items


def running_pods(api, namespace):
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def finish_pod(api, namespace, job_name, code):
    """The training container exits with ``code`` (kwok ends the pod when annotated so)."""
    core = client.CoreV1Api(api)
    pod = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={job_name}").items[0]
    core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"annotations": {EXIT: str(code)}}})


async def stop_tasks(controller):
    for task in list(controller._tasks):
        task.cancel()
    await asyncio.gather(*controller._tasks, return_exceptions=True)


@pytest.mark.asyncio
async def test_killed_mid_queue_and_restarted(control_plane, api, namespace, node, tmp_path):
    """Five 3-CPU jobs on a 10-CPU node: three run, two queue. SIGKILL. While the service is away
    one running job ends, one is killed (its pod deleted), one runs on. Restart: nothing lost,
    nothing created twice, the killed one queued again first (lost, not failed), the queue in order."""
    node_name, key, value = node
    db = tmp_path / "tenancy.sqlite"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "service_process.py"), str(db), str(control_plane.kubeconfig), key, value,
         namespace, "5", "3"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def three_running():
            assert proc.poll() is None, proc.stdout.read()
            return len(running_pods(api, namespace)) >= 3
        await until(three_running, "three of the five jobs running", 40, 0.3)
        await asyncio.sleep(1.0)  # a few more passes in which nothing else may start: a fixed wait on purpose
        assert len(running_pods(api, namespace)) == 3
        assert len(jobs(api, namespace)) == 3
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    before = {j.metadata.name: j.metadata.uid for j in jobs(api, namespace)}
    done, killed, runs_on = sorted(before)
    finish_pod(api, namespace, done, 0)
    finish_pod(api, namespace, killed, 137)  # SIGKILL (a node drained, the machine restarted)
    batch = client.BatchV1Api(api)

    def failed(name):
        return any(c.type == "Failed" and c.status == "True" for c in batch.read_namespaced_job(name, namespace).status.conditions or [])

    async def main():
        controller = Controller(store=Store(f"sqlite:///{db}"), backend=backend_for(str(control_plane.kubeconfig), key, value),
                                tree=None)
        await until(lambda: batch.read_namespaced_job(done, namespace).status.succeeded == 1, f"job {done} to complete")
        await until(lambda: failed(killed), f"job {killed} to fail")
        assert await controller.restore() == 4  # the finished one is done; four are active
        rows = {r.name: r for r in controller.store.workloads(namespaces=[namespace])[0]}
        assert set(rows) == {f"job{i}" for i in range(5)}
        by_pod = {p.name: r.name for r in rows.values() for p in r.pods}
        assert rows[by_pod[done]].state == "Succeeded"
        # the one still running is adopted where it runs; the killed one waits first, then the queue in order
        views = {n: controller.view(r) for n, r in rows.items()}
        assert [n for n, v in views.items() if v["state"] == "Running"] == [by_pod[runs_on]]
        waiting = sorted((v["position"], n) for n, v in views.items() if v["state"] == "Pending")
        assert waiting == [(1, by_pod[killed]), (2, "job3"), (3, "job4")], waiting
        assert any(e["type"] == "requeued" for e in controller.view(rows[by_pod[killed]], events=True)["events"])
        # the next passes start exactly two more (room for three, one still taken): the killed one
        # again (its old Job, failed, is replaced) and job3; more passes start nothing else
        await until(lambda: len(running_pods(api, namespace)) == 3, "three running pods again", tick=controller.tick)
        await quiet_passes(controller.tick, 5)
        now = {j.metadata.name: j.metadata.uid for j in jobs(api, namespace)}
        assert now[done] == before[done] and now[runs_on] == before[runs_on]  # not re-created
        assert now[killed] != before[killed]  # a new Job in its place
        labels = [j.metadata.labels[WORKLOAD_LABEL] for j in jobs(api, namespace)]
        assert len(now) == len(labels) == len(set(labels)) == 4  # one Job per workload: none admitted twice
        assert controller.view(rows["job3"])["state"] == "Running"
        assert controller.view(rows["job4"])["state"] == "Pending"
        await stop_tasks(controller)

    await main()


@pytest.mark.asyncio
async def test_jobs_report_status_from_the_cluster(control_plane, api, namespace, node, tmp_path):
    node_name, key, value = node

    async def main():
        backend = backend_for(str(control_plane.kubeconfig), key, value)
        controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=None)
        ok = controller.submit(ADMIN, {"kind": "training", "namespace": namespace, "name": "ok",
                                       "command": ["python", "train.py"], "priorityClassName": "critical-prod",
                                       "resources": {"requests": {"cpu": "2"}}})
        bad = controller.submit(ADMIN, {"kind": "training", "namespace": namespace, "name": "bad",
                                        "command": ["false"], "resources": {"requests": {"cpu": "2"}}})
        await until(lambda: len(running_pods(api, namespace)) == 2, "two running pods", tick=controller.tick)
        job = client.BatchV1Api(api).read_namespaced_job(ok.pods[0].name, namespace)
        assert job.spec.template.spec.priority_class_name == "critical-prod"
        pods = running_pods(api, namespace)
        assert sorted(p.spec.priority for p in pods) == [500_000, 1_000_000]
        assert {p.spec.node_name for p in pods} == {node_name}  # placed by kube-scheduler
        # The service hears of the pods from its watches, after the test's own read of the cluster.
        await until(lambda: controller.view(ok)["state"] == controller.view(bad)["state"] == "Running",
                    "the service to see both jobs running", tick=controller.tick)
        await asyncio.sleep(2)  # Jobs' pods keep running until they end: 2 s in which nothing may change
        assert controller.view(ok)["state"] == controller.view(bad)["state"] == "Running"
        # what the container prints, read from the cluster (kwok serves it as a kubelet would)
        [ok_pod] = client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=f"{JOB_NAME_LABEL}={ok.pods[0].name}").items
        log = control_plane.set_pod_logs(namespace, ok_pod.metadata.name, tmp_path / "ok.log")
        controlplane.append_log(log, "epoch 1 loss 0.9\nepoch 2 loss 0.4")
        text = await asyncio.to_thread(backend.logs, ok, ok.pods[0])
        assert text == "epoch 1 loss 0.9\nepoch 2 loss 0.4\n", text
        finish_pod(api, namespace, ok.pods[0].name, 0)
        finish_pod(api, namespace, bad.pods[0].name, 3)
        await until(lambda: controller.view(ok)["state"] == "Succeeded" and controller.view(bad)["state"] == "Failed",
                    "the jobs to end", tick=controller.tick)
        events = controller.view(bad, events=True)["events"]
        assert any(e["type"] == "failed" and "exited with status 3" in e["message"] for e in events), events
        await stop_tasks(controller)

    await main()


@pytest.mark.asyncio
async def test_a_submits_reply_never_says_running_before_the_cluster(control_plane, api, namespace, node, tmp_path):
    """Admitted is not Running: the view a submit is answered with (after the pass that admitted it,
    a fresh service's first, whose Job create waits for API discovery) says Pending, its Job being
    created, and no view says Running before the cluster runs the pod."""
    node_name, key, value = node
    core = client.CoreV1Api(api)

    async def main():
        controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"),
                                backend=backend_for(str(control_plane.kubeconfig), key, value), tree=None)
        runner = asyncio.ensure_future(controller.run(0.3))
        await until(lambda: controller.loop.looping, "the scheduling loop to run")
        bodies = [{"kind": "training", "namespace": namespace, "name": f"r{i}", "command": ["sleep", "60"],
                   "resources": {"requests": {"cpu": "1"}}} for i in range(3)]
        rows = await asyncio.gather(*(controller.submit_and_decide(ADMIN, b) for b in bodies))
        replies = [controller.view(r, positions=controller.queue_positions()) for r in rows]  # as the handler answers
        assert [v["state"] for v in replies] == ["Pending"] * 3, replies
        assert all(v["pods"][0]["message"] == "its Job is being created on the cluster" for v in replies), replies
        # a post-submit read (one every pass or so) says Running only of a pod the cluster runs already
        running = set()

        def all_running():
            says = {r.name for r in rows if controller.view(r)["state"] == "Running"}
            runs = {p.metadata.labels[JOB_NAME_LABEL] for p in running_pods(api, namespace)}
            jobs_of = {r.pods[0].name: r.name for r in rows}
            assert says <= {jobs_of[j] for j in runs if j in jobs_of}, (says, runs)
            running.update(says)
            return len(running) == 3

        await until(all_running, "the three jobs to run", interval=0.05)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await stop_tasks(controller)

    await main()


@pytest.mark.asyncio
async def test_foreign_pods_and_cluster_quota(control_plane, api, namespace, node, tmp_path):
    """A pod made with kubectl takes room; the namespace's ResourceQuota refuses before creation."""
    node_name, key, value = node
    core = client.CoreV1Api(api)

    async def main():
        backend = backend_for(str(control_plane.kubeconfig), key, value)
        backend.count_foreign_pods, backend.sync_cluster_limits, backend.resync_seconds = True, True, 0.5
        backend.relist_seconds = 600  # no fresh list during the test: the watch alone must do
        controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=None)
        runner = asyncio.ensure_future(backend.run())
        await asyncio.to_thread(core.create_namespaced_pod, namespace, client.V1Pod(
            metadata=client.V1ObjectMeta(name="by-hand"),
            spec=client.V1PodSpec(node_selector={key: value}, containers=[client.V1Container(
                name="c", image="x", resources=client.V1ResourceRequirements(requests={"cpu": "7"}))])))
        await until(lambda: bool(controller.foreign), "the foreign pod to be counted")
        row = controller.submit(ADMIN, {"kind": "training", "namespace": namespace, "name": "big",
                                        "command": ["sleep", "1"], "resources": {"requests": {"cpu": "4"}}})
        await quiet_passes(controller.tick, 4)
        view = controller.view(row)
        assert view["state"] == "Pending" and view["reason"] == "cluster-capacity", view
        assert not jobs(api, namespace)
        await asyncio.to_thread(core.delete_namespaced_pod, "by-hand", namespace, grace_period_seconds=0)
        await until(lambda: controller.view(row)["state"] == "Running", "the job to start once the room is free",
                    tick=controller.tick)
        assert not controller.foreign

        # the cluster's ResourceQuota, copied in: refused with the API server's words, nothing created
        await asyncio.to_thread(core.create_namespaced_resource_quota, namespace, client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="small"), spec=client.V1ResourceQuotaSpec(hard={"requests.cpu": "5"})))
        await until(lambda: ("ResourceQuota", namespace, "small") in backend.foreign.limits_applied, "the quota to be read")
        over = controller.submit(ADMIN, {"kind": "training", "namespace": namespace, "name": "over",
                                         "command": ["sleep", "1"], "resources": {"requests": {"cpu": "2"}}})
        controller.tick()
        view = controller.view(over)
        assert view["reason"] == "resource-quota" and "exceeded quota: small" in view["message"], view
        assert len(jobs(api, namespace)) == 1

        # a node that joins adds its room
        await asyncio.to_thread(control_plane.add_node, f"{node_name}-2", {"cpu": "6", "memory": "8Gi"},
                                labels={key: value})
        await until(lambda: f"{node_name}-2" in controller.engine.cluster.nodes, "the new node to be counted")
        assert controller.engine.cluster.capacity["cpu"] == 16_000

        # a namespace that becomes a tenant: its pods (on nodes not ours) count from then on
        await asyncio.to_thread(control_plane.create_namespace, other)
        await asyncio.to_thread(core.create_namespaced_pod, other, client.V1Pod(
            metadata=client.V1ObjectMeta(name="theirs"),
            spec=client.V1PodSpec(node_name=elsewhere, containers=[client.V1Container(
                name="c", image="x", resources=client.V1ResourceRequirements(requests={"cpu": "3"}))])))
        await until(lambda: core.read_namespaced_pod("theirs", other).status.phase == "Running", "their pod to run")
        await asyncio.sleep(1)  # a second in which their pod must not be counted (not a tenant yet)
        assert not any(controller.engine.pods[u].namespace == other for u in controller.foreign.values())
        controller.set_tenants([Tenant(group=f"g-{value}", namespace=other)])
        await until(lambda: any(controller.engine.pods[u].namespace == other for u in controller.foreign.values()),
                    "the new tenant's pod to be counted", timeout=10)
        assert controller.engine.quota.leaf_for(other).used["cpu"] == 3000
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await stop_tasks(controller)

    other, elsewhere = f"{namespace}-other", f"{node_name}-elsewhere"
    control_plane.add_node(elsewhere, {"cpu": "4", "memory": "8Gi"}, labels={"tenancy-test/service": "elsewhere"})
    try:
        await main()
    finally:
        for name in (f"{node_name}-2", elsewhere):
            try:
                core.delete_node(name)
            except ApiException:
                pass
        try:
            core.delete_namespace(other)
        except ApiException:
            pass


def test_serve_without_credentials_is_one_line(tmp_path):
    config = tmp_path / "tenancy_config.py"
    config.write_text('c.TenancyService.backend_class = "hub_ext.backends.kubernetes.KubernetesBackend"\n'
                      f'c.KubernetesBackend.kubeconfig = "{tmp_path}/missing.kubeconfig"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    out = subprocess.run([sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(config),
                          "--db", f"sqlite:///{tmp_path}/t.sqlite", "--port", "0"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tenancy serve: error: KubernetesBackend: no cluster credentials"), out.stderr
    assert "missing.kubeconfig" in lines[0]


@pytest.mark.asyncio
async def test_tenants_provisioned_when_groups_change(control_plane, api, node, tmp_path):
    """With ``provision`` on, a new tenant gets its namespace, RBAC, quota and limits; the quota then
    refuses in the scheduler as the API server would."""
    from traitlets.config import Config

    node_name, key, value = node
    namespace = f"svc-{value}"
    core = client.CoreV1Api(api)

    async def main():
        backend = backend_for(str(control_plane.kubeconfig), key, value)
        backend.config = Config({"Provisioner": {"instance": f"svc-{value}", "shared_namespace": ""}})
        backend.provision, backend.resync_seconds, backend.sync_cluster_limits = True, 0.5, True
        controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), backend=backend, tree=None)
        runner = asyncio.ensure_future(backend.run())
        controller.set_tenants([Tenant(group=f"team-{value}", namespace=namespace)])

        def provisioned():
            try:
                rq = core.read_namespaced_resource_quota("dev-quota", namespace)
            except ApiException:
                return False
            binding = client.RbacAuthorizationV1Api(api).read_namespaced_role_binding(f"{namespace}-binding", namespace)
            return rq.spec.hard["requests.cpu"] == "20" and binding.subjects[0].name == f"team-{value}"

        await until(provisioned, "the tenant's namespace, RoleBinding and ResourceQuota")
        assert backend.provisioned.errors == []
        await until(lambda: runner.done() or ("ResourceQuota", namespace, "dev-quota") in backend.foreign.limits_applied,
                    "the quota to be read")
        assert not runner.done(), runner.exception()
        # until the start-up checks ran once nothing is admitted ("service-blocked"), whatever the quota says
        await until(lambda: backend.checked.is_set(), "the start-up checks to run")
        huge = {"cpu": "21", "memory": "1Gi"}
        row = controller.submit(ADMIN, {"kind": "training", "namespace": namespace, "name": "huge", "command": ["x"],
                                        "resources": {"requests": huge, "limits": huge}})
        controller.tick()
        view = controller.view(row)
        assert view["reason"] == "resource-quota" and "dev-quota" in view["message"], view
        controller.set_tenants([Tenant(group=f"team-{value}", namespace=namespace)])  # unchanged: no new pass
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await stop_tasks(controller)
        await backend.provision_now([])  # the tenant is gone: what was made for it goes (not the namespace)

    try:
        await main()
        assert not core.list_namespaced_resource_quota(namespace).items
    finally:
        try:
            core.delete_namespace(namespace)
        except ApiException:
            pass
