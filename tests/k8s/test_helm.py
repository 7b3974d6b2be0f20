"""The Helm chart (helm/) on a real control plane.

- ``helm lint --strict`` and ``helm template`` with the default values and with others;
  the generated ``tenancy_config.py`` loads and says what the values say; the optional
  objects (PodDisruptionBudget, Grafana dashboard) only when asked for;
- values.schema.json, the only validation of the values: bad values (a wrong type, an
  unknown key, a negative number ...) are refused by ``helm template`` and ``helm lint
  --strict`` with the key named (tests/test_chart_schema.py checks the schema itself);
- every rendered object applied to the API server (the CRD first), the Deployment's pod
  scheduled and Running (kwok), covered by the PodDisruptionBudget;
- the service wired exactly as in its pod (the Deployment's environment, the ConfigMap's
  config, the ServiceAccount's identity by impersonation, nothing else): it serves its
  health endpoint, reads nodes and the ElasticQuotaTree, provisions a tenant, watches
  foreign pods, reads ResourceQuotas/LimitRanges, runs a training Job and evicts it
  through the Eviction API for a higher-priority one; no request is refused;
- the rules are exactly the chart's: each is granted, nothing beyond (no secrets, no
  RBAC outside roles), and without ``pods/eviction`` the eviction falls back to a delete.

helm comes from ``tools/helm/build.sh`` (``$TENANCY_HELM`` overrides); missing, the tests
fail unless ``TENANCY_SKIP_K8S=1``.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import subprocess
import sys
import types
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from traitlets.config import PyFileConfigLoader

from hub_ext.backends.kubernetes.api import Api, Kind
from hub_ext.backends.kubernetes.backend import KubernetesBackend
from hub_ext.backends.kubernetes.checks import needed_permissions
from hub_ext.backends.kubernetes.objects import JOB_NAME_LABEL, Marker
from hub_ext.quota.dataset import _FIELDS as dataset_field_set, SOURCES, parse_dataset
from hub_ext.quota.tree import parse_tree
from hub_ext.service.controller import Identity
from hub_ext.tenants import Tenant

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from provision_fixtures import impersonating, quota_ready, service_account_ready, until, wait_for  # noqa: E402

CHART = REPO / "helm"
HELM_VERSION = "v3.22.0"
HELM = Path(os.environ.get("TENANCY_HELM")
            or Path.home() / ".cache" / "jupyterhub-tenancy" / f"helm-{HELM_VERSION}" / "bin" / "helm")
ADMIN = Identity(name="admin", admin=True)
CRD_NAME = "elasticquotatrees.scheduling.sigs.k8s.io"
DATASET_CRD = "datasets.tenancy.jupyter.org"
#: the seed's fashion-mnist, as the values declare it (a CSI/OSS volume, as the seed's)
FASHION_MNIST = {
    "apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
    "spec": {"description": "Fashion-MNIST, 70,000 28x28 images", "teams": ["team-ä"],
             "source": {"persistentVolume": {
                 "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
                 "csi": {"driver": "ossplugin.csi.alibabacloud.com", "volumeHandle": "fashion-demo-pv",
                         "volumeAttributes": {"bucket": "fashion", "url": "oss-cn-beijing.aliyuncs.com"}}}},
             "size": "10Gi", "mountPath": "/datasets/fashion-mnist"}}

#: The chart's ClusterRole with provisioning on: (apiGroup, resource, verbs), exactly.
BACKEND_RULES = {
    ("", "nodes"): {"list", "watch"},
    ("", "pods"): {"get", "list", "watch", "create", "delete"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/log"): {"get"},
    ("batch", "jobs"): {"get", "list", "watch", "create", "delete"},
    ("", "events"): {"list"},
    ("scheduling.sigs.k8s.io", "elasticquotatrees"): {"get", "list"},
    # datasets: a volume and a claim per namespace, the Dataset objects of the cluster
    ("", "persistentvolumes"): {"get", "list", "watch", "create", "update", "delete"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "create", "delete"},
    ("tenancy.jupyter.org", "datasets"): {"get", "list", "watch"},
    # accelerated datasets: a Fluid Dataset and AlluxioRuntime per namespace
    ("data.fluid.io", "datasets"): {"get", "list", "create", "update", "delete"},
    ("data.fluid.io", "alluxioruntimes"): {"get", "list", "create", "update", "delete"},
}
CRUD = {"get", "list", "create", "update", "delete"}
PROVISIONER_RULES = {
    ("", "namespaces"): CRUD,
    ("", "resourcequotas"): CRUD | {"watch"},  # watched for datasets' claims
    ("", "limitranges"): CRUD,
    ("rbac.authorization.k8s.io", "roles"): CRUD | {"escalate", "bind"},
    ("rbac.authorization.k8s.io", "rolebindings"): CRUD,
    ("scheduling.k8s.io", "priorityclasses"): CRUD,
}
#: ... and with provisioning off: the scheduler only reads quotas, limits and PriorityClasses.
READ_LIMITS = {("", "resourcequotas"): {"list", "watch"}, ("", "limitranges"): {"list"},
               ("scheduling.k8s.io", "priorityclasses"): {"list"}}


@pytest.fixture(scope="module")
def helm():
    if not os.access(HELM, os.X_OK):
        pytest.fail(f"helm missing at {HELM}: build it with tools/helm/build.sh (about 2.5 min cold, cached "
                    "after), or set TENANCY_SKIP_K8S=1 to skip the k8s tier.", pytrace=False)
    return str(HELM)


def run_helm(helm, *args, ok=True) -> subprocess.CompletedProcess:
    out = subprocess.run([helm, *args], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HELM_CACHE_HOME": "/tmp/tenancy-helm/cache",
                              "HELM_CONFIG_HOME": "/tmp/tenancy-helm/config", "HELM_DATA_HOME": "/tmp/tenancy-helm/data"})
    if ok:
        assert out.returncode == 0, f"helm {' '.join(args)}: {out.stderr}"
    return out


def render(helm, tmp_path, values: dict | None = None, *, release="tenancy", namespace="jhub", crds=False) -> list[dict]:
    args = ["template", release, str(CHART), "--namespace", namespace]
    if values is not None:
        path = tmp_path / f"values-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["-f", str(path)]
    if crds:
        args.append("--include-crds")
    return [d for d in yaml.safe_load_all(run_helm(helm, *args).stdout) if d]


def dataset_fields() -> set:
    """The fields of a Dataset's spec, as ``quota/dataset.py`` reads them."""
    return set(dataset_field_set)


