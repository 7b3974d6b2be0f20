"""Tenant provisioning against the real control plane: what is created, that RBAC and the
quota really work, idempotence, drift repair, never touching what is not ours, cleanup
after a tenant goes, one-line errors, and the quota tree read from its CRD."""

from __future__ import annotations


import pytest

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from hub_ext.backends.kubernetes import Provisioner, load_quota_tree
from hub_ext.backends.kubernetes.api import Api, missing_group_versions
from hub_ext.backends.kubernetes.objects import DEV_QUOTA, DEVELOPER_RULES, MANAGED_BY, MANAGER
from hub_ext.quota.errors import ValidationError
from hub_ext.tenants import Tenant

from provision_fixtures import (  # noqa: F401 - fixtures
    alpha_beta, impersonating, pod, quota_ready, service_account_ready, setup, wait_for,
)


def names(actions):
    return sorted(str(a).split(":")[0] for a in actions)


def managed_versions(api, selector):
    """resourceVersion of every object the selector matches, by (kind, namespace, name)."""
    core, rbac, sched = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.SchedulingV1Api(api)
    out = {}
    for kind, items in (
        ("Namespace", core.list_namespace(label_selector=selector).items),
        ("PriorityClass", sched.list_priority_class(label_selector=selector).items),
        ("Role", rbac.list_role_for_all_namespaces(label_selector=selector).items),
        ("RoleBinding", rbac.list_role_binding_for_all_namespaces(label_selector=selector).items),
        ("LimitRange", core.list_limit_range_for_all_namespaces(label_selector=selector).items),
        ("ResourceQuota", core.list_resource_quota_for_all_namespaces(label_selector=selector).items),
    ):
        for obj in items:
            out[(kind, obj.metadata.namespace, obj.metadata.name)] = obj.metadata.resource_version
    return out


def test_two_tenants_get_namespace_rbac_quota_limits_and_priority_classes(api, alpha_beta):
    s, result = alpha_beta, alpha_beta.first
    assert result.errors == [] and result.conflicts == [] and result.deleted == []
    a, b = s.alpha.namespace, s.beta.namespace
    assert names(result.created) == sorted([
        f"Namespace {a}", f"Namespace {b}", f"Namespace {s.shared}",
        "PriorityClass critical-prod", "PriorityClass high-priority-research", "PriorityClass low-priority-dev",
        f"Role {a}/ml-developer", f"Role {b}/ml-developer", f"Role {s.shared}/ml-viewer",
        f"RoleBinding {a}/{a}-binding", f"RoleBinding {b}/{b}-binding",
        f"RoleBinding {s.shared}/{a}-viewer", f"RoleBinding {s.shared}/{b}-viewer",
        f"LimitRange {a}/tenancy-defaults", f"LimitRange {b}/tenancy-defaults",
        f"ResourceQuota {a}/dev-quota", f"ResourceQuota {b}/dev-quota",
    ])
    core, rbac, sched = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.SchedulingV1Api(api)
    labels = core.read_namespace(a).metadata.labels
    assert labels[MANAGED_BY] == MANAGER
    assert labels["tenancy.jupyter.org/tenant"] == "data-science-alpha"
    assert labels["tenancy.jupyter.org/quota-leaf"] == "root.a.1"
    role = api.sanitize_for_serialization(rbac.read_namespaced_role("ml-developer", a))
    assert role["rules"] == DEVELOPER_RULES  # the seed's, verbatim
    binding = rbac.read_namespaced_role_binding(f"{a}-binding", a)
    assert binding.role_ref.name == "ml-developer"
    assert [(x.kind, x.name) for x in binding.subjects] == [
        ("Group", "data-science-alpha"), ("ServiceAccount", "tenancy-hub")]
    assert binding.metadata.annotations["tenancy.jupyter.org/group"] == "data-science-alpha"
    assert core.read_namespaced_resource_quota("dev-quota", b).spec.hard == DEV_QUOTA
    limits = core.read_namespaced_limit_range("tenancy-defaults", a).spec.limits[0]
    assert limits.default_request == {"cpu": "500m", "memory": "1Gi"}
    pcs = {pc.metadata.name: pc for pc in sched.list_priority_class().items}
    assert [(pcs[n].value, bool(pcs[n].global_default)) for n in
            ("critical-prod", "high-priority-research", "low-priority-dev")] == [
        (1000000, False), (500000, False), (100000, True)]
    viewer = rbac.read_namespaced_role("ml-viewer", s.shared)
    assert viewer.rules[0].verbs == ["get", "list", "watch"]


