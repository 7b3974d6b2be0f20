"""Load the quota tree from the cluster's ``ElasticQuotaTree`` object, when there is one.

ACK (and Koordinator's elastic quota) keep the tree as one ``ElasticQuotaTree``
custom resource (``scheduling.sigs.k8s.io/v1beta1``, usually
``kube-system/elasticquotatree``). When the CRD is not installed, there is no tree
(``None``): every namespace is then outside the tree, as without one.
"""

from __future__ import annotations

from ...quota.errors import ValidationError
from ...quota.tree import API_VERSIONS, KIND, ElasticQuotaTree, parse_tree
from .api import Api, Kind, KubernetesError

GROUP = "scheduling.sigs.k8s.io"
PLURAL = "elasticquotatrees"


def quota_tree_kind(api: Api) -> Kind | None:
    """The served ``ElasticQuotaTree`` kind (v1beta1 preferred to v1alpha1), or None without the CRD."""
    versions = api.served_versions().get(GROUP) or []
    for gv in API_VERSIONS:
        version = gv.rpartition("/")[2]
        if version in versions and PLURAL in api.served_resources(gv):
            return Kind(KIND, gv, PLURAL, True)
    return None


def load_quota_tree(api_client, *, namespace: str = "kube-system", name: str | None = None,
                    timeout: float | None = 15.0) -> ElasticQuotaTree | None:
    """The cluster's quota tree (see ``read_quota_tree``), or None."""
    return read_quota_tree(api_client, namespace=namespace, name=name, timeout=timeout)[0]


def read_quota_tree(api_client, *, namespace: str = "kube-system", name: str | None = None,
                    timeout: float | None = 15.0) -> tuple[ElasticQuotaTree | None, dict | None]:
    """(tree, object) of the cluster's quota tree, parsed and validated, or (None, None) when there is none.

    None when the CRD is not installed, when ``namespace`` holds no tree, or when
    the tree ``name`` does not exist. Several trees and no ``name`` is an error.

    Raises:
        KubernetesError: the API server refused or did not answer (one line).
        ValidationError: the tree is invalid (one line, naming the node and resource).
    """
    api = Api(api_client, timeout)
    kind = quota_tree_kind(api)
    if kind is None:
        return None, None
    if name:
        obj = api.read(kind, namespace, name)
        if obj is None:
            return None, None
    else:
        items = api.list(kind, namespace=namespace)
        if not items:
            return None, None
        if len(items) > 1:
            names = ", ".join(sorted(i["metadata"]["name"] for i in items))
            raise KubernetesError(f"{namespace} holds several {KIND} objects ({names}); name the one to use")
        obj = items[0]
    obj = {"apiVersion": kind.group_version, "kind": KIND, **obj}
    meta = obj.get("metadata") or {}
    try:
        return parse_tree(obj), obj
    except ValidationError as err:
        raise err.within(f"{KIND} {meta.get('namespace')}/{meta.get('name')}") from None