def one(objs, kind, name=None) -> dict:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [(o["kind"], o["metadata"]["name"]) for o in objs])
    return found[0]


def rules_of(cluster_role) -> dict:
    out: dict[tuple, set] = {}
    for rule in cluster_role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, no nonResourceURLs
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def not_granted(cluster_role, config, roles=()) -> list:
    """What the backend, configured as ``config`` says, asks of the API server at start
    (checks.needed_permissions) and neither the ClusterRole nor a Role (in its namespace) grants."""
    traits = {t: getattr(KubernetesBackend, t).default_value
              for t in ("use_jobs", "sync_cluster_limits", "provision", "follow_dataset_objects")}
    service = types.SimpleNamespace(leader_election=config.TenancyService.get("leader_election", False),
                                    lease_namespace=config.TenancyService.get("lease_namespace"))
    # the chart's datasets, each for some namespace, and any of them accelerated later by an admin
    declared = bool(config.TenancyService.get("datasets"))
    datasets = types.SimpleNamespace(wanted={("any", "team"): None} if declared else {},
                                     chosen=lambda: {"any"} if declared else set())
    backend = types.SimpleNamespace(**{**traits, **{t: v for t, v in config.KubernetesBackend.items() if t in traits}},
                                    parent=service, datasets=datasets,
                                    dataset_objects=types.SimpleNamespace(watch="the chart installs the CRD"))
    rules = rules_of(cluster_role)
    local = {role["metadata"]["namespace"]: rules_of(role) for role in roles}

    def granted(verb, group, resource, namespace):
        return (verb in rules.get((group, resource), ())
                or verb in local.get(namespace, {}).get((group, resource), ()))
    return [need for need in needed_permissions(backend) if not granted(*need)]


def env_of(deployment) -> dict:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def load_config(configmap, tmp_path):
    """The ConfigMap's tenancy_config.py, loaded as ``tenancy serve --config`` loads it."""
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}"
    path.mkdir()
    (path / "tenancy_config.py").write_text(configmap["data"]["tenancy_config.py"])
    return PyFileConfigLoader("tenancy_config.py", path=str(path)).load_config()


# -- without a cluster -------------------------------------------------------------------