def test_second_reconcile_changes_nothing(api, alpha_beta):
    s = alpha_beta
    core = client.CoreV1Api(api)
    for ns in (s.alpha.namespace, s.beta.namespace):  # the quota controller has nothing left to write
        wait_for(lambda: all(v in ("0", "0m") for v in (quota_ready(core, ns).status.used or {}).values()),
                 what="quota usage back to 0")
    before = managed_versions(api, s.prov.marker.selector)
    assert len(before) == 17
    again = s.prov.reconcile([s.beta, s.alpha])
    assert not again.changed and again.lines() == [] and again.unchanged == 17, again.lines()
    assert managed_versions(api, s.prov.marker.selector) == before


def test_group_members_work_in_their_namespace_and_only_read_production(control_plane, api, alpha_beta):
    s = alpha_beta
    a, b = s.alpha.namespace, s.beta.namespace
    with impersonating(control_plane, "alice", "data-science-alpha") as alice:
        core = client.CoreV1Api(alice)
        try:
            assert core.create_namespaced_pod(a, pod("nb-alice")).metadata.namespace == a
            assert [p.metadata.name for p in core.list_namespaced_pod(a).items] == ["nb-alice"]
            for call in (lambda: core.list_namespaced_pod(b), lambda: core.create_namespaced_pod(b, pod("x")),
                         lambda: core.create_namespaced_pod(s.shared, pod("x"))):
                with pytest.raises(ApiException) as exc:
                    call()
                assert exc.value.status == 403
            assert core.list_namespaced_pod(s.shared).items == []  # read-only access
            assert client.AppsV1Api(alice).list_namespaced_deployment(s.shared).items == []
        finally:
            client.CoreV1Api(api).delete_collection_namespaced_pod(a)
    # the hub's service account is bound in every tenant namespace
    namespace, name = s.hub_sa.split("/")
    with impersonating(control_plane, f"system:serviceaccount:{namespace}:{name}", "system:serviceaccounts") as hub:
        try:
            client.CoreV1Api(hub).create_namespaced_pod(b, pod("nb-bob"))
        finally:
            client.CoreV1Api(api).delete_collection_namespaced_pod(b)


def test_quota_rejects_over_quota_pod_and_limit_range_admits_undeclared_pod(api, alpha_beta):
    a = alpha_beta.alpha.namespace
    core = client.CoreV1Api(api)
    quota_ready(core, a)
    try:
        plain = core.create_namespaced_pod(a, pod("no-requests"))  # the quota wants cpu/memory declared
        resources = plain.spec.containers[0].resources
        assert resources.requests == {"cpu": "500m", "memory": "1Gi"}
        assert resources.limits == {"cpu": "1", "memory": "2Gi"}
        with pytest.raises(ApiException) as exc:
            core.create_namespaced_pod(a, pod("too-big", cpu="21", memory="1Gi"))
        assert exc.value.status == 403
        assert "exceeded quota: dev-quota" in exc.value.body and "requests.cpu=20" in exc.value.body
    finally:
        core.delete_collection_namespaced_pod(a)


