"""The local control plane behaves like a real cluster for what the tenancy extension
relies on: version discovery, priority preemption by kube-scheduler, ResourceQuota
admission and RBAC for group-mapped users."""

from __future__ import annotations

import time
import uuid


import pytest

from kubernetes import client
from kubernetes.client.exceptions import ApiException

import controlplane
from waiting import wait_for


def pod(name, *, cpu=None, priority_class=None, node_selector=None, tolerations=None):
    resources = None
    if cpu is not None:
        resources = client.V1ResourceRequirements(requests={"cpu": cpu}, limits={"cpu": cpu})
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "tenancy-test"}),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="registry.invalid/notebook:1", resources=resources)],
            priority_class_name=priority_class,
            node_selector=node_selector,
            tolerations=tolerations,
            termination_grace_period_seconds=30,
        ),
    )


def test_api_server_answers_with_its_version(control_plane, api):
    info = client.VersionApi(api).get_code()
    expected = controlplane.kubernetes_version()
    assert info.git_version == expected
    assert info.major == "1" and info.minor == expected.split(".")[1]
    # authorization is Node,RBAC: the bootstrap cluster roles exist
    roles = client.RbacAuthorizationV1Api(api).read_cluster_role("cluster-admin")
    assert roles.metadata.name == "cluster-admin"


def test_kwok_runs_bound_pods_and_removes_deleted_ones(control_plane, api, namespace):
    core = client.CoreV1Api(api)
    node = f"n-{uuid.uuid4().hex[:6]}"
    taint = client.V1Taint(key="tenancy-test/node", value=node, effect="NoSchedule")
    control_plane.add_node(node, {"cpu": "2", "memory": "4Gi"}, taints=[taint])
    tol = [client.V1Toleration(key="tenancy-test/node", operator="Equal", value=node, effect="NoSchedule")]
    core.create_namespaced_pod(namespace, pod("p", cpu="500m", node_selector={"kubernetes.io/hostname": node},
                                              tolerations=tol))
    p = wait_for(lambda: (lambda x: x if x.status.phase == "Running" else None)(
        core.read_namespaced_pod("p", namespace)), what="pod Running")
    assert p.spec.node_name == node
    assert p.status.pod_ip.startswith("127.20.") and p.status.pod_ip != "127.20.0.0"
    core.delete_namespaced_pod("p", namespace)  # default grace period: kwok finalizes it
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, what="pod gone")
    core.delete_node(node)


def test_scheduler_preempts_low_priority_pod(control_plane, api, namespace):
    core = client.CoreV1Api(api)
    sched = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    high, low = f"high-{suffix}", f"low-{suffix}"
    sched.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=high), value=1000))
    sched.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=low), value=10))
    node = f"n-{suffix}"
    taint = client.V1Taint(key="tenancy-test/node", value=node, effect="NoSchedule")
    control_plane.add_node(node, {"cpu": "4", "memory": "16Gi"}, taints=[taint])
    placement = dict(
        node_selector={"kubernetes.io/hostname": node},
        tolerations=[client.V1Toleration(key="tenancy-test/node", operator="Equal", value=node,
                                         effect="NoSchedule")],
    )
    try:
        for i in range(4):
            core.create_namespaced_pod(namespace, pod(f"low-{i}", cpu="1", priority_class=low, **placement))

        def running(prefix):
            return [p for p in core.list_namespaced_pod(namespace).items
                    if p.metadata.name.startswith(prefix) and p.status.phase == "Running"
                    and p.metadata.deletion_timestamp is None]

        wait_for(lambda: len(running("low-")) == 4, what="4 low-priority pods Running")

        core.create_namespaced_pod(namespace, pod("high-0", cpu="1", priority_class=high, **placement))
        hp = wait_for(lambda: (lambda x: x if x.status.phase == "Running" else None)(
            core.read_namespaced_pod("high-0", namespace)), timeout=90, what="high-priority pod Running")
        assert hp.spec.node_name == node
        assert hp.spec.priority == 1000

        # exactly one victim, and it is gone (kwok finalized the deletion)
        wait_for(lambda: len(core.list_namespaced_pod(namespace).items) == 4, what="victim removed")
        assert len(running("low-")) == 3
        events = core.list_namespaced_event(namespace).items
        preempted = [e for e in events if e.reason == "Preempted"]
        assert preempted, [(e.reason, e.message) for e in events]
        assert "high-0" in preempted[0].message or hp.metadata.uid in preempted[0].message
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        core.delete_node(node)
        sched.delete_priority_class(high)
        sched.delete_priority_class(low)


