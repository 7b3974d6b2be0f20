"""What the tests make on the shared control plane: which of their pods run, and removing it all afterwards."""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def running(pods):
    """The pods (client models) the cluster runs: phase Running and not being deleted."""
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def remove(api, namespaces, node: str | None = None) -> None:
    """Delete the namespaces (their pods at once, without grace) and the node; what is gone already is fine."""
    core = client.CoreV1Api(api)
    for ns in namespaces:
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            core.delete_namespace(ns)
        except ApiException:
            pass
    if node is not None:
        try:
            core.delete_node(node)
        except ApiException:
            pass


def dataset_namespaces(control_plane, api, prefix: str, stems):
    """Fresh namespaces ``<prefix>-<stem>-<suffix>`` for a datasets test (a generator for a fixture to
    yield from): afterwards the PersistentVolumes made for them (cluster-scoped, labelled with their
    namespace) and the namespaces, their pods at once, are removed."""
    import uuid

    from hub_ext.backends.kubernetes.datasets import NAMESPACE_LABEL

    suffix = uuid.uuid4().hex[:6]
    names = [f"{prefix}-{stem}-{suffix}" for stem in stems]
    for ns in names:
        control_plane.create_namespace(ns)
    yield names
    core = client.CoreV1Api(api)
    for ns in names:
        for pv in core.list_persistent_volume(label_selector=f"{NAMESPACE_LABEL}={ns}").items:
            core.delete_persistent_volume(pv.metadata.name)
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            core.delete_namespace(ns)
        except ApiException:
            pass


def two_teams(a: str, b: str, leaf_max: str = "20"):
    """root min = max 20 CPU; leaves a (namespace ``a``) and b (``b``) guarantee 10 and may use ``leaf_max``."""
    from hub_ext.quota.tree import parse_tree

    return parse_tree({
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": {"name": "root", "min": {"cpu": "20"}, "max": {"cpu": "20"}, "children": [
            {"name": "a", "min": {"cpu": "10"}, "max": {"cpu": leaf_max}, "namespaces": [a]},
            {"name": "b", "min": {"cpu": "10"}, "max": {"cpu": leaf_max}, "namespaces": [b]},
        ]}}})


def two_team_cluster(control_plane, api, prefix: str, label_key: str):
    """Two fresh namespaces ``<prefix>-a-<suffix>``, ``<prefix>-b-<suffix>`` and a 40-CPU node labelled
    ``{label_key: suffix}`` (a generator for a fixture to yield from: ``(a, b, node, label)``); all
    removed afterwards."""
    import uuid

    suffix = uuid.uuid4().hex[:6]
    a, b = f"{prefix}-a-{suffix}", f"{prefix}-b-{suffix}"
    for ns in (a, b):
        control_plane.create_namespace(ns)
    node, label = f"{prefix}-{suffix}", {label_key: suffix}
    control_plane.add_node(node, {"cpu": "40", "memory": "256Gi"}, labels=label)
    yield a, b, node, label
    remove(api, (a, b), node)