NON_DEFAULT = {
    "fullnameOverride": "sched",
    "image": {"repository": "registry.example.org/tenancy", "tag": "9.9"},
    "hub": {"apiUrl": "http://hub.jhub.svc:8081/jhub/hub/api", "baseUrl": "/jhub/", "serviceName": "sched",
            "publicUrl": "https://hub.example.org", "existingSecret": "hub",
            "existingSecretKey": "hub.services.sched.apiToken"},
    "database": {"urlSecret": {"name": "tenancy-db", "key": "url"}},
    "quotaTree": {"storage": "object", "namespace": "kube-system",
                  "spec": {"root": {"name": "root", "min": {"cpu": 20}, "max": {"cpu": 40}, "children": [
                      {"name": "root.a", "namespaces": ["team-a"], "min": {"cpu": 10}, "max": {"cpu": 20}}]}}},
    "nodes": {"selector": {"pool": "gpu", "tier": "ml"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
    "training": {"image": "registry.example.org/train:1", "useJobs": False},
    "provision": {"enabled": False},
    "scheduler": {"tenantGroups": {"team-ä": {"tenancy.namespace": "team-a", "note": "it's \"quoted\"\n\\ ok"}}},
    "config": {"KubernetesBackend": {"gone_timeout_seconds": 60}, "Provisioner": {"viewer_role": "viewer"}},
    "extraConfig": "c.TenancyService.groups_refresh_seconds = 7.5\n",
    "networkPolicy": {"enabled": True, "fromNamespaces": ["monitoring"]},
    "persistence": {"enabled": True},  # unused: the database is PostgreSQL
    "kubernetes": {"apiQps": 0, "apiBurst": 400, "createConcurrency": 64},
    "pdb": {"enabled": True, "maxUnavailable": "50%"},  # wins over minAvailable
    "grafanaDashboard": {"enabled": True, "labels": {"grafana_dashboard": None, "dashboards": "grafana"},  # null: away
                         "annotations": {"grafana_folder": "JupyterHub"}},
    "datasets": [FASHION_MNIST],
}


def test_lint(helm, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(NON_DEFAULT))
    for extra in ([], ["-f", str(values)]):
        out = run_helm(helm, "lint", "--strict", str(CHART), *extra)
        assert "0 chart(s) failed" in out.stdout, out.stdout


def test_template_defaults(helm, tmp_path):
    objs = render(helm, tmp_path)
    assert sorted(o["kind"] for o in objs) == sorted([
        "ServiceAccount", "Secret", "ConfigMap", "PersistentVolumeClaim", "ClusterRole", "ClusterRoleBinding",
        "Service", "Deployment"])
    assert all(o["metadata"].get("namespace") == "jhub" for o in objs if not o["kind"].startswith("Cluster"))

    assert rules_of(one(objs, "ClusterRole", "tenancy-jhub")) == {**BACKEND_RULES, **PROVISIONER_RULES}
    binding = one(objs, "ClusterRoleBinding", "tenancy-jhub")
    assert binding["roleRef"]["name"] == "tenancy-jhub"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tenancy", "namespace": "jhub"}]

    deploy = one(objs, "Deployment", "tenancy")
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert pod["serviceAccountName"] == "tenancy"
    assert container["image"] == "jupyterhub-tenancy:0.1.0"
    assert container["command"] == ["tenancy", "serve", "--config", "/etc/tenancy/tenancy_config.py"]
    assert container["ports"] == [{"name": "http", "containerPort": 10101, "protocol": "TCP"}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/services/tenancy/api/v1/health", "port": "http"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    env = env_of(deploy)
    assert env["JUPYTERHUB_API_URL"] == "http://hub:8081/hub/api"
    assert env["JUPYTERHUB_API_TOKEN"] == {"secretKeyRef": {"name": "tenancy-hub-token", "key": "api-token"}}
    assert env["JUPYTERHUB_SERVICE_NAME"] == "tenancy"
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == "/services/tenancy/"
    assert env["JUPYTERHUB_CLIENT_ID"] == "service-tenancy"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == "/services/tenancy/oauth_callback"
    assert env["JUPYTERHUB_BASE_URL"] == "/"
    assert "JUPYTERHUB_PUBLIC_URL" not in env and "TENANCY_DB_URL" not in env
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "tenancy-db"}
    assert volumes["config"]["configMap"] == {"name": "tenancy"}

    svc = one(objs, "Service", "tenancy")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 10101, "targetPort": "http", "protocol": "TCP"}]
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    pvc = one(objs, "PersistentVolumeClaim", "tenancy-db")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi" and "storageClassName" not in pvc["spec"]
    token = base64.b64decode(one(objs, "Secret", "tenancy-hub-token")["data"]["api-token"]).decode()
    assert len(token) == 64 and token.isalnum()

    c = load_config(one(objs, "ConfigMap", "tenancy"), tmp_path)
    assert c.TenancyService.backend_class == "hub_ext.backends.kubernetes.KubernetesBackend"
    assert (c.TenancyService.ip, c.TenancyService.port, c.TenancyService.prefix) == ("0.0.0.0", 10101, "/services/tenancy/")
    if "TENANCY_DB_URL" not in os.environ:
        assert c.TenancyService.db_url == "sqlite:////var/lib/tenancy/tenancy.sqlite"
    assert "tree" not in c.TenancyService
    assert c.KubernetesBackend.quota_tree_object == "kube-system/"
    assert c.KubernetesBackend.node_label_selector == "" and c.KubernetesBackend.node_selector == {}
    assert c.KubernetesBackend.provision is True and c.KubernetesBackend.use_jobs is True
    assert c.Provisioner.instance == "tenancy" and c.Provisioner.hub_service_account == "jhub/hub"
    assert c.Provisioner.shared_namespace == "production"
    assert (c.KubernetesBackend.api_qps, c.KubernetesBackend.api_burst, c.KubernetesBackend.create_concurrency) == (50, 100, 16)
    # the chart's defaults are the traits' own
    assert tuple(getattr(KubernetesBackend, t).default_value for t in ("api_qps", "api_burst", "create_concurrency")) == (50, 100, 16)
    # the Provisioner's own defaults (the seed's quota, limits and PriorityClasses) stand
    assert not {"resource_quota", "limit_range", "priority_classes"} & set(c.Provisioner)
    assert not_granted(one(objs, "ClusterRole"), c) == []

    # CRDs: only with --include-crds (helm install puts them first)
    crd = one(render(helm, tmp_path, crds=True), "CustomResourceDefinition", CRD_NAME)
    assert crd["spec"]["scope"] == "Namespaced" and crd["spec"]["versions"][0]["name"] == "v1beta1"
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    crd = one(render(helm, tmp_path, crds=True), "CustomResourceDefinition", DATASET_CRD)
    assert (crd["spec"]["group"], crd["spec"]["scope"], crd["spec"]["names"]["kind"]) == \
        ("tenancy.jupyter.org", "Cluster", "Dataset")
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == set(dataset_fields()) and set(spec["source"]["properties"]) == set(SOURCES)
    assert c.TenancyService.datasets == []



def test_template_other_values(helm, tmp_path):
    objs = render(helm, tmp_path, NON_DEFAULT)
    kinds = sorted(o["kind"] for o in objs)
    assert "PersistentVolumeClaim" not in kinds and "Secret" not in kinds  # PostgreSQL; z2jh's Secret
    assert rules_of(one(objs, "ClusterRole", "sched-jhub")) == {**BACKEND_RULES, **READ_LIMITS}

    deploy = one(objs, "Deployment", "sched")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.org/tenancy:9.9"
    assert container["readinessProbe"]["httpGet"]["path"] == "/jhub/services/sched/api/v1/health"
    env = env_of(deploy)
    assert env["JUPYTERHUB_API_TOKEN"] == {"secretKeyRef": {"name": "hub", "key": "hub.services.sched.apiToken"}}
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == "/jhub/services/sched/"
    assert env["JUPYTERHUB_CLIENT_ID"] == "service-sched"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == "/jhub/services/sched/oauth_callback"
    assert env["JUPYTERHUB_BASE_URL"] == "/jhub/" and env["JUPYTERHUB_PUBLIC_URL"] == "https://hub.example.org"
    assert env["TENANCY_DB_URL"] == {"secretKeyRef": {"name": "tenancy-db", "key": "url"}}
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}

    tree = one(objs, "ElasticQuotaTree", "elasticquotatree")
    assert tree["metadata"]["namespace"] == "kube-system"
    assert parse_tree(tree).leaf_of["team-a"].name == "root.a"
    policy = one(objs, "NetworkPolicy", "sched")
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in policy["spec"]["ingress"][0]["from"]

    c = load_config(one(objs, "ConfigMap", "sched"), tmp_path)
    assert c.TenancyService.prefix == "/jhub/services/sched/"
    assert c.TenancyService.tenant_groups == NON_DEFAULT["scheduler"]["tenantGroups"]  # quotes, unicode, newlines
    assert c.TenancyService.groups_refresh_seconds == 7.5  # extraConfig comes last
    assert "tree" not in c.TenancyService  # on the cluster instead
    assert c.KubernetesBackend.quota_tree_object == "kube-system/elasticquotatree"
    assert c.KubernetesBackend.node_label_selector == "pool=gpu,tier=ml"
    assert c.KubernetesBackend.node_selector == {"pool": "gpu", "tier": "ml"}
    assert c.KubernetesBackend.tolerations == [{"key": "gpu", "operator": "Exists"}]
    assert c.KubernetesBackend.image == "registry.example.org/train:1" and c.KubernetesBackend.use_jobs is False
    assert c.KubernetesBackend.provision is False and c.KubernetesBackend.gone_timeout_seconds == 60
    assert c.Provisioner.viewer_role == "viewer" and "instance" not in c.Provisioner
    assert not_granted(one(objs, "ClusterRole"), c) == []  # provisioning off
    assert (c.KubernetesBackend.api_qps, c.KubernetesBackend.api_burst, c.KubernetesBackend.create_concurrency) == (0, 400, 64)
    assert c.TenancyService.datasets == [FASHION_MNIST]  # as written, unicode team and all
    assert parse_dataset(c.TenancyService.datasets[0]).size == parse_dataset(FASHION_MNIST).size

    pdb = one(objs, "PodDisruptionBudget", "sched")
    assert pdb["spec"] == {"maxUnavailable": "50%", "selector": deploy["spec"]["selector"]}
    dashboard = one(objs, "ConfigMap", "sched-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["dashboards"] == "grafana" and "grafana_dashboard" not in dashboard["metadata"]["labels"]
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "JupyterHub"}
    assert json.loads(dashboard["data"]["jupyterhub-tenancy.json"]) == json.loads((CHART / "dashboards" / "tenancy.json").read_text())

    # the tree in the configuration instead; provisioning with explicit quota, limits and classes
    values = copy.deepcopy(NON_DEFAULT)
    values["quotaTree"]["storage"] = "config"
    values["provision"] = {"enabled": True, "instance": "hub-1", "hubServiceAccount": "-", "resourceQuota": {"pods": "5"},
                           "limitRange": [], "priorityClasses": []}
    objs = render(helm, tmp_path, values)
    assert not [o for o in objs if o["kind"] == "ElasticQuotaTree"]
    assert rules_of(one(objs, "ClusterRole", "sched-jhub")) == {**BACKEND_RULES, **PROVISIONER_RULES}
    c = load_config(one(objs, "ConfigMap", "sched"), tmp_path)
    assert parse_tree(c.TenancyService.tree).leaf_of["team-a"].name == "root.a"
    assert c.KubernetesBackend.quota_tree_object == "kube-system/"
    assert (c.Provisioner.instance, c.Provisioner.hub_service_account) == ("hub-1", "")
    assert (c.Provisioner.resource_quota, c.Provisioner.limit_range, c.Provisioner.priority_classes) == ({"pods": "5"}, [], [])