def test_resource_quota_rejects_third_pod(control_plane, api, namespace):
    core = client.CoreV1Api(api)
    core.create_namespaced_resource_quota(namespace, client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="pods"), spec=client.V1ResourceQuotaSpec(hard={"pods": "2"})))
    # kube-controller-manager's quota controller must fill in status before admission
    # counts against it
    wait_for(lambda: (core.read_namespaced_resource_quota("pods", namespace).status.hard or {}).get("pods") == "2",
             what="quota status")
    core.create_namespaced_pod(namespace, pod("a"))
    core.create_namespaced_pod(namespace, pod("b"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(namespace, pod("c"))
    assert exc.value.status == 403
    assert "exceeded quota" in exc.value.body
    used = wait_for(lambda: (core.read_namespaced_resource_quota("pods", namespace).status.used or {}).get("pods"),
                    what="quota usage")
    assert used == "2"


@pytest.fixture
def team_namespaces(control_plane, api):
    suffix = uuid.uuid4().hex[:6]
    alpha, beta = f"team-alpha-{suffix}", f"team-beta-{suffix}"
    for ns in (alpha, beta):
        control_plane.create_namespace(ns)
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(alpha, client.V1Role(
        metadata=client.V1ObjectMeta(name="spawner"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"],
                                   verbs=["create", "get", "list", "watch", "delete"])]))
    rbac.create_namespaced_role_binding(alpha, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="data-science-alpha-spawner"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="spawner"),
        subjects=[client.RbacV1Subject(api_group="rbac.authorization.k8s.io", kind="Group",
                                       name="data-science-alpha")]))
    yield alpha, beta
    core = client.CoreV1Api(api)
    for ns in (alpha, beta):
        core.delete_namespace(ns)


def _check_group_access(user_api, alpha, beta):
    core = client.CoreV1Api(user_api)
    created = core.create_namespaced_pod(alpha, pod("nb-alice"))
    assert created.metadata.namespace == alpha
    assert [p.metadata.name for p in core.list_namespaced_pod(alpha).items] == ["nb-alice"]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(beta)
    assert exc.value.status == 403
    assert "cannot list resource" in exc.value.body
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(beta, pod("nb-alice"))
    assert exc.value.status == 403


def test_rbac_group_with_client_certificate(control_plane, team_namespaces):
    alpha, beta = team_namespaces
    kubeconfig = control_plane.user_kubeconfig("alice", groups=["data-science-alpha"])
    with control_plane.api_client(kubeconfig) as user_api:
        _check_group_access(user_api, alpha, beta)


def test_rbac_group_with_impersonation(control_plane, api, team_namespaces):
    alpha, beta = team_namespaces
    with control_plane.api_client() as admin:
        admin.set_default_header("Impersonate-User", "bob")
        admin.set_default_header("Impersonate-Group", "data-science-alpha")
        _check_group_access(admin, alpha, beta)
        who = client.AuthenticationV1Api(admin).create_self_subject_review(
            client.V1SelfSubjectReview(metadata=client.V1ObjectMeta()))
        assert who.status.user_info.username == "bob"
        assert "data-science-alpha" in who.status.user_info.groups
    # an unbound group gets nothing
    with control_plane.api_client() as other:
        other.set_default_header("Impersonate-User", "carol")
        other.set_default_header("Impersonate-Group", "data-science-gamma")
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(other).create_namespaced_pod(alpha, pod("nb-carol"))
        assert exc.value.status == 403


# ---------------------------------------------------------------- kwok: pod stages, logs
@pytest.fixture(scope="module")
def placement(control_plane, api):
    """A fake node of this module's own (tainted and selected): pod spec kwargs."""
    node = f"n-{uuid.uuid4().hex[:6]}"
    control_plane.add_node(node, {"cpu": "8", "memory": "32Gi"},
                           taints=[client.V1Taint(key="tenancy-test/node", value=node, effect="NoSchedule")])
    yield dict(
        node_selector={"kubernetes.io/hostname": node},
        tolerations=[client.V1Toleration(key="tenancy-test/node", operator="Equal", value=node,
                                         effect="NoSchedule")],
    )
    client.CoreV1Api(api).delete_node(node)


def job(name, placement):
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(backoff_limit=0, template=client.V1PodTemplateSpec(
            spec=client.V1PodSpec(
                restart_policy="Never", termination_grace_period_seconds=30,
                containers=[client.V1Container(name="train", image="registry.invalid/train:1",
                                               resources=client.V1ResourceRequirements(requests={"cpu": "1"}))],
                **placement))))


def job_condition(batch, namespace, name):
    conds = batch.read_namespaced_job_status(name, namespace).status.conditions or []
    return {c.type for c in conds if c.status == "True"} & {"Complete", "Failed"}


