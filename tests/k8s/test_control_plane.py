"""The local control plane behaves like a real cluster for what the tenancy extension
relies on: version discovery, priority preemption by kube-scheduler, ResourceQuota
admission and RBAC for group-mapped users."""

from __future__ import annotations

import time
import uuid

import os

import pytest

try:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
except ImportError:  # the client is only optional when the tier is skipped
    if os.environ.get("TENANCY_SKIP_K8S") == "1":
        pytest.skip(reason="TENANCY_SKIP_K8S=1 asks to skip the Kubernetes tier", allow_module_level=True)
    raise

import controlplane


def wait_for(fn, timeout=60.0, what="condition", interval=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


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