def test_optional_objects(helm, tmp_path):
    """The PodDisruptionBudget and the Grafana dashboard: off by default, z2jh's pdb values."""
    objs = render(helm, tmp_path, {"pdb": {"enabled": True}, "grafanaDashboard": {"enabled": True}})
    deploy = one(objs, "Deployment", "tenancy")
    pdb = one(objs, "PodDisruptionBudget", "tenancy")
    assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["namespace"] == "jhub"
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": deploy["spec"]["selector"]["matchLabels"]}}
    dashboard = one(objs, "ConfigMap", "tenancy-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1" and "annotations" not in dashboard["metadata"]
    assert json.loads(dashboard["data"]["jupyterhub-tenancy.json"])["uid"] == "jupyterhub-tenancy"
    # the service's own ConfigMap does not change with them: its pod is not replaced
    assert (deploy["spec"]["template"]["metadata"]["annotations"] ==
            one(render(helm, tmp_path), "Deployment", "tenancy")["spec"]["template"]["metadata"]["annotations"])


def test_idle_culler(helm, tmp_path):
    """values.culler: jupyterhub-idle-culler as a Deployment of its own (off by default), with the
    timeout and interval of the values, the hub's API and its token from z2jh's Secret "hub";
    selected apart from the service (its Service, PDB and NetworkPolicy never pick it)."""
    assert not [o for o in render(helm, tmp_path) if o["metadata"]["name"].endswith("idle-culler")]
    objs = render(helm, tmp_path, {"culler": {"enabled": True, "timeout": 1800, "every": 120, "serviceName": "cull"},
                                   "pdb": {"enabled": True}, "networkPolicy": {"enabled": True}})
    culler = one(objs, "Deployment", "tenancy-idle-culler")
    pod = culler["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "jupyterhub-tenancy:0.1.0"
    assert container["command"] == ["jupyterhub-idle-culler", "--url=http://hub:8081/hub/api",
                                    "--timeout=1800", "--cull-every=120"]
    assert env_of(culler)["JUPYTERHUB_API_TOKEN"] == {
        "secretKeyRef": {"name": "hub", "key": "hub.services.cull.apiToken"}}
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    labels = culler["spec"]["template"]["metadata"]["labels"]
    assert culler["spec"]["selector"]["matchLabels"] == labels
    for selector in (one(objs, "Service", "tenancy")["spec"]["selector"],
                     one(objs, "Deployment", "tenancy")["spec"]["selector"]["matchLabels"],
                     one(objs, "PodDisruptionBudget", "tenancy")["spec"]["selector"]["matchLabels"],
                     one(objs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]):
        assert not selector.items() <= labels.items(), selector
    # the service's pod is not replaced when the culler changes
    assert (one(objs, "Deployment", "tenancy")["spec"]["template"]["metadata"]["annotations"] ==
            one(render(helm, tmp_path), "Deployment", "tenancy")["spec"]["template"]["metadata"]["annotations"])
    # a token under a key of one's own
    objs = render(helm, tmp_path, {"culler": {"enabled": True, "existingSecret": "culler", "existingSecretKey": "token"}})
    assert env_of(one(objs, "Deployment", "tenancy-idle-culler"))["JUPYTERHUB_API_TOKEN"] == {
        "secretKeyRef": {"name": "culler", "key": "token"}}


def test_template_replicas(helm, tmp_path):
    """replicas > 1: leader election on a Lease in the release's namespace (Role + RoleBinding for
    leases, and nothing else), RollingUpdate, the PDB on, the replicas apart, PostgreSQL."""
    values = {"replicas": 2, "database": {"url": "postgresql://tenancy@db.jhub.svc:5432/tenancy"},
              "networkPolicy": {"enabled": True}, "leaderElection": {"leaseDurationSeconds": 20}}
    objs = render(helm, tmp_path, values)
    assert "PersistentVolumeClaim" not in [o["kind"] for o in objs]
    deploy = one(objs, "Deployment", "tenancy")
    spec, pod = deploy["spec"], deploy["spec"]["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    env = env_of(deploy)
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    pdb = one(objs, "PodDisruptionBudget", "tenancy")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": spec["selector"]["matchLabels"]}}
    policy = one(objs, "NetworkPolicy", "tenancy")
    assert {"podSelector": {"matchLabels": spec["selector"]["matchLabels"]}} in policy["spec"]["ingress"][0]["from"]

    role, binding = one(objs, "Role", "tenancy-leader-election"), one(objs, "RoleBinding", "tenancy-leader-election")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "jhub"
    assert rules_of(role) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenancy-leader-election"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tenancy", "namespace": "jhub"}]
    assert rules_of(one(objs, "ClusterRole", "tenancy-jhub")) == {**BACKEND_RULES, **PROVISIONER_RULES}

    c = load_config(one(objs, "ConfigMap", "tenancy"), tmp_path)
    assert c.TenancyService.leader_election is True
    assert (c.TenancyService.lease_name, c.TenancyService.lease_namespace) == ("tenancy", "jhub")
    assert (c.TenancyService.lease_duration_seconds, c.TenancyService.renew_deadline_seconds,
            c.TenancyService.retry_period_seconds) == (20, 10, 2)
    assert c.TenancyService.db_url == values["database"]["url"] or "TENANCY_DB_URL" in os.environ
    assert not_granted(one(objs, "ClusterRole"), c, [role]) == []
    # the lease rules are needed: without the Role they are what is missing
    assert not_granted(one(objs, "ClusterRole"), c) == [(v, "coordination.k8s.io", "leases", "jhub")
                                                      for v in ("get", "create", "update")]

    # the PDB can be turned off; one replica is as before (no lease, Recreate, no PDB)
    objs = render(helm, tmp_path, {**values, "pdb": {"enabled": False}})
    assert "PodDisruptionBudget" not in [o["kind"] for o in objs]
    objs = render(helm, tmp_path, {"replicas": 1, "database": values["database"]})
    assert not [o for o in objs if o["kind"] in ("Role", "RoleBinding", "PodDisruptionBudget")]
    assert one(objs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert "leader_election" not in load_config(one(objs, "ConfigMap"), tmp_path).TenancyService


#: Bad values and what helm says: the key, where it is, and what is wrong.
BAD_VALUES = {
    "wrong type": ({"service": {"port": "http"}}, "at '/service/port': got string, want integer"),
    "unknown key": ({"replica": 2}, "at '': additional properties 'replica' not allowed"),
    "replicas on SQLite": ({"replicas": 2}, "at '/database/url': '' does not match pattern '^postgres"),
    "no replica": ({"replicas": 0}, "at '/replicas': minimum: got 0, want 1"),
    "a typo in a key": ({"training": {"useJob": False}}, "at '/training': additional properties 'useJob' not allowed"),
    "negative": ({"kubernetes": {"createConcurrency": -1}}, "at '/kubernetes/createConcurrency': minimum: got -1, want 1"),
    "negative pdb": ({"pdb": {"maxUnavailable": -1}}, "at '/pdb/maxUnavailable': minimum: got -1, want 0"),
    "not a percentage": ({"pdb": {"minAvailable": "half"}}, "at '/pdb/minAvailable': 'half' does not match pattern"),
    "not one of": ({"quotaTree": {"storage": "nowhere"}}, "at '/quotaTree/storage': value must be one of 'config', 'object'"),
    "a trait that is not an identifier": ({"config": {"KubernetesBackend": {"x = 1; import os; y": 1}}},
                                          "at '/config/KubernetesBackend': additional properties 'x = 1; import os; y' not allowed"),
    "no ServiceAccount name": ({"serviceAccount": {"create": False}}, "at '/serviceAccount/name': minLength: got 0, want 1"),
    "no Secret name": ({"database": {"urlSecret": {"key": "url"}}}, "at '/database/urlSecret': missing property 'name'"),
    "a quantity as a number": ({"provision": {"resourceQuota": {"pods": 5}}},
                               "at '/provision/resourceQuota/pods': got number, want string"),
    "a dataset with two sources": ({"datasets": [{**FASHION_MNIST, "spec": {**FASHION_MNIST["spec"], "source": {
        "claim": "fashion-demo-pvc", "path": "/srv/fashion"}}}]},
        "at '/datasets/0/spec/source': maxProperties: got 2, want 1"),
    "a typo in a dataset": ({"datasets": [{**FASHION_MNIST, "spec": {**FASHION_MNIST["spec"], "readonly": True}}]},
                            "at '/datasets/0/spec': additional properties 'readonly' not allowed"),
    "a dataset of another kind": ({"datasets": [{**FASHION_MNIST, "kind": "PersistentVolume"}]},
                                  "at '/datasets/0/kind': value must be 'Dataset'"),
    "no culler timeout": ({"culler": {"enabled": True, "timeout": 0}}, "at '/culler/timeout': minimum: got 0, want 1"),
}


@pytest.mark.parametrize("case", BAD_VALUES)
def test_bad_values_are_refused_naming_the_key(helm, tmp_path, case):
    values, says = BAD_VALUES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(values))
    out = run_helm(helm, "template", "x", str(CHART), "-f", str(path), ok=False)
    assert out.returncode != 0 and "values don't meet the specifications of the schema" in out.stderr, out.stderr
    assert says in out.stderr, out.stderr
    if case == "negative":  # helm lint --strict refuses them too
        out = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(path), ok=False)
        assert out.returncode != 0 and "1 chart(s) failed" in out.stderr + out.stdout, out.stdout
        assert says in out.stdout, out.stdout