def test_drift_is_repaired(api, setup):
    prov = setup.provisioner()
    gamma = setup.tenant("data-science-gamma", "team-gamma")
    assert prov.reconcile([gamma]).errors == []
    ns = gamma.namespace
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.patch_namespaced_resource_quota("dev-quota", ns, {"spec": {"hard": {"requests.cpu": "99", "pods": "1000"}}})
    core.patch_namespaced_resource_quota("dev-quota", ns, {"metadata": {"labels": {"team": "gamma"}}})
    rbac.delete_namespaced_role_binding(f"{ns}-binding", ns)
    rbac.patch_namespaced_role("ml-developer", ns, {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})

    result = prov.reconcile([gamma])
    assert names(result.created) == [f"RoleBinding {ns}/{ns}-binding"]
    assert [str(a) for a in result.updated] == [
        f"Role {ns}/ml-developer: updated (rules differed)", f"ResourceQuota {ns}/dev-quota: updated (spec differed)"]
    assert result.errors == [] and result.deleted == []
    quota = core.read_namespaced_resource_quota("dev-quota", ns)
    assert quota.spec.hard == DEV_QUOTA
    assert quota.metadata.labels["team"] == "gamma"  # what others add is kept
    assert api.sanitize_for_serialization(rbac.read_namespaced_role("ml-developer", ns))["rules"] == DEVELOPER_RULES
    assert rbac.read_namespaced_role_binding(f"{ns}-binding", ns).subjects[0].name == "data-science-gamma"
    assert not prov.reconcile([gamma]).changed


def test_unlabelled_objects_are_conflicts_and_left_alone(control_plane, api, setup):
    ns = setup.ns("team-delta")
    control_plane.create_namespace(ns)
    setup.extra_namespaces.append(ns)
    core = client.CoreV1Api(api)
    core.create_namespaced_resource_quota(ns, client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="dev-quota"), spec=client.V1ResourceQuotaSpec(hard={"pods": "3"})))
    delta = setup.tenant("data-science-delta", "team-delta")
    strict = setup.provisioner(use_existing_namespaces=False).reconcile([delta])
    assert [str(e) for e in strict.errors] == [f"Namespace {ns}: 4 objects in it not provisioned: it was not "
                                               "created by jupyterhub-tenancy and use_existing_namespaces is off"]
    assert names(strict.conflicts) == [f"Namespace {ns}"] and strict.created
    assert all(a.namespace != ns for a in strict.created)
    prov = setup.provisioner()
    for _ in range(2):
        result = prov.reconcile([delta])
        assert [str(c) for c in result.conflicts] == [
            f"Namespace {ns}: exists, but it was not created by jupyterhub-tenancy (no "
            "app.kubernetes.io/managed-by=jupyterhub-tenancy label); left as is (it matches what would be provisioned)",
            f"ResourceQuota {ns}/dev-quota: exists, but it was not created by jupyterhub-tenancy (no "
            "app.kubernetes.io/managed-by=jupyterhub-tenancy label); left as is (it differs from what would be "
            "provisioned)",
        ]
        assert result.errors == [] and result.deleted == [] and result.updated == []
    quota = core.read_namespaced_resource_quota("dev-quota", ns)
    assert quota.spec.hard == {"pods": "3"} and not quota.metadata.labels
    assert MANAGED_BY not in (core.read_namespace(ns).metadata.labels or {})
    # the rest was provisioned in the existing namespace; removing the tenant removes only that
    assert client.RbacAuthorizationV1Api(api).read_namespaced_role_binding(f"{ns}-binding", ns)
    gone = prov.reconcile([])
    assert names(gone.deleted) == sorted([f"Role {ns}/ml-developer", f"RoleBinding {ns}/{ns}-binding",
                                          f"LimitRange {ns}/tenancy-defaults",
                                          f"RoleBinding {setup.shared}/{ns}-viewer"])
    assert core.read_namespaced_resource_quota("dev-quota", ns).spec.hard == {"pods": "3"}


