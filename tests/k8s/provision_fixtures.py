"""Helpers and fixtures for the tests in tests/k8s (imported there, not a conftest).

Every test provisions under its own instance name, namespaces and shared namespace,
so tests stay independent in the session's one cluster; teardown deletes what the
instance labelled (namespaces, PriorityClasses) straight through the API.
"""

from __future__ import annotations

import functools
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from hub_ext.backends.kubernetes import Provisioner
from hub_ext.backends.kubernetes.objects import INSTANCE, MANAGED_BY, MANAGER
from hub_ext.tenants import Tenant

import waiting


#: the waits of these tests: a check calls the API server (in a thread, off the loop), and an
#: ApiException (an object not there yet) counts as "not yet"
until = functools.partial(waiting.until, in_thread=True)
wait_for = functools.partial(waiting.wait_for, ignore=ApiException)


def pod(name, *, cpu=None, memory=None):
    """A pod that never gets scheduled (no node has the selector); requests = limits when given."""
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources = client.V1ResourceRequirements(requests=amounts, limits=amounts) if amounts else None
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="registry.invalid/notebook:1", resources=resources)],
            node_selector={"tenancy-test/never": "true"},
        ),
    )


def impersonating(control_plane, user, *groups):
    """An admin client that acts as ``user`` in ``groups`` (Impersonate-User / Impersonate-Group)."""
    api = control_plane.api_client()
    api.set_default_header("Impersonate-User", user)
    for group in groups:  # one header value per group is all the tests need
        api.set_default_header("Impersonate-Group", group)
    return api


def quota_ready(core, namespace, name="dev-quota"):
    """The quota controller has filled in status (before that, admission rejects pods)."""
    def ready():
        q = core.read_namespaced_resource_quota(name, namespace)
        return q if (q.status and q.status.hard) == q.spec.hard and q.status.used is not None else None
    return wait_for(ready, what=f"ResourceQuota {namespace}/{name} status")


def service_account_ready(core, namespace):
    wait_for(lambda: core.read_namespaced_service_account("default", namespace), what=f"ServiceAccount {namespace}/default")


class Setup:
    """Names unique to one test, and a factory of Provisioners for them."""

    def __init__(self, api):
        self.api = api
        self.suffix = uuid.uuid4().hex[:6]
        self.instance = f"test-{self.suffix}"
        self.shared = f"production-{self.suffix}"
        self.extra_namespaces: list[str] = []

    def ns(self, stem: str) -> str:
        return f"{stem}-{self.suffix}"

    def tenant(self, group: str, stem: str, leaf: str | None = None, **kw) -> Tenant:
        return Tenant(group=group, namespace=self.ns(stem), leaf=leaf, **kw)

    def provisioner(self, **traits) -> Provisioner:
        traits.setdefault("priority_classes", [])  # cluster-wide: only the test that checks them makes them
        traits.setdefault("api_client", self.api)
        return Provisioner(instance=self.instance, shared_namespace=self.shared, **traits)

    def cleanup(self):
        core, sched = client.CoreV1Api(self.api), client.SchedulingV1Api(self.api)
        selector = f"{MANAGED_BY}={MANAGER},{INSTANCE}={self.instance}"
        names = {n.metadata.name for n in core.list_namespace(label_selector=selector).items}
        for name in names | set(self.extra_namespaces):
            try:
                core.delete_namespace(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for pc in sched.list_priority_class(label_selector=selector).items:
            sched.delete_priority_class(pc.metadata.name)


@pytest.fixture
def setup(control_plane, api):
    s = Setup(api)
    yield s
    s.cleanup()


@pytest.fixture(scope="module")
def alpha_beta(control_plane, api):
    """Two tenants provisioned once (with the seed's PriorityClasses and the hub's service account),
    shared by the tests that only read the result or work inside the namespaces."""
    s = Setup(api)
    s.alpha = s.tenant("data-science-alpha", "team-alpha", leaf="root.a.1")
    s.beta = s.tenant("data-science-beta", "team-beta", leaf="root.b.1")
    s.hub_sa = f"{s.ns('hub')}/tenancy-hub"
    s.prov = s.provisioner(priority_classes=Provisioner().priority_classes, hub_service_account=s.hub_sa)
    s.first = s.prov.reconcile([s.alpha, s.beta])
    core = client.CoreV1Api(api)
    for ns in (s.alpha.namespace, s.beta.namespace):
        service_account_ready(core, ns)
        quota_ready(core, ns)
    yield s
    s.cleanup()