def test_job_pods_run_until_annotated_with_an_exit_code(control_plane, api, namespace, placement):
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    for name in ("ok", "bad"):
        batch.create_namespaced_job(namespace, job(name, placement))

    def job_pods():
        pods = {p.metadata.labels["job-name"]: p for p in core.list_namespaced_pod(namespace).items}
        return pods if len(pods) == 2 and all(p.status.phase == "Running" for p in pods.values()) else None

    pods = wait_for(job_pods, what="both Job pods Running")
    # no automatic completion: they stay Running, and the Jobs unfinished (3 s of reads in which nothing
    # may change: a fixed time on purpose)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        for p in core.list_namespaced_pod(namespace).items:
            assert p.status.phase == "Running", (p.metadata.name, p.status.phase)
        time.sleep(0.5)
    assert not job_condition(batch, namespace, "ok") and not job_condition(batch, namespace, "bad")

    for name, code in (("ok", "0"), ("bad", "3")):
        core.patch_namespaced_pod(pods[name].metadata.name, namespace,
                                  {"metadata": {"annotations": {controlplane.EXIT_CODE_ANNOTATION: code}}})
    for name, phase, code, reason, condition in (("ok", "Succeeded", 0, "Completed", "Complete"),
                                                 ("bad", "Failed", 3, "Error", "Failed")):
        p = wait_for(lambda: (lambda x: x if x.status.phase in ("Succeeded", "Failed") else None)(
            core.read_namespaced_pod(pods[name].metadata.name, namespace)), what=f"{name} pod terminal")
        assert p.status.phase == phase
        (cs,) = p.status.container_statuses
        assert cs.state.terminated.exit_code == code and cs.state.terminated.reason == reason
        assert not cs.ready
        assert p.status.pod_ip == pods[name].status.pod_ip
        assert wait_for(lambda: job_condition(batch, namespace, name), what=f"Job {name} finished") == {condition}
    # backoffLimit 0: no replacement pod for the failed one
    assert len(core.list_namespaced_pod(namespace).items) == 2


def test_container_logs_through_the_api_server(control_plane, api, namespace, placement, tmp_path):
    core = client.CoreV1Api(api)
    spec = dict(termination_grace_period_seconds=30, **placement)
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="two"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="x"),
                                          client.V1Container(name="side", image="x")], **spec)))
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="other"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="x")], **spec)))
    wait_for(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
             what="pods Running")
    with pytest.raises(ApiException) as exc:  # no rule yet: kwok answers as a kubelet would fail
        core.read_namespaced_pod_log("other", namespace)
    assert "no logs found" in exc.value.body

    main_log, side_log, ns_log = tmp_path / "main.log", tmp_path / "side.log", tmp_path / "ns.log"
    control_plane.set_pod_logs(namespace, "two", main_log, container="main")
    control_plane.set_pod_logs(namespace, "two", side_log, container="side")
    control_plane.set_pod_logs(namespace, None, ns_log)  # every other pod of the namespace
    assert core.read_namespaced_pod_log("two", namespace, container="main") == ""  # created empty

    controlplane.append_log(main_log, "epoch 1 loss 0.9\nepoch 2 loss 0.5\n")
    controlplane.append_log(main_log, "epoch 3 loss 0.2", stream="stderr")
    controlplane.append_log(side_log, "sidecar up\n")
    controlplane.append_log(ns_log, "from the namespace rule\n")
    assert core.read_namespaced_pod_log("two", namespace, container="main") == \
        "epoch 1 loss 0.9\nepoch 2 loss 0.5\nepoch 3 loss 0.2\n"
    assert core.read_namespaced_pod_log("two", namespace, container="main", tail_lines=2) == \
        "epoch 2 loss 0.5\nepoch 3 loss 0.2\n"
    assert core.read_namespaced_pod_log("two", namespace, container="main", limit_bytes=10) == "epoch 1 lo"
    assert core.read_namespaced_pod_log("two", namespace, container="side") == "sidecar up\n"
    assert core.read_namespaced_pod_log("other", namespace) == "from the namespace rule\n"
    stamped = core.read_namespaced_pod_log("other", namespace, timestamps=True)
    assert stamped.endswith("Z from the namespace rule\n") and stamped.startswith("20")
    # a file that grows is read again at each request
    controlplane.append_log(main_log, "epoch 4 loss 0.1\n")
    assert core.read_namespaced_pod_log("two", namespace, container="main", tail_lines=1) == "epoch 4 loss 0.1\n"

    control_plane.clear_pod_logs(namespace)  # the namespace rule
    wait_for(lambda: _log_error(core, "other", namespace), timeout=5, what="namespace rule gone")


def _log_error(core, pod_name, namespace):
    try:
        core.read_namespaced_pod_log(pod_name, namespace)
    except ApiException as e:
        return e.status
    return None
