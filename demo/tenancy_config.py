"""The demo's scheduler service: the second seed's tree, four teams, a 56-CPU virtual node."""

import os

here = os.path.dirname(os.path.abspath(__file__))
state = os.environ.get("TENANCY_DEMO_STATE", os.path.join(here, "..", ".demo"))

c = get_config()  # noqa: F821 - provided by traitlets

c.TenancyService.db_url = f"sqlite:///{state}/tenancy.sqlite"
c.TenancyService.tree_file = os.path.join(here, "quota-tree.yaml")
c.TenancyService.tenant_groups = {
    "team-a": {"tenancy.namespace": "team-a", "tenancy.quota-leaf": "root.a.1"},
    "team-b": {"tenancy.namespace": "team-b", "tenancy.quota-leaf": "root.a.2"},
    "team-c": {"tenancy.namespace": "team-c", "tenancy.quota-leaf": "root.b.1",
               "tenancy.priority-classes": "low-priority-dev,high-priority-research,critical-prod"},
    "team-d": {"tenancy.namespace": "team-d", "tenancy.quota-leaf": "root.b.2"},
    "platform": {"tenancy.namespace": "platform", "tenancy.role": "admin"},
}
c.LocalBackend.data_dir = f"{state}/workloads"
c.LocalBackend.nodes_config = [
    {"name": "local-1", "allocatable": {"cpu": "56", "memory": "128Gi", "nvidia.com/gpu": "4"}},
]
c.LocalBackend.notebook_warning_seconds = float(os.environ.get("TENANCY_NOTEBOOK_WARNING_SECONDS", "10"))
# Namespace hard caps, as the API server would enforce them: team-d may request at most
# 15 CPUs in all (pending work counts too), whatever its quota leaf would lend it.
c.TenancyService.objects = [
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "dev-quota", "namespace": "team-d"},
     "spec": {"hard": {"requests.cpu": "15", "pods": "6"}}},
]