# -- on the cluster ------------------------------------------------------------------------

def kind_of(api: Api, obj: dict) -> Kind:
    """Where objects of this apiVersion/kind live, from the server's discovery."""
    gv = obj["apiVersion"]
    found = api.request("GET", "/api/v1" if gv == "v1" else f"/apis/{gv}")
    for r in found.get("resources") or []:
        if r.get("kind") == obj["kind"] and "/" not in r["name"]:
            return Kind(obj["kind"], gv, r["name"], r["namespaced"])
    raise AssertionError(f"the API server does not serve {gv} {obj['kind']}")


class Calls:
    """Every request an ApiClient makes, with the answer's status: taken where they all leave, at its
    connection pool (the backend sends bodies there itself, not through ``call_api``: api.py)."""

    def __init__(self, api_client):
        self.seen: list[tuple[str, str, int]] = []
        pool = api_client.rest_client.pool_manager
        original = pool.request

        def request(method, url, *args, **kwargs):
            resp = original(method, url, *args, **kwargs)
            self.seen.append((method, urlparse(url).path, resp.status))
            return resp

        pool.request = request

    def refused(self, since=0):
        return [c for c in self.seen[since:] if c[2] in (401, 403)]


def can(sa_client, verb, resource, group="", namespace=None, subresource=None) -> bool:
    review = client.AuthorizationV1Api(sa_client).create_self_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {k: v for k, v in (
            ("verb", verb), ("resource", resource), ("group", group), ("namespace", namespace),
            ("subresource", subresource)) if v is not None}}})
    return review.status.allowed