def test_removed_tenant_loses_what_was_made_for_it_but_keeps_its_namespace(api, setup):
    prov = setup.provisioner()
    eps, zeta = setup.tenant("data-science-epsilon", "team-eps"), setup.tenant("data-science-zeta", "team-zeta")
    assert prov.reconcile([eps, zeta]).errors == []
    e = eps.namespace
    core = client.CoreV1Api(api)
    service_account_ready(core, e)
    core.create_namespaced_config_map(e, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="notes")))

    broken = setup.tenant("data-science-epsilon", "team-eps", errors=["property tenancy.role must be ..."])
    held = prov.reconcile([broken, zeta])  # a tenant with errors right now: nothing of it is removed
    assert held.deleted == [] and len(held.kept) == 6

    result = prov.reconcile([zeta])
    assert names(result.deleted) == sorted([
        f"Role {e}/ml-developer", f"RoleBinding {e}/{e}-binding", f"RoleBinding {setup.shared}/{e}-viewer",
        f"LimitRange {e}/tenancy-defaults", f"ResourceQuota {e}/dev-quota"])
    assert [str(k) for k in result.kept] == [
        f"Namespace {e}: kept (tenant data-science-epsilon is gone; delete_namespaces is off)"]
    assert result.created == [] and result.updated == [] and result.errors == []
    assert core.read_namespace(e).status.phase == "Active"
    assert core.read_namespaced_config_map("notes", e)
    assert core.read_namespaced_resource_quota("dev-quota", zeta.namespace)

    prov.delete_namespaces = True
    core.create_namespaced_pod(e, pod("left-over"))
    assert "pods are left in it" in str(prov.reconcile([zeta]).kept[0])
    core.delete_namespaced_pod("left-over", e, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(e).items, what="pod gone")
    assert [str(d) for d in prov.reconcile([zeta]).deleted] == [
        f"Namespace {e}: deleted (tenant data-science-epsilon is gone)"]


def test_desired_objects_follow_the_configuration():  # no API calls
    prov = Provisioner(instance="unit", group_mapping={"Data Science @ Lab": ["oidc:ds", "ds"]},
                       group_template="oidc:{group}", tenant_resource_quotas={"b": {"pods": None, "cpu": "lots"}},
                       tenant_limit_ranges={"b": None}, priority_classes=[])
    objs, errors, held, kept = prov.desired([
        Tenant("Data Science @ Lab", "team-a", leaf="root.a"), Tenant("b", "team-b"), Tenant("c", "team-a"),
        Tenant("d", "kube-system"), Tenant("e", "team-e", errors=["bad"])])
    by_key = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
    ns = by_key[("Namespace", None, "team-a")]["metadata"]
    assert ns["labels"]["tenancy.jupyter.org/tenant"] == "Data-Science-Lab-44ee90b5"  # a valid label value
    assert ns["annotations"]["tenancy.jupyter.org/group"] == "Data Science @ Lab"
    assert ns["labels"]["tenancy.jupyter.org/quota-leaf"] == "root.a"
    subjects = by_key[("RoleBinding", "team-a", "team-a-binding")]["subjects"]
    assert [s["name"] for s in subjects] == ["oidc:ds", "ds"]
    assert [s["name"] for s in by_key[("RoleBinding", "team-b", "team-b-binding")]["subjects"]] == ["oidc:b"]
    assert ("LimitRange", "team-b", "tenancy-defaults") not in by_key
    assert [str(e) for e in errors] == [
        "ResourceQuota team-b/dev-quota: not provisioned (check the configuration): spec.hard cpu: 'lots' is not "
        "a quantity (expected e.g. 500m, 2, 10Gi)",
        "tenant c: namespace team-a already belongs to tenant Data Science @ Lab; skipped",
        "tenant d: namespace kube-system is protected; skipped"]
    assert held == {"c", "d", "e"} and kept == {("ResourceQuota", "team-b", "dev-quota")}
    with pytest.raises(Exception, match="not a valid template"):
        Provisioner(role_binding_name="{tenant}-binding")


def test_api_errors_are_one_line_messages(control_plane, setup):
    eta = setup.tenant("data-science-eta", "team-eta")
    with impersonating(control_plane, "mallory") as nobody:
        result = setup.provisioner(api_client=nobody).reconcile([eta])
    assert not result.changed and result.errors
    for err in result.errors:
        assert "\n" not in str(err) and ("403 Forbidden" in str(err) or "not provisioned" in str(err)), str(err)
    ns = eta.namespace
    assert any(str(e).startswith(f'Namespace {ns}: cannot read: 403 Forbidden: namespaces "{ns}" is forbidden: '
                                 'User "mallory" cannot get resource "namespaces"') for e in result.errors)

    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    cfg.retries = 0
    with client.ApiClient(cfg) as unreachable:
        down = Provisioner(unreachable, instance=setup.instance).reconcile([eta])
    assert [str(e) for e in down.errors][0].startswith("reconcile stopped: discovery failed: cannot reach the API server")


