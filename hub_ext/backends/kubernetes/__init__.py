"""The Kubernetes backend: tenants provisioned from hub groups, the quota tree read from the cluster.

- ``provision.Provisioner``: Namespace, RBAC, ResourceQuota, LimitRange and
  PriorityClasses per tenant, idempotent, repairing drift, touching only what it created.
- ``quotatree.load_quota_tree``: the ``ElasticQuotaTree`` object, when the CRD exists.
- ``backend.KubernetesBackend``: the scheduler service's backend for a cluster
  (``c.TenancyService.backend_class = "hub_ext.backends.kubernetes.KubernetesBackend"``),
  a facade over one module per duty (its docstring lists them: ``nodes``, ``training``,
  ``follow``, ``ours``, ``evictions``, ``recovery``, ``foreign``, ``checks``, ``tenants``, ``calls``).
- ``datasets``, ``datasetcrd``, ``mounts``: each dataset's volume and claim per namespace,
  the cluster's ``Dataset`` objects, and how pods mount what their workload uses.
- ``objects``: the labels and names of what we make, and the provisioner's objects.
- ``api``: the small JSON/REST layer they use (one-line ``KubernetesError``, discovery).
"""

from .api import KubernetesError
from .backend import KubernetesBackend
from .provision import Action, ProvisionResult, Provisioner
from .quotatree import load_quota_tree

__all__ = ["Action", "KubernetesBackend", "KubernetesError", "ProvisionResult", "Provisioner", "load_quota_tree"]