@pytest.fixture
def release(control_plane, api, helm, seed_classes, tmp_path):
    """The chart installed in a fresh namespace, with a node for it and for training pods;
    everything it and the service made is deleted afterwards (the CRD too, if it made it)."""
    suffix = uuid.uuid4().hex[:6]
    r = types.SimpleNamespace()
    r.suffix, r.namespace, r.name = suffix, f"helm-{suffix}", "tenancy"
    r.team, r.shared, r.instance = f"team-{suffix}", f"shared-{suffix}", f"helm-{suffix}"
    # a letter first: a hex suffix such as 1502e6 would be a number to YAML, and the schema wants a string
    r.node, r.label = f"helm-{suffix}", {"tenancy-test/helm": f"h{suffix}"}
    r.values = {
        "image": {"repository": "registry.invalid/jupyterhub-tenancy"},  # kwok pulls nothing
        "hub": {"apiToken": "t" * 64},
        "nodeSelector": r.label,  # the service's pod and its training pods on the test's node
        "nodes": {"selector": r.label},
        "persistence": {"storageClassName": "-"},  # bound to a PersistentVolume the test makes
        "quotaTree": {"storage": "object", "spec": {"root": {
            "name": "root", "min": {"cpu": "8"}, "max": {"cpu": "8"},
            "children": [{"name": "root.a", "namespaces": [r.team], "min": {"cpu": "4"}, "max": {"cpu": "8"}}]}}},
        "provision": {"instance": r.instance, "sharedNamespace": r.shared,
                      "priorityClasses": [{"name": f"helm-{suffix}", "value": 1234, "description": "helm test"}]},
        "training": {"resyncSeconds": 0.5},
        "kubernetes": {"apiQps": 200, "apiBurst": 300, "createConcurrency": 4},
        "config": {"KubernetesBackend": {"poll_seconds": 0.3}},
        # with one replica a PDB would block drains: here only to see it applied and matching the pod
        "pdb": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
    }
    r.objects = render(helm, tmp_path, r.values, release=r.name, namespace=r.namespace, crds=True)
    core, ext = client.CoreV1Api(api), client.ApiextensionsV1Api(api)
    made_crd = made_dataset_crd = False
    try:
        control_plane.create_namespace(r.namespace)
        control_plane.add_node(r.node, {"cpu": "8", "memory": "32Gi"}, labels=r.label)
        core.create_persistent_volume({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": r.node},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(tmp_path / "pv")},
                     "claimRef": {"namespace": r.namespace, "name": "tenancy-db"}}})
        for crd in (o for o in r.objects if o["kind"] == "CustomResourceDefinition"):
            try:
                ext.create_custom_resource_definition(crd)
                if crd["metadata"]["name"] == CRD_NAME:
                    made_crd = True
                else:
                    made_dataset_crd = True
            except ApiException as err:
                if err.status != 409:
                    raise
        wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                             ext.read_custom_resource_definition(CRD_NAME).status.conditions or []),
                 what="the ElasticQuotaTree CRD established")
        wait_for(lambda: "elasticquotatrees" in Api(api).served_resources("scheduling.sigs.k8s.io/v1beta1"),
                 what="the ElasticQuotaTree CRD served")
        yield r
    finally:
        cleanup(control_plane, api, r, made_crd)
        if made_dataset_crd:
            try:
                ext.delete_custom_resource_definition(DATASET_CRD)
            except ApiException:
                pass


def cleanup(control_plane, api, r, made_crd):
    core, rbac, sched = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.SchedulingV1Api(api)
    instance = Marker(r.instance).selector  # what the provisioner made
    calls = [
        lambda: control_plane.clear_pod_logs(r.team),
        lambda: [core.delete_namespace(n.metadata.name) for n in core.list_namespace(label_selector=instance).items],
        lambda: [sched.delete_priority_class(p.metadata.name)
                 for p in sched.list_priority_class(label_selector=instance).items],
        lambda: core.delete_namespace(r.namespace),
        lambda: rbac.delete_cluster_role_binding(f"{r.name}-{r.namespace}"),
        lambda: rbac.delete_cluster_role(f"{r.name}-{r.namespace}"),
        lambda: core.delete_persistent_volume(r.node),
        lambda: core.delete_node(r.node),
    ]
    for call in calls:
        try:
            call()
        except Exception:  # noqa: BLE001 - best effort: the next one still runs
            pass
    if made_crd:
        # Other tests expect no ElasticQuotaTree CRD: wait until the server no longer serves it.
        client.ApiextensionsV1Api(api).delete_custom_resource_definition(CRD_NAME)
        wait_for(lambda: "scheduling.sigs.k8s.io" not in Api(api).served_versions(), timeout=30,
                 what="the ElasticQuotaTree CRD gone")


