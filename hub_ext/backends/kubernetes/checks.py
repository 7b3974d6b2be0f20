"""Start-up checks of the Kubernetes backend: what must hold on the cluster before anything is admitted.

Each check gives one line naming what is wrong and what to do, or None. A
failing check is reported on ``/api/v1/health`` and blocks admissions (work
waits in the queue with that line as its message) until it passes: better than
admitting a thousand workloads that the API server then refuses one by one.

- ``rbac``: every verb the service uses, asked of the API server itself
  (``SelfSubjectAccessReview``), so a chart or Role that lacks one says which (with
  leader election, the Lease's verbs in its namespace too);
- ``priority-classes``: every PriorityClass workloads may use exists on the
  cluster (the API server refuses pods naming a missing one);
- ``quota-tree``: the ``ElasticQuotaTree`` named by ``quota_tree_object`` is
  served (its CRD installed) and readable;
- ``nodes`` (kept by the node watch): Ready, schedulable Nodes match the selector.

``Checks`` runs them: once at start (nothing is admitted before), then every
``checks_seconds`` while they pass, every ``RECHECK_SECONDS`` while one fails.
"""

from __future__ import annotations

import asyncio

from ...quota.errors import ValidationError
from .api import PRIORITY_CLASS, Api, KubernetesError
from .informer import outage_error

#: how often a failing start-up check is tried again
RECHECK_SECONDS = 5.0

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def needed_permissions(backend) -> list[tuple[str, str, str, str | None]]:
    """(verb, API group, resource[/subresource], namespace or None) the backend uses, as configured."""
    out = [("list", "", "nodes", None), ("watch", "", "nodes", None),
           ("get", "", "pods", None), ("list", "", "pods", None), ("watch", "", "pods", None),
           ("create", "", "pods", None), ("delete", "", "pods", None),
           ("create", "", "pods/eviction", None), ("get", "", "pods/log", None),
           ("list", "", "events", None), ("list", "scheduling.k8s.io", "priorityclasses", None)]
    if backend.use_jobs:
        out += [(v, "batch", "jobs", None) for v in ("get", "list", "watch", "create", "delete")]
    if backend.sync_cluster_limits:
        out += [("list", "", "resourcequotas", None), ("list", "", "limitranges", None)]
    if backend.provision:
        out += [(v, "", r, None) for r in ("namespaces", "resourcequotas", "limitranges")
                for v in ("get", "list", "create", "update", "delete")]
        out += [(v, "rbac.authorization.k8s.io", "roles", None)
                for v in ("get", "list", "create", "update", "delete", "escalate", "bind")]
        out += [(v, "rbac.authorization.k8s.io", "rolebindings", None) for v in ("get", "list", "create", "update", "delete")]
        out += [(v, "scheduling.k8s.io", "priorityclasses", None) for v in ("get", "create", "update", "delete")]
    if backend.follow_dataset_objects and backend.dataset_objects.watch is not None:  # the CRD is served
        out += [(v, "tenancy.jupyter.org", "datasets", None) for v in ("get", "list", "watch")]
    if backend.datasets.wanted:  # a volume and a claim per namespace that may use a dataset
        out += [(v, "", "persistentvolumes", None) for v in ("get", "list", "watch", "create", "update", "delete")]
        out += [(v, "", "persistentvolumeclaims", None) for v in ("get", "list", "watch", "create", "delete")]
        out += [("watch", "", "resourcequotas", None)]  # a refused claim is tried again when they change
        if backend.datasets.chosen():  # accelerated: Fluid's objects
            out += [(v, "data.fluid.io", r, None) for r in ("datasets", "alluxioruntimes")
                    for v in ("get", "list", "create", "update", "delete")]
    namespace = lease_namespace_of(backend)
    if namespace is not None:
        out += [(v, "coordination.k8s.io", "leases", namespace) for v in ("get", "create", "update")]
    return out


def lease_namespace_of(backend) -> str | None:
    """The namespace of the leader election's Lease when the service that runs ``backend`` elects a
    leader (``TenancyService.leader_election``), else None."""
    service = getattr(backend, "parent", None)
    if not getattr(service, "leader_election", False):
        return None
    return service.lease_namespace


def check_rbac(api: Api, needed) -> str | None:
    """One line naming every permission the service's identity lacks, or None."""
    missing = []
    for verb, group, resource, namespace in needed:
        res, _, sub = resource.partition("/")
        attrs = {"verb": verb, "group": group, "resource": res}
        if sub:
            attrs["subresource"] = sub
        if namespace:
            attrs["namespace"] = namespace
        review = api.request("POST", SSAR, body={"apiVersion": "authorization.k8s.io/v1",
                                                  "kind": "SelfSubjectAccessReview",
                                                  "spec": {"resourceAttributes": attrs}})
        if not (review.get("status") or {}).get("allowed"):
            where = f"in {namespace}" if namespace else "cluster-wide"
            missing.append(f"{verb} {group + '/' if group else ''}{resource} ({where})")
    if not missing:
        return None
    return (f"the service's Kubernetes identity may not {', '.join(missing)}: grant these "
            "(the chart's ClusterRole and Role have them) and the service goes on by itself")


