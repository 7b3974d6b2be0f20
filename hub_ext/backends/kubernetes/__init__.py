"""The Kubernetes backend: tenants provisioned from hub groups, the quota tree read from the cluster.

- ``provision.Provisioner``: Namespace, RBAC, ResourceQuota, LimitRange and
  PriorityClasses per tenant, idempotent, repairing drift, touching only what it created.
- ``quotatree.load_quota_tree``: the ``ElasticQuotaTree`` object, when the CRD exists.
- ``api``: the small JSON/REST layer both use (one-line ``KubernetesError``, discovery).
"""

from .api import KubernetesError
from .provision import Action, ProvisionResult, Provisioner
from .quotatree import load_quota_tree

__all__ = ["Action", "KubernetesError", "ProvisionResult", "Provisioner", "load_quota_tree"]