def test_chart_applies_and_its_rbac_is_exactly_enough(control_plane, api, helm, release, tmp_path, monkeypatch):
    r = release
    admin = Api(api)
    core = client.CoreV1Api(api)

    # -- helm's own server-side dry run of the install: valid for this API server; the NOTES
    values = tmp_path / "release-values.yaml"
    values.write_text(yaml.safe_dump(r.values))
    out = run_helm(helm, "install", r.name, str(CHART), "--namespace", r.namespace, "-f", str(values),
                   "--dry-run=server", "--kubeconfig", str(control_plane.kubeconfig))
    svc_url = f"http://{r.name}.{r.namespace}.svc:10101"
    assert f"url: {svc_url}\n" in out.stdout and f"tenancy_service_url: {svc_url}/services/tenancy/" in out.stdout
    assert f"instance {r.instance}" in out.stdout

    # -- every rendered object, applied as rendered (the CRD is in already)
    for obj in r.objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue
        kind = kind_of(admin, obj)
        assert not kind.namespaced or obj["metadata"]["namespace"] == r.namespace, obj["metadata"]
        admin.create(kind, obj)

    def service_pod():
        pods = core.list_namespaced_pod(r.namespace, label_selector="app.kubernetes.io/component=scheduler").items
        ready = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == r.node and
                 any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return ready[0] if len(pods) == 1 and ready else None

    wait_for(service_pod, timeout=30, what="the Deployment's pod Running and Ready on the node")
    pod = service_pod()
    assert pod.spec.service_account_name == r.name
    assert {v.name: v.persistent_volume_claim.claim_name for v in pod.spec.volumes
            if v.persistent_volume_claim} == {"data": "tenancy-db"}
    assert core.read_namespaced_persistent_volume_claim("tenancy-db", r.namespace).status.phase == "Bound"
    wait_for(lambda: client.AppsV1Api(api).read_namespaced_deployment(r.name, r.namespace).status.ready_replicas == 1,
             what="the Deployment ready")
    # the PodDisruptionBudget covers exactly that pod (the disruption controller's count)
    wait_for(lambda: (lambda st: st and (st.expected_pods, st.current_healthy) == (1, 1))(
        client.PolicyV1Api(api).read_namespaced_pod_disruption_budget(r.name, r.namespace).status),
        what="the PodDisruptionBudget counting the service's pod")

    # -- the service's identity: the ServiceAccount, as the API server sees it
    sa_user = f"system:serviceaccount:{r.namespace}:{r.name}"
    sa = impersonating(control_plane, sa_user)
    who = client.AuthenticationV1Api(sa).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).status.user_info
    assert who.username == sa_user
    assert set(who.groups) == {"system:serviceaccounts", f"system:serviceaccounts:{r.namespace}", "system:authenticated"}
    calls = Calls(sa)

    # -- the service, wired as in its pod: the Deployment's environment and the ConfigMap's config
    deploy = one(r.objects, "Deployment")
    secret = one(r.objects, "Secret")
    for name, value in env_of(deploy).items():
        if isinstance(value, dict):
            ref = value["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            value = base64.b64decode(secret["data"][ref["key"]]).decode()
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TENANCY_DB_URL", f"sqlite:///{tmp_path}/tenancy.sqlite")  # the volume, here
    config = load_config(one(r.objects, "ConfigMap", r.name), tmp_path)
    # in the pod, KubernetesBackend reads the ServiceAccount's in-cluster credentials
    monkeypatch.setattr(KubernetesBackend, "_default_client", lambda self: sa)

    from tornado.httpclient import AsyncHTTPClient
    from tornado.httpserver import HTTPServer
    from tornado.testing import bind_unused_port

    from hub_ext.service.app import TenancyService

    async def main():
        service = TenancyService(config=config)
        app, controller = service.make_app()  # reads nodes and the cluster's ElasticQuotaTree
        backend = controller.backend
        assert isinstance(backend, KubernetesBackend) and backend.api.api_client is sa
        assert (backend.api_qps, backend.api_burst, backend.create_concurrency) == (200, 300, 4)  # values: kubernetes
        assert [n.name for n in backend.nodes()] == [r.node]  # node_label_selector from the values
        tree_meta = controller.tree_manifest["metadata"]  # the chart's ElasticQuotaTree object, read by the SA
        assert (tree_meta["namespace"], tree_meta["name"]) == (r.namespace, "elasticquotatree")
        assert controller.engine.quota.leaf_of[r.team].name == "root.a"

        sock, port = bind_unused_port()
        server = HTTPServer(app)
        server.add_sockets([sock])
        probe = deploy["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"]
        resp = await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}{probe}")
        assert resp.code == 200 and b'"ok"' in resp.body

        # provisioning a tenant: namespace, Role, RoleBinding, LimitRange, ResourceQuota,
        # the shared namespace's viewer Role and binding, the PriorityClass
        runner = asyncio.ensure_future(backend.run())  # foreign pods, quotas and limits
        controller.set_tenants([Tenant(group=f"team-{r.suffix}", namespace=r.team, leaf="root.a")])
        await until(lambda: backend.provisioned is not None, "the tenant provisioned")
        result = backend.provisioned
        assert result.errors == [] and result.conflicts == [], result.lines()
        assert sorted((a.kind, a.namespace) for a in result.created) == sorted([
            ("Namespace", None), ("Namespace", None), ("PriorityClass", None),
            ("Role", r.team), ("RoleBinding", r.team), ("LimitRange", r.team), ("ResourceQuota", r.team),
            ("Role", r.shared), ("RoleBinding", r.shared)]), result.lines()
        binding = client.RbacAuthorizationV1Api(api).read_namespaced_role_binding(f"{r.team}-binding", r.team)
        assert {(s.kind, s.name) for s in binding.subjects} == {("Group", f"team-{r.suffix}"), ("ServiceAccount", "hub")}
        await asyncio.to_thread(service_account_ready, core, r.team)
        await asyncio.to_thread(quota_ready, core, r.team)

        # the namespaces' ResourceQuota and LimitRange, read into the scheduler; the service's
        # own pod (on the node, made by no workload of ours) counted as usage
        await until(lambda: {("ResourceQuota", r.team, "dev-quota"), ("LimitRange", r.team, "tenancy-defaults")}
                    <= set(backend.foreign.limits_applied), "the tenant's quota and limits read")
        await until(lambda: pod.metadata.uid in controller.foreign, "the service's own pod counted")

        # a training Job runs; a higher-priority one in the same leaf evicts it through the Eviction API
        log = control_plane.append_log(tmp_path / "train.log", "epoch 1: loss 0.5")
        await asyncio.to_thread(control_plane.set_pod_logs, r.team, None, log)
        res = {"requests": {"cpu": "5", "memory": "1Gi"}, "limits": {"cpu": "5", "memory": "1Gi"}}
        low = controller.submit(ADMIN, {"kind": "training", "namespace": r.team, "name": "low", "command": ["sleep", "1h"],
                                        "priorityClassName": "low-priority-dev", "gracePeriodSeconds": 1, "resources": res})
        await until(lambda: controller.view(low)["state"] == "Running" and running(api, r.team, "low"),
                    "the low-priority Job running", tick=controller.tick)
        assert "epoch 1" in await asyncio.to_thread(backend.logs, low, low.pods[0])
        high = controller.submit(ADMIN, {"kind": "training", "namespace": r.team, "name": "high", "command": ["sleep", "1h"],
                                         "priorityClassName": "critical-prod", "resources": res})
        await until(lambda: running(api, r.team, "high") and not running(api, r.team, "low")
                    and controller.view(high)["state"] == "Running", "the high-priority Job running instead",
                    tick=controller.tick)
        assert controller.view(low)["state"] == "Pending"
        evictions = [c for c in calls.seen if c[0] == "POST" and c[1].endswith("/eviction")]
        assert [(p.rsplit("/", 2)[-2].startswith("low-"), s) for _, p, s in evictions] == [(True, 201)], evictions
        jobs = await asyncio.to_thread(client.BatchV1Api(api).list_namespaced_job, r.team)
        assert [j.metadata.name.split("-")[0] for j in jobs.items] == ["high"]  # the evicted Job was deleted
        # why a Job would have no pod: the namespace's events
        await asyncio.to_thread(backend.api.request, "GET", f"/api/v1/namespaces/{r.team}/events",
                                query={"fieldSelector": "reason=FailedCreate"})

        # nothing the service did was refused
        assert calls.refused() == [], calls.refused()
        assert {m for m, _, _ in calls.seen} >= {"GET", "POST", "DELETE"}

        # -- not cluster-admin: only the chart's rules
        for (group, resource), granted in {**BACKEND_RULES, **PROVISIONER_RULES}.items():
            name, _, sub = resource.partition("/")
            for verb in granted:
                assert can(sa, verb, name, group, subresource=sub or None), (verb, resource)
        for verb, resource, group, ns, sub in [
                ("get", "secrets", "", r.namespace, None), ("list", "secrets", "", None, None),
                ("get", "configmaps", "", "kube-system", None), ("create", "deployments", "apps", r.team, None),
                ("update", "pods", "", r.team, None), ("patch", "pods", "", r.team, None),
                ("create", "pods", "", r.team, "exec"), ("create", "serviceaccounts", "", r.team, "token"),
                ("delete", "nodes", "", None, None), ("update", "jobs", "batch", r.team, None),
                ("create", "clusterroles", "rbac.authorization.k8s.io", None, None),
                ("create", "clusterrolebindings", "rbac.authorization.k8s.io", None, None),
                ("bind", "clusterroles", "rbac.authorization.k8s.io", None, None),
                ("create", "elasticquotatrees", "scheduling.sigs.k8s.io", r.namespace, None),
                ("delete", "customresourcedefinitions", "apiextensions.k8s.io", None, None)]:
            assert not can(sa, verb, resource, group, ns, sub), (verb, resource, sub)
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(sa).list_namespaced_secret(r.namespace)
        assert exc.value.status == 403

        # -- without pods/eviction: the eviction is refused, visibly, and falls back to a delete
        rbac = client.RbacAuthorizationV1Api(api)
        role = rbac.read_cluster_role(f"{r.name}-{r.namespace}")
        role.rules = [rule for rule in role.rules if rule.resources != ["pods/eviction"]]
        assert len(role.rules) == len(one(r.objects, "ClusterRole")["rules"]) - 1
        rbac.replace_cluster_role(role.metadata.name, role)
        wait_for(lambda: not can(sa, "create", "pods", subresource="eviction"), what="the eviction rule gone")
        since = len(calls.seen)
        victim = next(p for p in controller.engine.pods.values() if p.namespace == r.team and p.name.startswith("high-"))
        victim_pods = await asyncio.to_thread(core.list_namespaced_pod, r.team,
                                              label_selector=f"{JOB_NAME_LABEL}={victim.name}")
        await backend.evict(high, victim, controller.pod_rows[victim.uid], 0, None)
        after = [(m, p.rsplit("/", 1)[-1], s) for m, p, s in calls.seen[since:] if m in ("POST", "DELETE")]
        pod_name = victim_pods.items[0].metadata.name
        assert after == [("POST", "eviction", 403), ("DELETE", pod_name, 200), ("DELETE", victim.name, 200)], after
        await until(lambda: not running(api, r.team, "high"), "the Job's pods gone")

        runner.cancel()
        for task in list(controller._tasks):
            task.cancel()
        await asyncio.gather(runner, *controller._tasks, return_exceptions=True)
        server.stop()
        # the tenant is gone: what was made for it goes (not its namespace)
        done = await backend.provision_now([])
        assert done.errors == [], done.lines()
        assert {a.kind for a in done.deleted} == {"Role", "RoleBinding", "ResourceQuota", "LimitRange"}, done.lines()
        assert calls.refused(since) == [("POST", f"/api/v1/namespaces/{r.team}/pods/{pod_name}/eviction", 403)]

    try:
        asyncio.run(main())
    finally:
        sa.close()


def running(api, namespace, prefix) -> bool:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return any(p.metadata.name.startswith(prefix + "-") and p.status.phase == "Running"
               and p.metadata.deletion_timestamp is None for p in pods)