def check_priority_classes(api: Api, classes: dict, provision: bool) -> tuple[str | None, str | None]:
    """(blocking problem, warning) about the PriorityClasses workloads may use (``classes``: name -> class)."""
    found = {obj["metadata"]["name"]: obj for obj in api.list(PRIORITY_CLASS)}
    missing = sorted(name for name in classes if name not in found)
    differ = sorted(f"{name} ({found[name].get('value')} on the cluster, {pc.value} here)"
                    for name, pc in classes.items() if name in found and found[name].get("value") != pc.value)
    problem = None
    if missing:
        todo = ("they are being provisioned (KubernetesBackend.provision)" if provision else
                "create them (the chart's priorityClasses.create does) or turn on KubernetesBackend.provision")
        problem = (f"PriorityClass{'es' if len(missing) > 1 else ''} {', '.join(missing)} "
                   f"{'are' if len(missing) > 1 else 'is'} missing on the cluster, so the API server would refuse "
                   f"pods that use them: {todo}")
    warning = None
    if differ:
        warning = (f"PriorityClass values differ from the scheduler's: {', '.join(differ)}; kube-scheduler "
                   "orders and preempts by the cluster's values")
    return problem, warning


def check_quota_tree(backend) -> str | None:
    """A problem when ``quota_tree_object`` names a tree the cluster does not serve or hold."""
    namespace, _, name = backend.quota_tree_object.partition("/")
    if not name or not backend.quota_tree_object:
        return None  # "namespace/" (the default): a tree if there is one, none is fine
    from .quotatree import quota_tree_kind

    try:
        kind = quota_tree_kind(backend.api)
    except KubernetesError as err:
        return f"cannot look for the ElasticQuotaTree CRD: {err}"
    if kind is None:
        return (f"KubernetesBackend.quota_tree_object names {backend.quota_tree_object}, but the cluster does not "
                "serve ElasticQuotaTree (scheduling.sigs.k8s.io): install the CRD (helm/crds/elasticquotatree.yaml) "
                "or empty the option")
    if backend.api.read(kind, namespace or "kube-system", name) is None:
        return f"the ElasticQuotaTree {backend.quota_tree_object} does not exist: create it or fix KubernetesBackend.quota_tree_object"
    return None


class Checks:
    """The start-up checks of a ``KubernetesBackend``, run again until they pass and while they do."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller, calls, quota tree and watches
        self.checked = asyncio.Event()  # the start-up checks ran once

    async def run(self) -> None:
        backend = self.backend
        while True:
            ok = await self.now()
            if not self.checked.is_set() and backend.monitor.up:
                self.checked.set()
                backend.controller.health.set("startup-checks", None, log=False)
            await asyncio.sleep(backend.checks_seconds if ok else RECHECK_SECONDS)

    async def now(self) -> bool:
        """Run the start-up checks once; True when every one passes (each one's problem is on the
        controller's health, as one line)."""
        backend = self.backend
        health = getattr(backend.controller, "health", None)
        if health is None:
            return True
        ok = True

        async def one(name: str, fn, *args):
            nonlocal ok
            try:
                problem = await backend.calls.call(fn, *args)
            except KubernetesError as err:
                if outage_error(err):
                    ok = False
                    return None  # the API server is down: the monitor says so, the check waits
                problem = f"cannot check: {err}"
            except ValidationError as err:
                problem = str(err)
            health.set(name, problem)
            ok = ok and problem is None
            return problem

        denied = "rbac" in health.problems
        if await one("rbac", check_rbac, backend.api, needed_permissions(backend)) is None and denied and ok:
            backend.kick_watches()  # refused until now: list again at once, not after their backoff
        classes = dict(backend.controller.engine.classes.by_name)
        await one("priority-classes", lambda: self.priority_problem(classes))
        await one("quota-tree", self.quota_tree_problem)
        return ok

    def priority_problem(self, classes) -> str | None:
        """The blocking problem with the PriorityClasses; a warning goes on the health as it is (a worker thread)."""
        backend = self.backend
        problem, warning = check_priority_classes(backend.api, classes, backend.provision)
        health = backend.controller.health
        backend.calls.on_loop(health.set, "priority-class-values", warning, blocking=False)
        return problem

    def quota_tree_problem(self) -> str | None:
        return self.backend.tree.read_again() or check_quota_tree(self.backend)
