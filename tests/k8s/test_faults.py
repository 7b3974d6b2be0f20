"""Faults injected on the real control plane, and the start-up checks that keep the service from admitting
work a cluster would refuse.

Each test puts the cluster in a state the service must notice (a PriorityClass
missing, a node deleted, cordoned or resized, kube-scheduler or the Job controller
stopped, a kubelet gone while a pod terminates, the API server unreachable at start
or for a while) and checks what the service shows and does, through its views, the
cluster and its log. The service runs with the backend's background work (API server
probe, checks, node and pod watches) as ``tenancy serve`` runs it; in-process unless
the test needs a process of its own (its log lines, its exit status, ``/health``).

Every wait polls with a deadline (``until``); every call to the API server from a test
has a request timeout and runs in a thread (``k8s``); the service's tasks are
cancelled and awaited with a deadline when a test ends, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import controlplane
from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.objects import JOB_NAME_LABEL, WORKLOAD_LABEL
from hub_ext.quota.manifests import parse_object
from hub_ext.service.controller import Controller, Identity
from hub_ext.service.store import Store

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from tcp_proxy import TcpProxy  # noqa: E402
from waiting import CALL_TIMEOUT, k8s, quiet_passes, until  # noqa: E402

ADMIN = Identity(name="admin", admin=True)
EXIT = controlplane.EXIT_CODE_ANNOTATION
KEY = "tenancy-test/faults"
#: how long the service's tasks may take to end once cancelled
TEARDOWN_TIMEOUT = 15.0


def job(name: str, cpu: str = "1", **extra) -> dict:
    return {"kind": "training", "name": name, "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu}},
            **extra}


async def cluster_jobs(api, namespace):
    return (await k8s(client.BatchV1Api(api).list_namespaced_job, namespace)).items


async def pods_of(api, namespace):
    return (await k8s(client.CoreV1Api(api).list_namespaced_pod, namespace)).items


async def running(api, namespace):
    """The pods of ``namespace`` the cluster runs (phase Running, not being deleted)."""
    return [p for p in await pods_of(api, namespace)
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


async def count_running(api, namespace) -> int:
    return len(await running(api, namespace))


async def pod_summary(api, namespace):
    return [(p.metadata.name, p.status.phase, p.spec.node_name, bool(p.metadata.deletion_timestamp))
            for p in await pods_of(api, namespace)]


def states(controller, rows) -> dict:
    return {r.name: controller.view(r)["state"] for r in rows}


@pytest.fixture
def label(control_plane, api, seed_classes):
    """A label value only this test's nodes carry; its nodes are deleted afterwards."""
    value = uuid.uuid4().hex[:6]
    yield value
    core = client.CoreV1Api(api)
    for selector in (f"{KEY}={value}", f"{KEY}={value}-x"):
        for node in core.list_node(label_selector=selector, _request_timeout=CALL_TIMEOUT).items:
            with contextlib.suppress(ApiException):
                core.delete_node(node.metadata.name, _request_timeout=CALL_TIMEOUT)


def add_nodes(control_plane, value: str, count: int, cpu: str) -> list[str]:
    names = [f"flt-{value}-{i}" for i in range(count)]
    for name in names:
        control_plane.add_node(name, {"cpu": cpu, "memory": "64Gi"}, labels={KEY: value})
    return names


def _task_stacks(tasks) -> str:
    out = io.StringIO()
    for task in tasks:
        if not task.done():
            task.print_stack(file=out)
    return out.getvalue()


