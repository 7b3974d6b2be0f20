"""``api.Api``'s requests with a body (create, replace, delete) on a real API server: they go out on the
``ApiClient``'s connection pool with its URL, headers and credentials, the body written by orjson
(issue 24: not through ``ApiClient``'s own serialization), and answer as every other request does."""

from __future__ import annotations

import pytest

from hub_ext.backends.kubernetes.api import JOB, POD, Api, Kind, KubernetesError

# What nothing but the test writes: a pod is written by the scheduler too (its PodScheduled condition),
# which would make the version the test read stale before its own replace.
CONFIG_MAP = Kind("ConfigMap", "v1", "configmaps", True)


def _pod(namespace: str, name: str, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "60"],
                                     "env": [{"name": "TENANCY_WORKLOAD", "value": "w-1"}]}],
                     "nodeSelector": {"no-such-node": "true"}}}


def test_create_replace_and_delete_send_their_bodies_as_written(api, namespace):
    kube = Api(api, timeout=20)
    made = kube.create(POD, _pod(namespace, "p-1", {"app": "one", "number": "1"}))
    assert made["metadata"]["labels"] == {"app": "one", "number": "1"}
    assert made["spec"]["containers"][0]["env"] == [{"name": "TENANCY_WORKLOAD", "value": "w-1"}]
    read = kube.read(POD, namespace, "p-1")
    assert read["metadata"]["uid"] == made["metadata"]["uid"]

    kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "c-1", "namespace": namespace, "labels": {"app": "one"}}, "data": {"a": "1"}})
    read = kube.read(CONFIG_MAP, namespace, "c-1")
    changed = {**read, "metadata": {**read["metadata"], "labels": {"app": "two"}}, "data": {"a": "2", "b": "3"}}
    replaced = kube.replace(CONFIG_MAP, changed)
    assert (replaced["metadata"]["labels"], replaced["data"]) == ({"app": "two"}, {"a": "2", "b": "3"})
    with pytest.raises(KubernetesError) as stale:  # the version read before the replace is stale now
        kube.replace(CONFIG_MAP, {**read, "metadata": {**read["metadata"], "labels": {"app": "three"}}})
    assert stale.value.status == 409 and "\n" not in str(stale.value)

    with pytest.raises(KubernetesError) as taken:
        kube.create(POD, _pod(namespace, "p-1", {}))
    assert taken.value.status == 409 and str(taken.value).startswith("409 Conflict: ")

    kube.delete(POD, namespace, "p-1")  # its body says how: in the background
    gone = kube.read(POD, namespace, "p-1")
    assert gone is None or gone["metadata"].get("deletionTimestamp")
    kube.delete(POD, namespace, "p-1")  # already gone (or going): no error either way


def test_a_body_request_carries_the_clients_default_headers(control_plane, namespace):
    """Impersonation is a default header of the ``ApiClient``: a create with a body goes out with it, and the
    API server refuses it for the impersonated user, who may not create Jobs there."""
    client = control_plane.api_client()
    try:
        client.set_default_header("Impersonate-User", "nobody-in-particular")
        with pytest.raises(KubernetesError) as refused:
            Api(client).create(JOB, {"apiVersion": "batch/v1", "kind": "Job",
                                     "metadata": {"name": "j-1", "namespace": namespace},
                                     "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                                         {"name": "main", "image": "busybox"}]}}}})
        assert refused.value.status == 403 and "nobody-in-particular" in str(refused.value)
    finally:
        client.close()
