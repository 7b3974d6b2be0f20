"""What ``tenancy replay`` makes on a cluster, under names of its own, and removes afterwards.

Every replay has a run id. The scenario's namespaces become ``<namespace>-<run>``
and its nodes ``<node>-<run>``: kwok nodes (annotated ``kwok.x-k8s.io/node: fake``),
labelled and tainted with the run, so that nothing else lands on them and the
replay's pods land nowhere else. Everything it creates carries the label
``tenancy.jupyter.org/replay: <run>``. PriorityClasses are cluster-wide and named by
the pods, so they keep their names: the missing ones are created (never as the
global default: replayed pods always name their class), the ones that exist are
used as they are. Datasets are cluster-wide too and keep their names; the
namespaces that may use one are the run's, so their PersistentVolumes (named
after the namespace) are the run's, labelled with it. ``Footprint.cleanup`` removes what this replay created, and only that.
"""

from __future__ import annotations

import copy
import json
import time

from ..backends.kubernetes.api import LIMIT_RANGE, NAMESPACE, NODE, POD, PRIORITY_CLASS, RESOURCE_QUOTA, Api, Kind, \
    KubernetesError, describe
from ..quota import meta as m
from ..quota.manifests import flatten
from ..quota.nodes import NodeSpec
from ..quota.priorityclass import PriorityClass
from ..quota.quantity import format_list
from ..quota.dataset import KIND as DATASET_KIND
from ..quota.quantity import parse_quantity
from ..quota.tree import KIND as TREE_KIND
from ..backends.kubernetes.datasets import PV

REPLAY_LABEL = "tenancy.jupyter.org/replay"
#: kwok manages the nodes annotated so (its ``--manage-nodes-with-annotation-selector``)
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_GROUP = "kwok.x-k8s.io"
_CLUSTER_SCOPED = {"PriorityClass", "Node", TREE_KIND, DATASET_KIND}
SERVICE_ACCOUNT = Kind("ServiceAccount", "v1", "serviceaccounts", True)


class ReplayError(Exception):
    """Why a replay cannot go on, as one line that says what to do."""