@contextlib.asynccontextmanager
async def serving(api, value: str, tmp_path, *, objects=(), controller_args=None, **traits):
    """The controller and the backend with its background work, in this process, until the block ends;
    then every task is cancelled and must end within ``TEARDOWN_TIMEOUT`` (else the test fails, naming
    the tasks that did not)."""
    options = {"node_label_selector": f"{KEY}={value}", "node_selector": {KEY: value}, "poll_seconds": 0.3,
               "count_foreign_pods": False, "sync_cluster_limits": False, "quota_tree_object": "",
               "health_check_seconds": 1.0, "checks_seconds": 2.0, "relist_seconds": 60.0, **traits}
    backend = KubernetesBackend(api_client=api, **options)
    controller = Controller(store=Store(f"sqlite:///{tmp_path}/{uuid.uuid4().hex[:6]}.sqlite"), backend=backend,
                            tree=None, **(controller_args or {}))
    for obj in objects:
        controller.apply_object(parse_object(obj))
    tasks = [asyncio.ensure_future(backend.run()), asyncio.ensure_future(controller.run(0.3))]
    try:
        yield controller
    finally:
        pending: set = set()
        deadline = asyncio.get_running_loop().time() + TEARDOWN_TIMEOUT
        # Cancelling may start more work (a follower ending, a stop): cancel until nothing is left.
        while True:
            left = {t for t in [*tasks, *controller._tasks] if not t.done()}
            if not left:
                break
            for task in left:
                task.cancel()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                pending = left
                break
            await asyncio.wait(left, timeout=min(remaining, 1.0))
        backend.close()
        watches = backend._watches()
        await asyncio.to_thread(lambda: [w.stop(timeout=5) for w in watches])
        assert not [w.name for w in watches if w.running], "watch threads still running after close()"
        if pending:
            raise AssertionError(f"{len(pending)} task(s) did not end within {TEARDOWN_TIMEOUT:.0f} s of being "
                                 f"cancelled:\n{_task_stacks(pending)}")


@contextlib.contextmanager
def paused(control_plane, component: str):
    """SIGSTOP one component of the control plane for the block (SIGCONT however it ends)."""
    pid = control_plane.pids()[component]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# -- start-up checks ---------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_missing_priority_class_blocks_admission_until_it_exists(control_plane, api, namespace, label,
                                                                        tmp_path):
    """Jobs of a PriorityClass the cluster lacks are not created (they would fail one by one): they wait,
    saying why; once the class exists they run."""
    await asyncio.to_thread(add_nodes, control_plane, label, 1, "8")
    pc = f"fault-{label}"
    sched = client.SchedulingV1Api(api)
    cls = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc}, "value": 400000}
    try:
        async with serving(api, label, tmp_path, objects=[cls], controller_args={"training_priority_class": pc}) as c:
            rows = [c.submit(ADMIN, job(f"j{i}", namespace=namespace)) for i in range(5)]
            await until(lambda: c.backend.checked.is_set(), "the start-up checks to run", show=lambda: c.health.report())
            await quiet_passes(c.tick, 3)  # a few scheduling passes, blocked
            assert not await cluster_jobs(api, namespace), "jobs of a missing PriorityClass were created"
            view = c.view(rows[0])
            assert view["state"] == "Pending" and view["reason"] == "service-blocked", view
            assert f"PriorityClass {pc} is missing on the cluster" in view["message"], view
            assert [p.check for p in c.health.problems.values()] == ["priority-classes"], c.health.report()
            await k8s(sched.create_priority_class, client.V1PriorityClass(metadata=client.V1ObjectMeta(name=pc),
                                                                          value=400000))
            await until(lambda: count_running(api, namespace), "a job to run once the class exists", timeout=30)
            await until(lambda: all(s == "Running" for s in states(c, rows).values()), "the five jobs to run",
                        timeout=30, show=lambda: pod_summary(api, namespace))
            assert await count_running(api, namespace) == 5
            assert not c.health.problems, c.health.report()
    finally:
        with contextlib.suppress(ApiException):
            await k8s(sched.delete_priority_class, pc)