def test_discovery_names_missing_api_versions(api):
    served = Api(api).served_versions()
    assert "v1" in served["rbac.authorization.k8s.io"] and "v1" in served["scheduling.k8s.io"]
    assert missing_group_versions(served, ["rbac.authorization.k8s.io/v1", "scheduling.k8s.io/v1", "v1"]) == {}
    assert missing_group_versions(served, ["scheduling.k8s.io/v9", "example.invalid/v1"]) == {
        "scheduling.k8s.io/v9": "the API server does not serve scheduling.k8s.io/v9 (it serves scheduling.k8s.io at v1)",
        "example.invalid/v1": "the API server does not serve example.invalid/v1 (no API group example.invalid)",
    }


ELASTIC_QUOTA_TREE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "elasticquotatrees.scheduling.sigs.k8s.io",
                 # *.k8s.io groups are protected; scheduler-plugins' CRDs carry their approval PR here
                 "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"}},
    "spec": {
        "group": "scheduling.sigs.k8s.io",
        "names": {"kind": "ElasticQuotaTree", "plural": "elasticquotatrees", "singular": "elasticquotatree",
                  "listKind": "ElasticQuotaTreeList"},
        "scope": "Namespaced",
        "versions": [{"name": "v1beta1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def tree(root_max_cpu=40):
    leaf = lambda name, ns: {"name": name, "namespaces": [ns], "min": {"cpu": 10}, "max": {"cpu": 20}}  # noqa: E731
    return {"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
            "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
            "spec": {"root": {"name": "root", "min": {"cpu": 20}, "max": {"cpu": root_max_cpu, "nvidia.com/gpu": 4},
                              "children": [leaf("root.a", "team-alpha"), leaf("root.b", "team-beta")]}}}


def test_quota_tree_is_read_from_its_crd_when_installed(api):
    assert load_quota_tree(api) is None  # no CRD
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(ELASTIC_QUOTA_TREE_CRD)
    custom = client.CustomObjectsApi(api)
    try:
        wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                             ext.read_custom_resource_definition(ELASTIC_QUOTA_TREE_CRD["metadata"]["name"])
                             .status.conditions or []), what="CRD established")
        wait_for(lambda: "elasticquotatrees" in Api(api).served_resources("scheduling.sigs.k8s.io/v1beta1"),
                 what="CRD served")
        assert load_quota_tree(api) is None  # CRD, but no tree
        custom.create_namespaced_custom_object("scheduling.sigs.k8s.io", "v1beta1", "kube-system",
                                               "elasticquotatrees", tree())
        loaded = load_quota_tree(api)
        assert loaded.name == "elasticquotatree" and loaded.namespace == "kube-system"
        assert sorted(n.name for n in loaded.leaves()) == ["root.a", "root.b"]
        assert loaded.leaf_of["team-beta"].name == "root.b"
        assert loaded.root.max == {"cpu": 40000, "nvidia.com/gpu": 4000}

        custom.patch_namespaced_custom_object("scheduling.sigs.k8s.io", "v1beta1", "kube-system", "elasticquotatrees",
                                              "elasticquotatree", {"spec": tree(root_max_cpu=10)["spec"]})
        with pytest.raises(ValidationError) as exc:
            load_quota_tree(api, name="elasticquotatree")
        assert str(exc.value).startswith("ElasticQuotaTree kube-system/elasticquotatree: ")
        assert "\n" not in str(exc.value)
        assert load_quota_tree(api, name="no-such-tree") is None
    finally:
        ext.delete_custom_resource_definition(ELASTIC_QUOTA_TREE_CRD["metadata"]["name"])
