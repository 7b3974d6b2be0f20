"""Load the quota tree from the cluster's ``ElasticQuotaTree`` object, when there is one.

ACK (and Koordinator's elastic quota) keep the tree as one ``ElasticQuotaTree``
custom resource (``scheduling.sigs.k8s.io/v1beta1``, usually
``kube-system/elasticquotatree``). When the CRD is not installed, there is no tree
(``None``): every namespace is then outside the tree, as without one.

``ClusterTree`` is the backend's copy of ``quota_tree_object``: read at start,
and when the API server did not answer then, read again by the quota-tree check
until it does, and handed to the controller unless the service has a tree of its own.
"""

from __future__ import annotations

from ...quota.errors import ValidationError
from ...quota.tree import API_VERSIONS, KIND, ElasticQuotaTree, parse_tree
from .api import Api, Kind, KubernetesError
from .informer import outage_error

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


class ClusterTree:
    """The ``KubernetesBackend``'s ``quota_tree_object``, read from the cluster."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, API, monitor and controller
        self.unread = False  # it could not be read at start (the API server down)

    def read(self):
        """(tree, manifest) of the cluster's ElasticQuotaTree, or (None, None) when it has none (or it
        cannot be read yet: the API server does not answer; it is read once it does)."""
        backend = self.backend
        if not backend.quota_tree_object:
            return None, None
        namespace, _, name = backend.quota_tree_object.partition("/")
        try:
            return read_quota_tree(backend.api.api_client, namespace=namespace or "kube-system", name=name or None)
        except KubernetesError as err:
            if not outage_error(err):
                raise
            backend.monitor.failed(err, "reading the ElasticQuotaTree")
            self.unread = True
            return None, None

    def tell(self, health) -> None:
        """Say on the controller's health that the tree could not be read at start."""
        if self.unread:
            health.set("quota-tree", "the cluster's ElasticQuotaTree is not read yet (the API server did not "
                                     "answer at start); nothing is admitted until it is")

    def read_again(self) -> str | None:
        """Read the tree if it was not read at start (a worker thread); the problem while it still cannot be."""
        if self.unread:
            tree, manifest = self.read()
            if self.unread and not self.backend.monitor.up:
                return "the cluster's ElasticQuotaTree is not read yet (the API server does not answer)"
            self.unread = False
            if tree is not None:
                self.backend.calls.on_loop(self.adopt, tree, manifest)
        return None

    def adopt(self, tree, manifest) -> None:
        """The controller's tree from now, unless the service has one of its own (on the loop)."""
        backend = self.backend
        controller = backend.controller
        if controller.base_tree is None and not controller.store.setting("tree"):
            controller.tree_manifest = manifest
            controller.set_tree(tree)
            backend.log.info("read the quota tree %s from the cluster", backend.quota_tree_object)