@pytest.mark.asyncio
async def test_missing_permissions_and_nodes_are_each_one_line_and_block(control_plane, api, namespace, label,
                                                                        tmp_path):
    """An identity without the verbs the service uses is told which (SelfSubjectAccessReview); a
    selector no Ready node matches says so. Nothing is admitted meanwhile; both clear by themselves."""
    user = f"nobody-{label}"
    rbac = client.RbacAuthorizationV1Api(api)
    weak = control_plane.api_client(await asyncio.to_thread(control_plane.user_kubeconfig, user))
    try:
        async with serving(weak, label, tmp_path) as c:
            row = c.submit(ADMIN, job("j", namespace=namespace))
            await until(lambda: "rbac" in c.health.problems and "nodes" in c.health.problems, "the checks to fail",
                        show=lambda: c.health.report())
            line = c.health.problems["rbac"].message
            assert "\n" not in line and "may not list nodes (cluster-wide), watch nodes (cluster-wide)" in line, line
            assert "create pods/eviction (cluster-wide)" in line and "create batch/jobs (cluster-wide)" in line, line
            assert c.view(row)["reason"] == "service-blocked"
            # grant what the chart's ClusterRole grants
            role = yaml.safe_load((REPO / "tests" / "k8s" / "fault_role.yaml").read_text())
            role["metadata"]["name"] = f"fault-{label}"
            await k8s(rbac.create_cluster_role, role)
            await k8s(rbac.create_cluster_role_binding, {
                "metadata": {"name": f"fault-{label}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"fault-{label}"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
            await until(lambda: "rbac" not in c.health.problems, "the RBAC check to pass", timeout=20,
                        show=lambda: c.health.report())
            # no node carries the label yet
            await until(lambda: "no Ready, schedulable Node matches" in getattr(c.health.problems.get("nodes"),
                                                                                 "message", ""),
                        "the nodes check to say no node matches", timeout=20, show=lambda: c.health.report())
            assert not await cluster_jobs(api, namespace)
            assert c.view(row)["reason"] == "service-blocked"
            await asyncio.to_thread(add_nodes, control_plane, label, 1, "4")
            await until(lambda: c.view(row)["state"] == "Running", "the job to run once a node matches", timeout=30,
                        show=lambda: (c.view(row), c.health.report()))
            assert await count_running(api, namespace) == 1
            assert not c.health.problems, c.health.report()
    finally:
        weak.close()
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            with contextlib.suppress(ApiException):
                await k8s(delete, f"fault-{label}")


# -- nodes that change -------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_deleted_node_takes_its_capacity_and_its_work_is_queued_again(control_plane, api, namespace, label,
                                                                               tmp_path):
    """Three 2-CPU nodes, eight 1-CPU jobs: six run, two wait. A node is deleted under two of them: the
    service counts 4 CPUs at once, the two are queued again in their place (not Failed), nothing new is
    admitted into the missing room; a new node runs the two lost ones first."""
    names = await asyncio.to_thread(add_nodes, control_plane, label, 3, "2")
    core = client.CoreV1Api(api)
    async with serving(api, label, tmp_path) as c:
        rows = [c.submit(ADMIN, job(f"j{i}", namespace=namespace)) for i in range(8)]
        await until(lambda: sum(s == "Running" for s in states(c, rows).values()) == 6, "six jobs running",
                    show=lambda: pod_summary(api, namespace))
        await until(lambda: _len_is(running(api, namespace), 6), "six pods running",
                    show=lambda: pod_summary(api, namespace))
        on_first = {p.metadata.labels[WORKLOAD_LABEL] for p in await running(api, namespace)
                    if p.spec.node_name == names[0]}
        assert len(on_first) == 2, await pod_summary(api, namespace)
        lost = [r for r in rows if r.id in on_first]
        waiting = [r for r in rows if c.view(r)["state"] == "Pending"]
        assert len(waiting) == 2
        await k8s(core.delete_node, names[0])
        await until(lambda: c.engine.cluster.capacity.get("cpu") == 4000, "the service to count 4 CPUs", timeout=10,
                    show=lambda: c.engine.cluster.capacity)
        await until(lambda: all(c.view(r)["state"] == "Pending" for r in lost), "the lost jobs to wait again",
                    timeout=10, show=lambda: [c.view(r) for r in lost])
        for r in lost:
            view = c.view(r, events=True)
            assert any(e["type"] == "requeued" and names[0] in e["message"] for e in view["events"]), view
        # their objects go (never adopted), and nothing new is admitted into the missing room
        async def jobs_and_states():
            return await _job_names(api, namespace), states(c, rows)
        await until(lambda: _len_is(cluster_jobs(api, namespace), 4), "the lost jobs' objects to go", timeout=30,
                    show=jobs_and_states)
        await quiet_passes(c.tick, 3)
        assert sum(1 for s in states(c, rows).values() if s == "Running") == 4, states(c, rows)
        assert await count_running(api, namespace) == 4, await pod_summary(api, namespace)
        positions = sorted((c.view(r)["position"], r.name) for r in lost + waiting)
        assert [n for _, n in positions[:2]] == sorted(r.name for r in lost), positions  # their place kept
        await asyncio.to_thread(add_nodes, control_plane, f"{label}-x", 1, "2")  # not ours: another label
        await asyncio.to_thread(control_plane.add_node, f"flt-{label}-new", {"cpu": "2", "memory": "8Gi"},
                                labels={KEY: label})
        await until(lambda: all(c.view(r)["state"] == "Running" for r in lost), "the lost jobs to run again",
                    show=lambda: pod_summary(api, namespace))
        assert all(c.view(r)["state"] == "Pending" for r in waiting)
        labels = [j.metadata.labels[WORKLOAD_LABEL] for j in await cluster_jobs(api, namespace)]
        assert len(labels) == len(set(labels)) == 6  # nothing created twice


@pytest.mark.asyncio
async def test_a_pod_disrupted_under_us_is_queued_again_and_its_job_goes(control_plane, api, namespace, label,
                                                                         tmp_path):
    """A running job's pod ends by a disruption (pod garbage collection's DisruptionTarget, as for a
    node that went): its work waits again, not Failed, and its old Job is deleted at once, not left on
    the cluster until the work can start again (the node is cordoned: it cannot)."""
    [node] = await asyncio.to_thread(add_nodes, control_plane, label, 1, "1")
    core = client.CoreV1Api(api)
    async with serving(api, label, tmp_path) as c:
        row = c.submit(ADMIN, job("hit", namespace=namespace))
        await until(lambda: c.view(row)["state"] == "Running", "the job to run", show=lambda: c.view(row))
        [pod] = await running(api, namespace)
        [old] = await cluster_jobs(api, namespace)
        await k8s(core.patch_node, node, {"spec": {"unschedulable": True}})
        await until(lambda: c.engine.cluster.capacity.get("cpu") == 0, "the cordoned node's room to leave",
                    timeout=10, show=lambda: c.engine.cluster.capacity)
        await k8s(core.patch_namespaced_pod_status, pod.metadata.name, namespace, {"status": {
            "phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True",
                                               "reason": "DeletionByPodGC", "message": "node is gone"}]}})
        await until(lambda: c.view(row)["state"] == "Pending", "the job to wait again", timeout=10,
                    show=lambda: c.view(row))
        view = c.view(row, events=True)
        assert any(e["type"] == "requeued" and "DeletionByPodGC" in e["message"] for e in view["events"]), view
        await until(lambda: _len_is(cluster_jobs(api, namespace), 0), "the old Job to be deleted", timeout=10,
                    show=lambda: _job_names(api, namespace))
        await k8s(core.patch_node, node, {"spec": {"unschedulable": False}})
        await until(lambda: c.view(row)["state"] == "Running", "the job to run again", show=lambda: c.view(row))
        [new] = await cluster_jobs(api, namespace)
        assert new.metadata.uid != old.metadata.uid  # made again, the old one never adopted