def _poll(fn, timeout: float, interval: float = 0.25):
    """``fn()`` until it is truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def patch(api: Api, path: str, body: dict) -> None:
    """A JSON merge patch (``Api`` sends only JSON bodies); ``KubernetesError`` on failure."""
    client = api.api_client
    try:
        request = client.param_serialize(method="PATCH", resource_path=path, body=body,
                                         header_params={"Accept": "application/json",
                                                        "Content-Type": "application/merge-patch+json"},
                                         auth_settings=["BearerToken"])
        resp = client.call_api(*request, _request_timeout=api.timeout)
        data = resp.read()
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line
        raise describe(exc) from None
    if not 200 <= resp.status <= 299:
        try:
            message = json.loads(data or b"").get("message") or ""
        except (ValueError, AttributeError):
            message = ""
        raise KubernetesError(f"{resp.status} {resp.reason or ''}: {message}", resp.status)


class Names:
    """The cluster's names of the scenario's namespaces and nodes, and back."""

    def __init__(self, run: str):
        self.run = run
        self._to: dict[str, str] = {}
        self._back: dict[str, str] = {}

    def _map(self, name: str, limit: int) -> str:
        if name not in self._to:
            mapped = f"{name[:limit - len(self.run) - 1].rstrip('-')}-{self.run}"
            if mapped in self._back:
                raise ReplayError(f"names {name} and {self._back[mapped]} are the same once shortened to {mapped}: "
                                  "rename one in the scenario")
            self._to[name], self._back[mapped] = mapped, name
        return self._to[name]

    def namespace(self, name: str) -> str:
        return self._map(name, 63)

    def node(self, name: str) -> str:
        return self._map(f"node:{name}", 253 + 5)[5:]

    def scenario(self, cluster_name: str | None) -> str | None:
        """The scenario's name of a cluster namespace or node (others unchanged)."""
        if cluster_name is None:
            return None
        name = self._back.get(cluster_name) or self._back.get(f"node:{cluster_name}") or cluster_name
        return name[5:] if name.startswith("node:") else name

    def unmap_text(self, value):
        """A message (or a structure of them) with the cluster's names put back to the scenario's."""
        if isinstance(value, str):
            for mapped, name in sorted(self._back.items(), key=lambda kv: -len(kv[0])):
                value = value.replace(mapped, name[5:] if name.startswith("node:") else name)
            return value
        if isinstance(value, dict):
            return {k: self.unmap_text(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.unmap_text(v) for v in value]
        return value

    # -- the scenario document with its namespaces renamed ------------------------------
    def rewrite(self, doc: dict) -> dict:
        """A copy of a (checked) scenario document whose manifests and delete references use the
        cluster's namespace names; lists of manifests come out flat."""
        out = dict(doc)
        out["objects"] = [self._manifest(o) for o in flatten(doc.get("objects") or [], "objects")]
        steps = []
        for raw in doc.get("steps") or []:
            raw = dict(raw)
            if "apply" in raw:
                raw["apply"] = [self._manifest(o) for o in flatten(raw["apply"] or [], "apply")]
            if "delete" in raw:
                raw["delete"] = [self._ref(r) for r in raw["delete"] or []]
            steps.append(raw)
        out["steps"] = steps
        return out

    def _manifest(self, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        kind = obj.get("kind")
        meta = obj.setdefault("metadata", {})
        if kind == "Namespace":
            meta["name"] = self.namespace(meta["name"])
        elif kind == DATASET_KIND:  # cluster-scoped; the namespaces that may use it are the run's
            spec = obj.get("spec") or {}
            if isinstance(spec.get("namespaces"), list):
                spec["namespaces"] = [self.namespace(ns) for ns in spec["namespaces"]]
        elif kind == TREE_KIND:
            stack = [((obj.get("spec") or {}).get("root") or {})]
            while stack:
                node = stack.pop()
                if node.get("namespaces"):
                    node["namespaces"] = [self.namespace(ns) for ns in node["namespaces"]]
                stack.extend(node.get("children") or [])
        elif kind not in _CLUSTER_SCOPED:
            meta["namespace"] = self.namespace(meta.get("namespace") or "default")
        return obj

    def _ref(self, ref: dict) -> dict:
        ref = copy.deepcopy(ref)
        meta = ref.get("metadata") or {}
        kind = ref.get("kind")
        if kind == "Namespace":
            ref["name"] = self.namespace(ref.get("name") or meta.get("name"))
            ref.pop("metadata", None)
        elif kind not in _CLUSTER_SCOPED:
            ref["namespace"] = self.namespace(ref.get("namespace") or meta.get("namespace") or "default")
        return ref


def namespaces_of(doc: dict) -> list[str]:
    """Every namespace a rewritten scenario document names, in order of appearance."""
    out: list[str] = []
    manifests = list(doc.get("objects") or [])
    for step in doc.get("steps") or []:
        manifests += step.get("apply") or []
    for obj in manifests:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Namespace":
            out.append(meta["name"])
        elif obj.get("kind") == TREE_KIND:
            for node in _walk(((obj.get("spec") or {}).get("root") or {})):
                out += node.get("namespaces") or []
        elif obj.get("kind") == DATASET_KIND:
            out += (obj.get("spec") or {}).get("namespaces") or []
        elif meta.get("namespace"):
            out.append(meta["namespace"])
    return list(dict.fromkeys(out))


def _walk(node: dict):
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("children") or [])


class Footprint:
    """Makes the replay's namespaces, nodes, classes and limits on the cluster, and removes them.

    Every method is a blocking call (run it in a thread)."""

    def __init__(self, api: Api, names: Names, log):
        self.api, self.names, self.log = api, names, log
        self.namespaces: list[str] = []
        self.nodes: list[str] = []
        self.classes: list[str] = []
        self.datasets = False  # whether the backend made datasets' PersistentVolumes (labelled with the run)

    @property
    def label(self) -> dict:
        return {REPLAY_LABEL: self.names.run}

    @property
    def selector(self) -> str:
        return f"{REPLAY_LABEL}={self.names.run}"

    @property
    def taint(self) -> dict:
        return {"key": REPLAY_LABEL, "value": self.names.run, "effect": "NoSchedule"}

    # -- kwok and nodes -----------------------------------------------------------------
    def has_kwok(self) -> bool:
        """Whether the cluster shows kwok: its API group is served, or some node is annotated for it."""
        if KWOK_GROUP in self.api.served_versions():
            return True
        nodes = self.api.request("GET", NODE.path(), query={"limit": 500}).get("items") or []
        return any((n["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION) for n in nodes)

    def make_node(self, spec: NodeSpec, timeout: float = 30.0) -> str:
        """A kwok node with the scenario node's allocatable and labels, Ready and free of the not-ready
        taint (which kwok's node does not lift where the node lifecycle controller is off)."""
        name = self.names.node(spec.name)
        resources = {"pods": "110", **format_list(spec.allocatable)}
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", "type": "kwok", **spec.labels, **self.label}},
                "spec": {"taints": [self.taint]},
                "status": {"allocatable": resources, "capacity": resources}}
        self.api.create(NODE, body)
        self.nodes.append(name)

        def ready():
            node = self.api.read(NODE, None, name) or {}
            conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
            if conditions.get("Ready") != "True":
                return None
            taints = (node.get("spec") or {}).get("taints") or []
            stale = [t for t in taints if t.get("key", "").startswith("node.kubernetes.io/")]
            if stale:
                keep = [t for t in taints if t not in stale]
                patch(self.api, NODE.path(None, name), {"spec": {"taints": keep}})
                return None
            return node

        if not _poll(ready, timeout):
            raise ReplayError(f"node {name} did not become Ready within {timeout:.0f} s: is kwok running and managing "
                              f"nodes annotated {KWOK_NODE_ANNOTATION}=fake? (or replay on existing nodes with "
                              "--node-selector)")
        return name

    def existing_nodes(self, selector: str) -> list[dict]:
        return self.api.list(NODE, selector)

    # -- namespaces, classes, limits -------------------------------------------------------
    def make_namespaces(self, names: list[str], timeout: float = 30.0) -> None:
        """Create the namespaces, then wait for their default ServiceAccount (pods are refused until then)."""
        for name in names:
            try:
                self.api.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": name, "labels": dict(self.label)}})
            except KubernetesError as err:
                if err.status == 409:
                    raise ReplayError(f"namespace {name} exists already on the cluster (another replay with the "
                                      "same run id?); run again") from None
                raise
            self.namespaces.append(name)
        for name in names:
            if not _poll(lambda: self.api.read(SERVICE_ACCOUNT, name, "default"), timeout):
                raise ReplayError(f"namespace {name} has no default ServiceAccount after {timeout:.0f} s: is the "
                                  "cluster's controller-manager running?")

    def ensure_priority_class(self, pc: PriorityClass) -> str | None:
        """The class exists on the cluster afterwards; a warning when it exists with another value."""
        found = self.api.read(PRIORITY_CLASS, None, pc.name)
        if found is None:
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": pc.name, "labels": dict(self.label)},
                    "value": pc.value, "globalDefault": False, "preemptionPolicy": pc.preemption_policy,
                    "description": pc.description or "made by tenancy replay"}
            try:
                self.api.create(PRIORITY_CLASS, body)
                self.classes.append(pc.name)
                return None
            except KubernetesError as err:
                if err.status != 409:
                    raise
                found = self.api.read(PRIORITY_CLASS, None, pc.name) or {}
        if found.get("value") != pc.value:
            return (f"PriorityClass {pc.name} has value {found.get('value')} on the cluster and {pc.value} in the "
                    "scenario: kube-scheduler orders and preempts by the cluster's")
        return None

    def put(self, kind_name: str, obj: dict, timeout: float = 30.0) -> None:
        """Create (or replace) a ResourceQuota or LimitRange; a quota is waited for until the
        controller-manager has filled in its status (the API server refuses pods until then)."""
        kind = RESOURCE_QUOTA if kind_name == "ResourceQuota" else LIMIT_RANGE
        body = copy.deepcopy(obj)
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k in ("name", "namespace", "annotations")}
        body["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), **self.label}
        meta = body["metadata"]
        try:
            self.api.create(kind, body)
        except KubernetesError as err:
            if err.status != 409:
                raise
            current = self.api.read(kind, meta["namespace"], meta["name"]) or {"metadata": {}}
            meta["resourceVersion"] = current["metadata"].get("resourceVersion")
            self.api.replace(kind, body)
        if kind is RESOURCE_QUOTA:
            wanted = {k: parse_quantity(v, k) for k, v in ((body.get("spec") or {}).get("hard") or {}).items()}

            def filled():
                # the API server admits against status.hard: a changed quota holds once the
                # controller-manager has copied its new limits there
                status = (self.api.read(kind, meta["namespace"], meta["name"]) or {}).get("status") or {}
                hard = status.get("hard") or {}
                return all(k in hard and parse_quantity(hard[k], k) == v for k, v in wanted.items()) \
                    and "used" in status

            if not _poll(filled, timeout):
                raise ReplayError(f"ResourceQuota {meta['namespace']}/{meta['name']} has no status after {timeout:.0f} s:"
                                  " is the cluster's controller-manager running?")

    def remove(self, kind_name: str, namespace: str | None, name: str) -> None:
        kind = {"ResourceQuota": RESOURCE_QUOTA, "LimitRange": LIMIT_RANGE, "Namespace": NAMESPACE,
                "PriorityClass": PRIORITY_CLASS}[kind_name]
        if kind is PRIORITY_CLASS and name not in self.classes:
            return  # not ours to delete
        self.api.delete(kind, namespace, name)
        if kind is PRIORITY_CLASS:
            self.classes.remove(name)

    def delete_namespace(self, name: str, timeout: float = 60.0) -> None:
        """Delete a namespace of the replay (its pods first, so nothing of it keeps room), and wait for it."""
        self._empty([name], timeout)
        self.api.delete(NAMESPACE, None, name)
        if not _poll(lambda: self.api.read(NAMESPACE, None, name) is None, timeout):
            raise ReplayError(f"namespace {name} is still being deleted after {timeout:.0f} s")
        self.namespaces.remove(name)

    def delete_jobs(self, namespace: str, selector: str) -> None:
        """Delete the Jobs (and so their pods) matching ``selector`` in a namespace of the replay."""
        self.api.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs",
                         query={"labelSelector": selector}, body={"propagationPolicy": "Background"})

    def _empty(self, namespaces: list[str], timeout: float) -> bool:
        """Delete the Jobs and pods of these namespaces (zero grace period); whether they are gone in time."""
        for ns in namespaces:
            self.api.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs",
                             body={"propagationPolicy": "Background", "gracePeriodSeconds": 0})
            self.api.request("DELETE", POD.path(ns), body={"gracePeriodSeconds": 0})
        return bool(_poll(lambda: not any(self.api.list(POD, None, ns) for ns in namespaces), timeout, 0.5))

    # -- clean-up ---------------------------------------------------------------------------
    def cleanup(self, timeout: float = 60.0) -> list[str]:
        """Remove what this replay made: Jobs and pods first (gone before their nodes), then the nodes,
        the namespaces and the PriorityClasses no other pod uses. The problems, one line each."""
        problems = []

        def attempt(what, fn, *args) -> bool:
            try:
                if fn(*args) is False:
                    problems.append(f"{what}: not done after {timeout:.0f} s")
                    return False
                return True
            except (KubernetesError, ReplayError) as err:
                problems.append(f"{what}: {err}")
                return False

        if self.namespaces:
            attempt(f"deleting the pods of {', '.join(self.namespaces)}", self._empty, list(self.namespaces), timeout)
        for name in list(self.nodes):
            if attempt(f"deleting node {name}", self.api.delete, NODE, None, name):
                self.nodes.remove(name)
        for name in list(self.namespaces):
            if attempt(f"deleting namespace {name}", self.api.delete, NAMESPACE, None, name):
                self.namespaces.remove(name)
        # the datasets' PersistentVolumes (cluster-scoped; their claims go with the namespaces)
        volumes: list = []
        if self.datasets and attempt("listing the datasets' PersistentVolumes", lambda: volumes.extend(self.api.list(PV, self.selector))):
            for pv in volumes:
                attempt(f"deleting PersistentVolume {pv['metadata']['name']}", self.api.delete, PV, None,
                        pv["metadata"]["name"])
        pods: list = []
        if self.classes and attempt("listing pods (to keep the PriorityClasses in use)",
                                    lambda: pods.extend(self.api.list(POD))):
            used = {(p.get("spec") or {}).get("priorityClassName") for p in pods
                    if (p["metadata"].get("labels") or {}).get(REPLAY_LABEL) != self.names.run}
            for name in [c for c in self.classes if c not in used]:  # one another workload uses now stays
                if attempt(f"deleting PriorityClass {name}", self.api.delete, PRIORITY_CLASS, None, name):
                    self.classes.remove(name)
        return problems


def check_node_selector(selector: str) -> dict[str, str]:
    """``key=value,...`` as a dict (it becomes the pods' ``nodeSelector``)."""
    out = {}
    for part in selector.split(","):
        key, eq, value = part.strip().partition("=")
        key, value = key.strip(), value.strip().lstrip("=")
        if not eq or not key or not value or "!" in key:
            raise ReplayError(f"--node-selector {selector!r}: give labels as key=value[,key=value...]")
        try:
            m.string_map({key: value}, "--node-selector")
        except Exception as err:  # noqa: BLE001 - a message, not a traceback
            raise ReplayError(f"--node-selector {selector!r}: {err}") from None
        out[key] = value
    return out