async def _len_is(awaitable, n: int) -> bool:
    return len(await awaitable) == n


async def _job_names(api, namespace):
    return sorted((j.metadata.name, bool(j.metadata.deletion_timestamp)) for j in await cluster_jobs(api, namespace))


@pytest.mark.asyncio
async def test_cordoned_not_ready_and_resized_nodes_change_capacity_at_once(control_plane, api, namespace, label,
                                                                           tmp_path):
    """Two 4-CPU nodes. Cordoned: its pod stays, its room leaves the service's capacity, nothing new goes
    there. Resized: the capacity follows. Not Ready: as cordoned."""
    names = await asyncio.to_thread(add_nodes, control_plane, label, 2, "4")
    core = client.CoreV1Api(api)

    def capacity(c):
        return c.engine.cluster.capacity.get("cpu", 0) // 1000

    async with serving(api, label, tmp_path) as c:
        first = c.submit(ADMIN, job("first", cpu="3", namespace=namespace))
        await until(lambda: c.view(first)["state"] == "Running", "the first job running",
                    show=lambda: pod_summary(api, namespace))
        # the service may say Running before the pod's phase reads so on the API server (kwok sets it)
        await until(lambda: count_running(api, namespace), "the first job's pod running on the cluster",
                    show=lambda: pod_summary(api, namespace))
        [pod] = await running(api, namespace)
        node = pod.spec.node_name
        other = next(n for n in names if n != node)
        # cordoned: its pod stays, no new one goes there
        await k8s(core.patch_node, node, {"spec": {"unschedulable": True}})
        await until(lambda: capacity(c) == 4, "capacity without the cordoned node", timeout=30,
                    show=lambda: capacity(c))
        second = c.submit(ADMIN, job("second", cpu="3", namespace=namespace))
        third = c.submit(ADMIN, job("third", cpu="3", namespace=namespace))
        await until(lambda: c.view(second)["state"] == "Running", "the second job on the other node",
                    show=lambda: pod_summary(api, namespace))
        await quiet_passes(c.tick, 3)
        assert c.view(first)["state"] == "Running" and c.view(third)["state"] == "Pending"
        assert c.view(third)["reason"] == "cluster-capacity", c.view(third)
        assert len(await cluster_jobs(api, namespace)) == 2  # not created to wait on the cluster
        placed = {p.metadata.name.rsplit("-", 1)[0]: p.spec.node_name for p in await running(api, namespace)}
        assert sorted(placed.values()) == sorted([node, other]), placed
        # resized: the other node shrinks under its pod (3 of 3 CPUs used); uncordoned: 1 CPU free on the first
        await k8s(core.patch_node_status, other, {"status": {"allocatable": {"cpu": "3"}, "capacity": {"cpu": "3"}}})
        await until(lambda: capacity(c) == 3, "capacity of the resized node", timeout=10, show=lambda: capacity(c))
        await k8s(core.patch_node, node, {"spec": {"unschedulable": False}})
        await until(lambda: capacity(c) == 7, "capacity once uncordoned", timeout=10, show=lambda: capacity(c))
        await quiet_passes(c.tick, 3)
        assert c.view(third)["state"] == "Pending" and await count_running(api, namespace) == 2
        # not Ready (its kubelet gone, as the node controller reports it): no new pods there. kwok, the
        # kubelet of every node, is stopped meanwhile: its heartbeat would make the node Ready again.
        with paused(control_plane, "kwok"):
            async def not_ready():
                # a heartbeat kwok sent just before it stopped can land after the patch and make the node Ready
                # again (seen in CI): the patch is made again while the API server says otherwise
                if capacity(c) == 3:
                    return True
                status = (await k8s(core.read_node_status, node)).status
                if next((x.status for x in status.conditions or [] if x.type == "Ready"), None) != "False":
                    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    await k8s(core.patch_node_status, node, {"status": {"conditions": [
                        {"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "test",
                         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}})
                return False

            await until(not_ready, "capacity without the node that is not Ready", timeout=10,
                        show=lambda: capacity(c))
            await quiet_passes(c.tick, 3)
            assert c.view(first)["state"] == "Running"  # its pod is not lost for that
            assert c.view(third)["state"] == "Pending"


# -- the cluster's word ----------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_running_means_what_the_cluster_says(control_plane, api, namespace, label, tmp_path):
    """kube-scheduler stopped: admitted jobs wait on the cluster, and the service says so with the
    scheduler's words; the Job controller stopped: a pod that ended counts as ended at once."""
    await asyncio.to_thread(add_nodes, control_plane, label, 1, "8")
    async with serving(api, label, tmp_path) as c:
        with paused(control_plane, "kube-scheduler"):
            row = c.submit(ADMIN, job("unplaced", namespace=namespace))
            await until(lambda: pods_of(api, namespace), "the job's pod to exist")
            # the pod exists on the API server; the service says so once its watch delivers it (until then
            # it says the Job controller has not made the pod yet, with the same reason code)
            view = await until(lambda: (v := c.view(row))["reason"] == "waiting-for-kube-scheduler"
                               and v["message"].startswith("waiting for kube-scheduler") and v,
                               "the service to say the pod waits for kube-scheduler", timeout=10,
                               show=lambda: c.view(row))
            assert view["state"] == "Pending", view  # not "Running on a node"
            assert view["message"].startswith("waiting for kube-scheduler"), view
            assert not view["pods"][0]["node"], view
        await until(lambda: c.view(row)["state"] == "Running", "Running once kube-scheduler placed it",
                    show=lambda: c.view(row))
        [pod] = await running(api, namespace)
        assert c.view(row)["pods"][0]["node"] == pod.spec.node_name

        with paused(control_plane, "kube-controller-manager"):
            await k8s(client.CoreV1Api(api).patch_namespaced_pod, pod.metadata.name, namespace,
                      {"metadata": {"annotations": {EXIT: "0"}}})
            await until(lambda: c.view(row)["state"] == "Succeeded",
                        "the job to end with its pod, the Job controller stopped", timeout=10,
                        show=lambda: c.view(row))
            job_obj = await k8s(client.BatchV1Api(api).read_namespaced_job, pod.metadata.labels[JOB_NAME_LABEL],
                                namespace)
            assert not job_obj.status.conditions  # the Job controller had not said a word


@pytest.mark.asyncio
async def test_a_pod_stuck_terminating_is_reported_and_its_work_queued_again(control_plane, api, namespace, label,
                                                                            tmp_path):
    """The kubelet is gone (kwok stopped) when a job's pod is deleted: it stays Terminating. The service
    says so, and after the timeout deletes it for good and queues the job again; its new pod waits for
    a kubelet, and says so, until one runs it."""
    await asyncio.to_thread(add_nodes, control_plane, label, 1, "8")
    core = client.CoreV1Api(api)
    async with serving(api, label, tmp_path, terminating_timeout_seconds=3.0) as c:
        row = c.submit(ADMIN, job("stuck", namespace=namespace))
        await until(lambda: c.view(row)["state"] == "Running", "the job running", show=lambda: c.view(row))
        # the service's watch and this list are two readers of the API server: wait for the list to agree
        await until(lambda: count_running(api, namespace), "the job's pod listed Running",
                    show=lambda: pod_summary(api, namespace))
        [pod] = await running(api, namespace)
        [first_job] = [j.metadata.uid for j in await cluster_jobs(api, namespace)]
        with paused(control_plane, "kwok"):
            await k8s(core.delete_namespaced_pod, pod.metadata.name, namespace, grace_period_seconds=1)
            await until(lambda: c.view(row)["pods"][-1]["phase"] == "Terminating", "the pod shown terminating",
                        timeout=10, show=lambda: c.view(row))
            view = c.view(row)
            assert view["state"] == "Pending", view  # not Running: its pod is going
            assert view["reason"] == "terminating", view
            await until(lambda: any(e["type"] == "requeued" and "stuck terminating" in e["message"]
                                    for e in c.view(row, events=True)["events"]),
                        "the stuck pod deleted and the job queued again", timeout=20,
                        show=lambda: c.view(row, events=True))

            async def new_job():
                return [j.metadata.uid for j in await cluster_jobs(api, namespace)] not in ([], [first_job])

            await until(new_job, "a new Job for it", show=lambda: _job_names(api, namespace))
            await until(lambda: c.view(row)["reason"] == "waiting-for-node", "its new pod waiting for a kubelet",
                        timeout=20, show=lambda: c.view(row))
        await until(lambda: c.view(row)["state"] == "Running", "Running once the kubelet is back",
                    show=lambda: c.view(row))


# -- the API server away ------------------------------------------------------------------------------
def proxied_kubeconfig(control_plane, port: int, path: Path) -> Path:
    cfg = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    for cluster in cfg["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(cfg))
    return path


def api_port(control_plane) -> int:
    return int(str(control_plane.server).rsplit(":", 1)[1])


def _health(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
    except OSError:
        return 0, {}


async def health(port: int, path: str = "/services/tenancy/api/v1/health") -> tuple[int, dict]:
    """(status, report) of a service's health endpoint; (0, {}) while it does not answer."""
    return await asyncio.to_thread(_health, port, path)


def _alive(proc, err_path: Path):
    """A check that fails the wait at once when the process has exited."""
    def check(result):
        assert proc.poll() is None, f"the service exited ({proc.returncode}):\n{err_path.read_text()[-3000:]}"
        return result
    return check


@contextlib.contextmanager
def process(argv, err_path: Path, **kwargs):
    """A process whose stderr goes to ``err_path``, killed (and reaped) when the block ends."""
    with open(err_path, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, **kwargs)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.asyncio
async def test_serve_waits_for_the_api_server_and_health_tells_a_stalled_etcd(control_plane, api, label, tmp_path):
    """``tenancy serve`` started while the API server cannot be reached waits (no exit), saying so on
    /health in one line; once it answers, a missing PriorityClass is the one line until it exists; an
    etcd stall later shows on /health too, and goes."""
    await asyncio.to_thread(add_nodes, control_plane, label, 1, "4")
    proxy = TcpProxy(api_port(control_plane))
    kubeconfig = proxied_kubeconfig(control_plane, proxy.port, tmp_path / "proxied.kubeconfig")
    pc, port = f"fault-{label}", TcpProxy(0).port
    (tmp_path / "tenancy_config.py").write_text("\n".join([
        'c.TenancyService.backend_class = "hub_ext.backends.kubernetes.KubernetesBackend"',
        f"c.TenancyService.training_priority_class = {pc!r}",
        f"c.TenancyService.objects = [{{'apiVersion': 'scheduling.k8s.io/v1', 'kind': 'PriorityClass', "
        f"'metadata': {{'name': {pc!r}}}, 'value': 400000}}]",
        f"c.KubernetesBackend.kubeconfig = {str(kubeconfig)!r}",
        f"c.KubernetesBackend.node_label_selector = '{KEY}={label}'",
        "c.KubernetesBackend.quota_tree_object = ''",
        "c.KubernetesBackend.checks_seconds = 2.0",
        "c.KubernetesBackend.health_check_seconds = 1.0",
        "c.KubernetesBackend.health_timeout_seconds = 2.0",
    ]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    err_path = tmp_path / "serve.err"
    sched = client.SchedulingV1Api(api)
    argv = [sys.executable, "-m", "hub_ext.cli", "serve", "--config", str(tmp_path / "tenancy_config.py"),
            "--db", f"sqlite:///{tmp_path}/t.sqlite", "--port", str(port)]
    try:
        with process(argv, err_path, cwd=tmp_path, env=env) as proc:
            alive = _alive(proc, err_path)

            async def report_while_down():
                status, report = alive(await health(port))
                problems = report.get("problems") or []
                return status == 503 and report.get("status") == "starting" and problems and report
            report = await until(report_while_down, "/health to say the API server does not answer", timeout=30,
                                 show=lambda: health(port))
            [problem] = report["problems"]
            assert problem["check"] == "kubernetes-api" and "does not answer" in problem["message"], report
            await asyncio.sleep(3)  # several probes fail meanwhile; no more lines may come: fixed on purpose
            alive(None)
            down_lines = [line for line in err_path.read_text().splitlines() if "does not answer" in line]
            assert len(down_lines) == 1, err_path.read_text()

            proxy.start()  # the API server answers now

            async def only_priority_classes():
                status, report = alive(await health(port))
                checks = [p["check"] for p in report.get("problems", [])]
                return checks == ["priority-classes"] and (status, report)
            status, report = await until(only_priority_classes, "the missing PriorityClass to be the one problem",
                                         timeout=30, show=lambda: health(port))
            assert status == 503 and report["status"] == "blocked", report
            assert f"PriorityClass {pc} is missing on the cluster" in report["problems"][0]["message"]
            await k8s(sched.create_priority_class, client.V1PriorityClass(metadata=client.V1ObjectMeta(name=pc),
                                                                          value=400000))

            async def ok():
                return alive(await health(port))[0] == 200
            await until(ok, "/health to be 200 once the class exists", timeout=20, show=lambda: health(port))
            assert await health(port) == (200, {"status": "ok", "problems": []})

            with paused(control_plane, "etcd"):
                async def stalled():
                    status, report = alive(await health(port))
                    return status == 503 and report
                report = await until(stalled, "/health to tell the stalled etcd", timeout=15,
                                     show=lambda: health(port))
                assert report["problems"][0]["check"] == "kubernetes-api", report
                assert (await health(port, "/services/tenancy/api/v1/health/live"))[0] == 200
            await until(ok, "/health to be 200 once etcd is back", timeout=30, show=lambda: health(port))
    finally:
        proxy.cut()
        with contextlib.suppress(ApiException):
            await k8s(sched.delete_priority_class, pc)


@pytest.mark.asyncio
async def test_an_api_server_outage_is_one_line_and_loses_nothing(control_plane, api, namespace, label, tmp_path):
    """Ten jobs run; the API server is unreachable for 8 s: the service logs one line when it goes and
    one when it is back (not a line per job per second), and afterwards nothing is lost or doubled."""
    await asyncio.to_thread(add_nodes, control_plane, label, 1, "10")
    proxy = TcpProxy(api_port(control_plane)).start()
    kubeconfig = proxied_kubeconfig(control_plane, proxy.port, tmp_path / "proxied.kubeconfig")
    port = TcpProxy(0).port
    cfg = {"db": str(tmp_path / "t.sqlite"), "kubeconfig": str(kubeconfig), "label": [KEY, label],
           "namespace": namespace, "jobs": 10, "cpu": "1", "port": port,
           "backend": {"health_check_seconds": 1.0, "health_timeout_seconds": 2.0}}
    err_path = tmp_path / "runner.err"
    try:
        with process([sys.executable, str(HERE / "service_runner.py"), json.dumps(cfg)], err_path, cwd=REPO) as proc:
            alive = _alive(proc, err_path)

            async def ten_running():
                return alive(await count_running(api, namespace)) == 10
            await until(ten_running, "ten jobs running", timeout=60, show=lambda: pod_summary(api, namespace))
            await until(lambda: _status_is(health(port, "/health"), 200), "/health 200", timeout=20,
                        show=lambda: health(port, "/health"))
            before = {j.metadata.name: j.metadata.uid for j in await cluster_jobs(api, namespace)}
            mark = len(err_path.read_text().splitlines())
            proxy.cut()
            await until(lambda: _status_is(health(port, "/health"), 503), "/health to say the API server is away",
                        timeout=15, show=lambda: health(port, "/health"))
            assert (await health(port, "/health"))[1]["problems"][0]["check"] == "kubernetes-api"
            await asyncio.sleep(8)  # the outage (its length): each job's follower, the watches and the probe fail
            alive(None)
            proxy.start()
            await until(lambda: _status_is(health(port, "/health"), 200), "/health 200 once the API server answers",
                        timeout=30, show=lambda: health(port, "/health"))
            await until(lambda: "answers again" in "".join(err_path.read_text().splitlines()[mark:]),
                        "the service to log that the API server answers again", timeout=30)
            await asyncio.sleep(2)  # then 2 s in which what was retried may log or create nothing more: on purpose
            alive(None)
            during = [line for line in err_path.read_text().splitlines()[mark:]
                      if line.startswith(("WARNING", "ERROR", "CRITICAL")) and "tornado.access" not in line]
            assert len(during) == 2, "\n".join(during)
            assert "does not answer" in during[0] and "answers again" in during[1], during
            after = {j.metadata.name: j.metadata.uid for j in await cluster_jobs(api, namespace)}
            assert after == before  # nothing lost, nothing created twice
            assert await count_running(api, namespace) == 10
    finally:
        proxy.cut()


async def _status_is(awaitable, status: int) -> bool:
    return (await awaitable)[0] == status
