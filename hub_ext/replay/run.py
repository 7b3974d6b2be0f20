"""``tenancy replay``: a scenario run on a real cluster by the service's own parts, reported as ``simulate`` does.

What runs: the service's ``Controller`` with the ``KubernetesBackend``, in this
process (as ``service`` adapts them). Each workload of the scenario (Deployment, Job, Pod, ...) is one workload
of the service whose owner is the scenario's own (a Deployment keeps its replicas
and replaces an evicted pod, a Job its parallelism and completions, a gang stays
whole), so the engine decides exactly as in ``tenancy simulate``; the backend then
creates a Job per admitted pod, kube-scheduler places it, evictions go through the
Eviction API. The pods are the scenario's pod templates with every container
running the pause image (its resources, priority class, node selector,
tolerations and grace period kept; the rest, such as volumes, dropped). The
scenario's nodes are made as kwok nodes (``cluster``), or ``--node-selector``
picks existing ones. The quota tree is handed to the service in-process (as
``TenancyService.tree_file`` does), never created on the cluster, so a replay
leaves the cluster's own ``ElasticQuotaTree`` alone; ResourceQuotas, LimitRanges,
PriorityClasses and Namespaces are created on the cluster.

Time: the scenario's clock is a virtual clock that moves as ``simulate``'s does,
never with the wall clock (so ``time`` in the output is the simulated one). An
eviction is sent with the scenario's grace period; once its pod is gone from the
API server the eviction completes on the virtual clock at its deadline (the grace
period "passes" as soon as the cluster is done). ``advance N`` moves the clock N
seconds; each pod whose ``tenancy.jupyter.org/duration`` runs out meanwhile is
ended, in time order, by setting its phase to Succeeded on the API server (what
kwok does for a container that exits 0; so durations need kwok nodes), and what
that makes room for starts at that moment. Wall-clock time is only the cluster's
own latency.

Datasets (``datasets.py``): each Dataset object goes to the service's datasets room
(``controller.datasets.apply``) and the Kubernetes backend makes what each
namespace needs (a PersistentVolume and a claim, bound by the cluster's PV
controller; a claim a ResourceQuota forbids is Refused with the API server's
words); ``datasets`` in the report is each pair's state as the backend read it
back. A workload naming datasets is held back as ``simulate`` holds it (the
simulator's gate, ``sim.datasets.Datasets.gate``, over the backend's states):
Rejected (``dataset-not-allowed``) or Pending (``dataset-not-ready``), handed to
the service only once every dataset it names is Bound, and then mounting them.

Each step settles before it is reported: every pod the service admitted is
Running on the API server (or stably Pending there, waiting for kube-scheduler:
reported as such, with a warning), nothing is terminating, every eviction is done,
the service has nothing more to decide, all of it unchanged over a few reads.
The report has ``simulate``'s keys; its pods are read from the API server (phase,
node, requests after the LimitRange's defaults, priority, owner), plus what never
reaches it: pods waiting in the service's queue (Pending, with the reason and
position), pods refused at submission (Rejected; the API server is asked the same
with a dry-run create, and a disagreement is a warning) and this step's victims
(Evicted). Quota ``used`` is summed from the API server's pods.

Why over 500 lines: it is one command's driver, a step's apply, advance and settle
against one cluster, read in order; the parts it drives are elsewhere (the service's
parts in ``service.py``, the cluster's names and clean-up in ``cluster.py``, the report in
``sim/output.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import tempfile
import time

from ..backends.kubernetes.api import POD, Api, KubernetesError
from ..backends.kubernetes.follow import waiting_message
from ..backends.kubernetes.foreign import pod_spec_of
from ..backends.kubernetes.objects import JOB_NAME_LABEL, WORKLOAD_LABEL, key_of
from ..quota.dataset import Dataset
from ..quota.errors import ValidationError
from ..quota.limitrange import LimitRange
from ..quota.manifests import read_file
from ..quota.namespace import Namespace
from ..quota.nodes import NodeSpec, parse_node
from ..quota.priorityclass import SEED_CLASSES, PriorityClass
from ..quota.quantity import add_into, format_list
from ..quota.resourcequota import ResourceQuota
from ..quota.tree import ElasticQuotaTree
from ..quota.workloads import DURATION_ANNOTATION, WorkloadSpec
from ..scheduler.model import DATASET_NOT_ALLOWED, Phase
from ..scheduler.owners import Owner
from ..service.identity import Identity
from ..service.store import Store, WorkloadRow
from ..service.workloads import TRAINING, check_datasets_field
from .datasets import ReplayDatasets
from .cluster import KWOK_NODE_ANNOTATION, Footprint, Names, ReplayError, check_node_selector, \
    namespaces_of, patch
from ..sim.scenario import Ref, load_scenario, parse_scenario
from .service import OWNER_ANNOTATION, PAUSE_IMAGE, ReplayBackend, ReplayController, VirtualClock

ADMIN = Identity(name="replay", admin=True)
POLL = 0.2  # seconds between reads while a step settles
STABLE = 2  # settled reads, each the same as the one before, that end a step
STABLE_UNSCHEDULED = 15  # ... when a pod waits for kube-scheduler (it retries with a backoff)
#: a row's "replicas" for owners that never complete (a Deployment's pods may succeed and be replaced)
FOREVER = 2**31 - 1


def _pod_template(raw: dict) -> dict:
    """The raw pod spec of a workload manifest."""
    if raw.get("kind") == "Pod":
        return raw.get("spec") or {}
    return ((raw.get("spec") or {}).get("template") or {}).get("spec") or {}


class Replay(ReplayDatasets):
    """One replay of a scenario file on a cluster; ``run()`` yields one report per step."""

    def __init__(self, path: str, *, kubeconfig: str, context: str | None = None, node_selector: str | None = None,
                 keep: bool = False, timeout: float = 120.0, log=None):
        self.path, self.kubeconfig, self.context = path, kubeconfig, context
        self.node_selector = check_node_selector(node_selector) if node_selector else None
        self.keep, self.timeout = keep, timeout
        self.log = log or logging.getLogger("tenancy.replay")
        self.scenario = load_scenario(path)  # checked whole before the cluster is touched
        self.names = Names(secrets.token_hex(3))
        try:
            doc = self.names.rewrite(read_file(path)[0])
            self.cluster_scenario = parse_scenario(doc)
        except ValidationError as err:
            raise err.within(path) from None
        self.doc = doc
        self.clock = VirtualClock()
        self.warnings: list[str] = []  # for the whole replay
        self._notes: list[str] = []  # for this step
        self.api_client = self.api = self.footprint = self.backend = self.controller = self.store = None
        self._tmp = None
        self._backend_task = None
        self.rows: dict[tuple[str, str, str], WorkloadRow] = {}  # (kind, cluster namespace, name) -> its row
        self.held: dict[tuple[str, str, str], tuple[dict, WorkloadSpec]] = {}  # waiting for their datasets
        self.templates: dict[str, tuple[dict, str]] = {}
        self._order: dict[tuple[str, str], tuple] = {}  # (namespace, pod name) -> (created, uid): report order

    @property
    def run_id(self) -> str:
        return self.names.run

    # -- the whole run ------------------------------------------------------------------
    async def run(self):
        """Set up, yield one report (a JSON-ready dict, as ``simulate --json`` prints) per step, clean up."""
        try:
            await self._open()
            for i, step in enumerate(self.cluster_scenario.steps):
                try:
                    yield await self._step(i, self.scenario.steps[i], step, self.doc["steps"][i])
                except ValidationError as err:
                    raise err.within(f"steps[{i}]") from None
        except ValidationError as err:  # in the scenario's names, not the cluster's
            raise ValidationError(self.names.unmap_text(str(err))) from None
        except KubernetesError as err:
            raise ReplayError(f"the cluster refused or failed: {err}") from None
        finally:
            await self._close()

    async def _open(self) -> None:
        self.api_client = _api_client(self.kubeconfig, self.context)
        self.api = Api(self.api_client, timeout=30)
        await asyncio.to_thread(self._probe)
        self.footprint = fp = Footprint(self.api, self.names, self.log)
        selector, node_selector, tolerations = await self._nodes()
        classes = {pc.name: pc for pc in SEED_CLASSES}
        for step_objects in [self.cluster_scenario.objects] + [s.objects for s in self.cluster_scenario.steps]:
            classes.update((o.name, o) for o in step_objects if isinstance(o, PriorityClass))
        for pc in classes.values():
            self._warn(await asyncio.to_thread(fp.ensure_priority_class, pc))
        await asyncio.to_thread(fp.make_namespaces, namespaces_of(self.doc))
        self._tmp = tempfile.TemporaryDirectory(prefix="tenancy-replay-")
        self.store = Store(f"sqlite:///{os.path.join(self._tmp.name, 'replay.sqlite')}")
        self.backend = ReplayBackend(
            self.templates, api_client=self.api_client, node_label_selector=selector, node_selector=node_selector,
            tolerations=tolerations, extra_labels=fp.label, quota_tree_object="", poll_seconds=0.3,
            relist_seconds=60, log=self.log)
        self.controller = ReplayController(store=self.store, backend=self.backend, tree=None, log=self.log,
                                           clock=self.clock)
        for raw, obj in zip(self.doc["objects"], self.cluster_scenario.objects):
            await self._apply(raw, obj)
        self._backend_task = asyncio.ensure_future(self.backend.run())
        await self._ready()
        await self._settle()
        self.controller.evictions.clear()
        self.controller.failures.clear()

    def _probe(self) -> None:
        try:
            self.api.with_timeout(10).request("GET", "/version")
        except KubernetesError as err:
            host = self.api_client.configuration.host
            if err.status is None:
                raise ReplayError(f"cannot reach the cluster at {host} ({self.kubeconfig}): {err}") from None
            if err.status in (401, 403):
                raise ReplayError(f"the cluster at {host} refuses the credentials of {self.kubeconfig}: {err}") from None
            raise

    async def _nodes(self) -> tuple[str, dict, list]:
        """Make the scenario's nodes (kwok) or pick existing ones; the backend's node label selector,
        the pods' node selector and tolerations."""
        fp = self.footprint
        durations = any(isinstance(o, WorkloadSpec) and o.duration_seconds is not None
                        for objects in [self.cluster_scenario.objects] + [s.objects for s in self.cluster_scenario.steps]
                        for o in objects)
        if self.node_selector:
            selector = ",".join(f"{k}={v}" for k, v in self.node_selector.items())
            nodes = await asyncio.to_thread(fp.existing_nodes, selector)
            if not nodes:
                raise ReplayError(f"--node-selector {selector}: no node of the cluster has these labels")
            fake = [n for n in nodes if (n["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION)]
            if durations and len(fake) < len(nodes):
                raise ReplayError(f"the scenario's pods have durations ({DURATION_ANNOTATION}), which a "
                                  "replay drives by ending pods on the API server: that needs kwok nodes, and "
                                  f"--node-selector {selector} picks nodes that kwok does not manage")
            self._warn(None if self._same_capacity(nodes) else
                       f"the nodes picked by --node-selector {selector} do not have the scenario's capacity: the "
                       "counts may differ from tenancy simulate's")
            return selector, dict(self.node_selector), []
        if self.cluster_scenario.nodes and not await asyncio.to_thread(fp.has_kwok):
            raise ReplayError("the cluster shows no kwok (no kwok.x-k8s.io API, no node annotated "
                              f"{KWOK_NODE_ANNOTATION}): replay makes the scenario's nodes as kwok nodes; run kwok, or "
                              "replay on existing nodes with --node-selector")
        for node in self.cluster_scenario.nodes:
            await asyncio.to_thread(fp.make_node, node)
        return fp.selector, dict(fp.label), [{**fp.taint, "operator": "Equal"}]

    def _same_capacity(self, nodes: list[dict]) -> bool:
        have = sorted(sorted(parse_node({"name": n["metadata"]["name"], "allocatable": {
            k: v for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()
            if k != "pods" and not k.startswith("hugepages-")}}).allocatable.items()) for n in nodes)
        want = sorted(sorted(n.allocatable.items()) for n in self.cluster_scenario.nodes)
        return have == want

    async def _ready(self) -> None:
        """Until the backend's start-up checks passed and it has read the cluster's pods and limits."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.backend.checked.is_set() and self.backend.synced.is_set() and not self.controller.health.blocking:
                return
            await asyncio.sleep(POLL)
        blocking = "; ".join(self.controller.health.blocking) or "the start-up checks did not finish"
        raise ReplayError(f"the service would not admit anything on this cluster: {blocking}")

    async def _close(self) -> None:
        if self.controller is not None:
            self.controller.close()
        if self._backend_task is not None:
            self._backend_task.cancel()
        tasks = [self._backend_task] if self._backend_task is not None else []
        if self.controller is not None:
            tasks += list(self.controller._tasks)
            for task in self.controller._tasks:
                task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.footprint is not None:
            if self.keep:
                self.log.warning("kept on the cluster (--keep): namespaces %s, nodes %s; remove them with kubectl "
                                 "delete namespace,node,priorityclass -l %s", ", ".join(self.footprint.namespaces)
                                 or "none", ", ".join(self.footprint.nodes) or "none", self.footprint.selector)
            else:
                for problem in await asyncio.to_thread(self.footprint.cleanup):
                    self.log.warning("clean-up: %s", problem)
        if self.backend is not None:
            self.backend._executor.shutdown(wait=False, cancel_futures=True)
        if self.store is not None:
            self.store.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        if self.api_client is not None:
            self.api_client.close()

    def _warn(self, warning: str | None, step: bool = False) -> None:
        notes = self._notes if step else self.warnings
        if warning and warning not in notes:
            notes.append(warning)

    # -- one step -------------------------------------------------------------------------
    async def _step(self, index: int, shown, step, raw_step: dict) -> dict:
        self.controller.evictions.clear()
        self.controller.failures.clear()
        self._notes = []
        if step.action == "apply":
            for raw, obj in zip(raw_step["apply"], step.objects):
                await self._apply(raw, obj)
        elif step.action == "delete":
            for ref in step.refs:
                await self._delete(ref)
        else:
            await self._run_events(self.clock.now + step.seconds)
        snapshot = await self._settle()
        report = await self._report(index, shown, snapshot)
        self._forget_refused()
        return report

    async def _apply(self, raw: dict, obj) -> None:
        controller, fp = self.controller, self.footprint
        if isinstance(obj, NodeSpec):
            if self.node_selector:
                raise ValidationError(f"node {self.names.scenario(obj.name)}: with --node-selector the replay "
                                      "makes no nodes")
            name = await asyncio.to_thread(fp.make_node, obj)
            await self._until(lambda: name in controller.engine.cluster.nodes, f"node {name} counted by the service")
        elif isinstance(obj, ElasticQuotaTree):
            controller.set_tree(obj)
        elif isinstance(obj, (ResourceQuota, LimitRange)):
            await asyncio.to_thread(fp.put, raw["kind"], raw)
            controller.apply_object(obj)
        elif isinstance(obj, PriorityClass):
            self._warn(await asyncio.to_thread(fp.ensure_priority_class, obj))
            controller.apply_object(obj)
        elif isinstance(obj, Namespace):
            if obj.name not in fp.namespaces:
                await asyncio.to_thread(fp.make_namespaces, [obj.name])
        elif isinstance(obj, Dataset):
            self._room().apply(obj, "config")
            fp.datasets = True
            self._datasets_changed()
        elif isinstance(obj, WorkloadSpec):
            if obj.datasets and obj.key not in self.rows:
                self.held[obj.key] = (raw, obj)  # handed to the service once its datasets are Bound
                self._release_held()
            else:
                self._add_workload(raw, obj)

    def _add_workload(self, raw: dict, spec: WorkloadSpec) -> None:
        """The scenario's workload as one of the service's, with the scenario's owner for its pods."""
        controller = self.controller
        now = self.clock()
        owner_ref = "" if spec.kind == "Pod" else f"{spec.kind}/{spec.name}"
        replicas = (spec.completions or spec.pods) if spec.kind == "Job" else 1 if spec.kind == "Pod" else FOREVER
        body = {"kind": TRAINING, "command": ["pause"], "replicas": replicas, "gang": spec.gang,
                "priorityClassName": spec.template.priority_class_name, "resources": {}}
        if spec.datasets:  # what its pods mount (controller.datasets.uses)
            body["datasets"] = check_datasets_field(list(spec.datasets))  # as admission reads a body's
        row = self.rows.get(spec.key)
        if row is not None:
            if spec.kind == "Pod":
                raise ValidationError(f"Pod {self.names.scenario(spec.namespace)}/{spec.name} already exists "
                                      "(delete it first)")
            owner = controller.owners.get(row.id)
            if owner is None:
                return  # it has completed: nothing more to make (a change of a finished Job makes no pods)
            owner.spec = spec  # scale or change: new pods use the new template
            row.spec = body
            self.templates[row.id] = (_pod_template(raw), owner_ref)
            controller.poke()
            return
        row = WorkloadRow(id=secrets.token_hex(4), kind=TRAINING, name=spec.name, user=ADMIN.name,
                          namespace=spec.namespace, tenant=None, spec=body, state="Pending", created=now, succeeded=0)
        controller.store.add(row)
        controller.owners[row.id], controller.rows[row.id] = Owner(spec), row
        self.rows[spec.key], self.templates[row.id] = row, (_pod_template(raw), owner_ref)
        controller.loop.reconcile(row, now)
        controller.books.sync(row)
        controller.store.commit()
        controller.poke()

    async def _delete(self, ref: Ref) -> None:
        controller, fp = self.controller, self.footprint
        shown = f"{ref.kind} {self.names.scenario(ref.namespace) + '/' if ref.namespace else ''}{ref.name}"
        if ref.kind == "ElasticQuotaTree":
            controller.set_tree(None)
        elif ref.kind in ("ResourceQuota", "LimitRange"):
            await asyncio.to_thread(fp.remove, ref.kind, ref.namespace, ref.name)
            controller.remove_object(ref.kind, ref.namespace, ref.name)
        elif ref.kind == "PriorityClass":
            await asyncio.to_thread(fp.remove, ref.kind, None, ref.name)
            controller.engine.classes.delete(ref.name)
        elif ref.kind == "Namespace":
            for key in [k for k in self.held if k[1] == ref.name]:
                del self.held[key]
            for key in [k for k in self.rows if k[1] == ref.name]:
                await self._cancel(key)
            for kind in ("ResourceQuota", "LimitRange"):
                for name in list((controller.engine.resource_quotas if kind == "ResourceQuota"
                                  else controller.engine.limit_ranges).get(ref.name, {})):
                    controller.remove_object(kind, ref.name, name)
            await asyncio.to_thread(fp.delete_namespace, ref.name)
        elif ref.kind == "Node":
            raise ValidationError(f"deleting node {ref.name} is not supported by the simulator")
        elif ref.kind == "Dataset":
            self._room().delete(ref.name)
            self._datasets_changed()
        elif (ref.kind, ref.namespace, ref.name) in self.held:
            del self.held[(ref.kind, ref.namespace, ref.name)]
        else:
            if (ref.kind, ref.namespace, ref.name) not in self.rows:
                raise ValidationError(f"{shown} not found")
            await self._cancel((ref.kind, ref.namespace, ref.name))

    async def _cancel(self, key) -> None:
        """End a workload, and wait until the API server shows none of its pods (the simulator frees
        their room at once; the service is not asked to decide before then)."""
        row = self.rows.pop(key)
        self.controller.cancel(ADMIN, row)

        def gone():
            pods = self.api.list(POD, f"{WORKLOAD_LABEL}={row.id}", row.namespace)
            return not pods

        # A finished workload's Job stays on the cluster (as its pods' record); deleted with it here.
        await asyncio.to_thread(self.footprint.delete_jobs, row.namespace, f"{WORKLOAD_LABEL}={row.id}")
        await self._until(gone, f"the pods of {key[0]} {self.names.scenario(key[1])}/{key[2]} to go", threaded=True)

    def _forget_refused(self) -> None:
        """A bare pod refused at submission never existed (shown once, in its step): its name is free again."""
        if self.held:
            gate = self._gate()
            for key, (_, spec) in list(self.held.items()):
                if spec.kind == "Pod" and any(p.phase is Phase.REJECTED for p in self._held_pods(spec, gate)):
                    del self.held[key]
        for key, row in list(self.rows.items()):
            owner = self.controller.owners.get(row.id)
            if key[0] == "Pod" and owner is not None and owner.pods and owner.pods[0].phase is Phase.REJECTED:
                self.rows.pop(key)
                self.controller.cancel(ADMIN, row)

    async def _until(self, check, what: str, threaded: bool = False) -> None:
        deadline = time.monotonic() + self.timeout
        while not (await asyncio.to_thread(check) if threaded else check()):
            if time.monotonic() > deadline:
                raise ReplayError(f"timed out after {self.timeout:.0f} s waiting for {what}")
            await asyncio.sleep(POLL)

    # -- time, as the simulator moves it ---------------------------------------------------
    async def _settle(self) -> list[dict]:
        """Until no eviction is in flight (pods whose duration runs out meanwhile finish too)."""
        while True:
            snapshot = await self._quiet()
            deadlines = [p.grace_deadline for p in self.controller.engine.pods.values() if p.phase is Phase.TERMINATING]
            if not deadlines:
                return snapshot
            await self._run_events(min(deadlines), quiet=True)

    async def _run_events(self, until: float, quiet: bool = False) -> None:
        """Move the clock to ``until``, firing what falls due on the way, in time order (``quiet``:
        the cluster has just settled)."""
        while True:
            if not quiet:
                await self._quiet()
            quiet = False
            at = self._next_event()
            if at is None or at > until:
                break
            self.clock.move_to(at)
            await self._fire(self.clock.now)
        self.clock.move_to(until)

    def _next_event(self) -> float | None:
        times = []
        for pod in self.controller.engine.pods.values():
            if pod.phase is Phase.TERMINATING:
                times.append(pod.grace_deadline)
            elif pod.phase is Phase.RUNNING and pod.duration is not None and not pod.occupying:
                times.append(pod.admitted_at + pod.duration)
        return min(times, default=None)

    async def _fire(self, now: float) -> None:
        """Complete the evictions due by ``now`` and end the pods whose duration ran out."""
        engine = self.controller.engine
        pods = list(engine.pods.values())  # as the simulator's pass: pods started by a release run from now
        due = [p for p in pods if p.phase is Phase.RUNNING and p.duration is not None and not p.occupying
               and p.admitted_at + p.duration <= now]
        self.controller.release([p.uid for p in pods if p.phase is Phase.TERMINATING and p.grace_deadline <= now])
        for pod in due:
            await asyncio.to_thread(self._end, pod)
        await self._until(lambda: all(engine.pods.get(p.uid) is not p or p.phase is not Phase.RUNNING for p in due),
                          "the service to see ended pods end")

    def _end(self, pod) -> None:
        """End a pod as a container that exits 0 would (what kwok's stages do): phase Succeeded."""
        found = [p for p in self.api.list(POD, f"{JOB_NAME_LABEL}={pod.name}", pod.namespace)
                 if not p["metadata"].get("deletionTimestamp")] or \
            [p for p in [self.api.read(POD, pod.namespace, pod.name)] if p]
        if not found:
            raise ReplayError(f"pod {self.names.scenario(pod.namespace)}/{pod.name} is not on the API server when its "
                              "duration ran out")
        obj = max(found, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        started = (obj.get("status") or {}).get("startTime") or now
        statuses = [{"name": c["name"], "image": c.get("image") or PAUSE_IMAGE, "imageID": "", "ready": False,
                     "restartCount": 0, "started": False,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                              "finishedAt": now}}}
                    for c in obj["spec"].get("containers") or []]
        patch(self.api, POD.path(pod.namespace, obj["metadata"]["name"]) + "/status", {"status": {
            "phase": "Succeeded", "containerStatuses": statuses,
            "conditions": [{"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                           for t in ("Ready", "ContainersReady")]}})

    # -- settling ----------------------------------------------------------------------------
    async def _quiet(self) -> list[dict]:
        """Tick the service until the cluster shows what it decided, unchanged over a few reads."""
        deadline = time.monotonic() + self.timeout
        last, stable, why = None, 0, "nothing read yet"
        while True:
            self._release_held()
            self.controller.tick()
            await asyncio.sleep(POLL)
            snapshot = await asyncio.to_thread(self.api.list, POD, self.footprint.selector)
            why, unscheduled = self._unsettled(snapshot)
            if why is None:
                why = await asyncio.to_thread(self._datasets_unsettled)
            signature = self._signature(snapshot)
            stable = stable + 1 if why is None and signature == last else 0
            last = signature
            if stable >= (STABLE_UNSCHEDULED if unscheduled else STABLE):
                return snapshot
            if time.monotonic() > deadline:
                raise ReplayError(f"a step did not settle within {self.timeout:.0f} s: "
                                  f"{self.names.unmap_text(why or 'the cluster kept changing')}")

    def _signature(self, snapshot: list[dict]):
        cluster = sorted((p["metadata"]["namespace"], p["metadata"]["name"], (p.get("status") or {}).get("phase"),
                          (p.get("spec") or {}).get("nodeName"), bool(p["metadata"].get("deletionTimestamp")))
                         for p in snapshot)
        engine = sorted((p.uid, p.phase.value, p.node) for p in self.controller.engine.pods.values())
        return cluster, engine, self._datasets_report(), sorted(self.held)

    def _unsettled(self, snapshot: list[dict]) -> tuple[str | None, bool]:
        """(what is not settled yet, or None; whether a pod waits for kube-scheduler)."""
        controller = self.controller
        if controller.health.blocking:
            return f"the service is blocked: {controller.health.blocking[0]}", False
        live = {}
        for obj in snapshot:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                return f"pod {meta['namespace']}/{meta['name']} is terminating", False
            if (obj.get("status") or {}).get("phase") in ("Pending", "Running"):
                live[key_of(obj)] = obj
        admitted = set()
        unscheduled = False
        for pod in controller.engine.pods.values():
            if pod.occupying:
                continue
            if pod.phase is Phase.TERMINATING and pod.uid not in controller.gone:
                return f"the eviction of {pod.namespace}/{pod.name} is in flight", False
            if pod.phase is not Phase.RUNNING:
                continue
            admitted.add((pod.namespace, pod.name))
            obj = live.get((pod.namespace, pod.name))
            if obj is None:
                return f"{pod.namespace}/{pod.name} is admitted, its pod not (yet) on the API server", False
            if obj["status"].get("phase") != "Running":
                if obj["spec"].get("nodeName"):
                    return f"{pod.namespace}/{pod.name} is placed, not running yet", False
                unscheduled = True
        strays = sorted(set(live) - admitted)
        if strays:
            return f"{strays[0][0]}/{strays[0][1]} is on the API server but not admitted (being stopped?)", False
        return None, unscheduled

    # -- the report ------------------------------------------------------------------------
    async def _report(self, index: int, shown, snapshot: list[dict]) -> dict:
        controller, names = self.controller, self.names
        engine = controller.engine
        positions = engine.positions()
        for pod in engine.pods.values():
            self._order.setdefault((pod.namespace, pod.name), (pod.created, pod.uid))
        by_key = {(p.namespace, p.name): p for p in engine.pods.values() if not p.occupying}
        pods, used_by_ns = [], {}
        for obj in snapshot:
            meta, status = obj["metadata"], obj.get("status") or {}
            if meta.get("deletionTimestamp"):
                continue
            namespace, name = key_of(obj)
            spec = pod_spec_of(obj)
            requests = spec.requests()
            phase = status.get("phase")
            item = {"namespace": names.scenario(namespace), "name": name,
                    "owner": (meta.get("annotations") or {}).get(OWNER_ANNOTATION) or None,
                    "priorityClassName": obj["spec"].get("priorityClassName"), "priority": obj["spec"].get("priority"),
                    "phase": phase, "node": names.scenario(obj["spec"].get("nodeName")),
                    "requests": format_list({k: v for k, v in requests.items() if v}), "reason": None, "message": None}
            if phase == "Pending":
                item["reason"], item["message"] = "waiting-for-kube-scheduler", waiting_message(obj)
                self._warn(f"{names.scenario(namespace)}/{name} is admitted by the service, but {item['message']}",
                           step=True)
            if phase in ("Pending", "Running"):
                add_into(used_by_ns.setdefault(namespace, {}), requests)
            pod = by_key.get((namespace, name))
            if pod is not None and pod.gang is not None:
                item["gang"] = names.unmap_text(pod.gang.to_dict())
            pods.append(item)
        for pod in by_key.values():
            if pod.phase is Phase.PENDING:
                item = self._engine_item(pod)
                if pod.uid in positions:
                    item["position"], item["leafPosition"] = positions[pod.uid]
                pods.append(item)
            elif pod.phase is Phase.REJECTED:
                pods.append(await self._refused(pod))
        seen = {(p["namespace"], p["name"]) for p in pods}
        for pod, reason in controller.failures:
            self._order.setdefault((pod.namespace, pod.name), (pod.created, pod.uid))
            if (names.scenario(pod.namespace), pod.name) in seen:
                continue  # it ended on the cluster: shown as the API server has it
            item = self._engine_item(pod)
            item["phase"] = "Failed"
            if reason is not None:
                item["reason"], item["message"] = reason.code, names.unmap_text(reason.message)
            pods.append(item)
        for ev in controller.evictions:
            self._order.setdefault((ev.victim.namespace, ev.victim.name), (ev.victim.created, ev.victim.uid))
            item = self._engine_item(ev.victim)
            item["phase"] = "Evicted"
            pods.append(item)
        gate = self._gate() if self.held else None
        for _, spec in self.held.values():  # after their kin, as simulate lists them
            for pod in self._held_pods(spec, gate):
                self._order.setdefault((pod.namespace, pod.name), (float("inf"), 0))
                pods.append(self._engine_item(pod))
        pods.sort(key=lambda p: (p["namespace"], p["owner"] or "", *self._order.get(
            (names.namespace(p["namespace"]), p["name"]), (float("inf"), 0))))
        return {
            "step": index + 1,
            "name": shown.name,
            "action": shown.describe(),
            "time": self.clock.now,
            "pods": pods,
            "quota": self._quota(used_by_ns),
            "evictions": [names.unmap_text(ev.to_dict()) for ev in controller.evictions],
            "warnings": list(engine.warnings) + self.warnings + self._notes,
            "datasets": self._datasets_report(),
        }

    def _engine_item(self, pod) -> dict:
        item = self.names.unmap_text(pod.summary())
        item["namespace"] = self.names.scenario(pod.namespace)
        item["node"] = self.names.scenario(pod.node)
        return item

    async def _refused(self, pod) -> dict:
        """A pod the service refused at submission, with the API server's own verdict on it (dry run)."""
        item = self._engine_item(pod)
        if pod.reason is not None and pod.reason.code == DATASET_NOT_ALLOWED:
            return item  # the API server knows nothing of datasets: nothing to ask it
        row = next((r for r in self.rows.values()
                    if any(p is pod for p in getattr(self.controller.owners.get(r.id), "pods", []))), None)
        if row is None:
            return item
        body = self.backend.manifest(row, pod)
        try:
            await asyncio.to_thread(self.api.request, "POST", POD.path(pod.namespace),
                                    query={"dryRun": "All"}, body=body)
        except KubernetesError as err:
            if err.status in (403, 422):
                item["details"] = {**(item.get("details") or {}), "apiServer": self.names.unmap_text(str(err))}
                return item
            if err.status != 409:
                raise
            return item
        self._warn(f"{item['namespace']}/{pod.name}: the service refused it ({item['message']}), but the API "
                   "server would accept it", step=True)
        return item

    def _quota(self, used_by_ns: dict) -> dict:
        """Each quota node's min and max as the service holds them, ``used`` summed from the API server."""
        view = self.controller.quota_view()
        tree = self.controller.engine.quota.tree
        out = {}
        for node in tree.root.walk() if tree is not None else []:
            used: dict = {}
            for leaf in node.walk():
                for ns in leaf.namespaces:
                    add_into(used, used_by_ns.get(ns, {}))
            used = format_list({r: v for r, v in used.items() if v and node.names(r)})
            entry = view.get(node.name) or {"min": format_list(node.min), "max": format_list(node.max)}
            if entry.get("used") is not None and entry["used"] != used:
                self._warn(f"quota {node.name}: the API server's pods use {used}, the service counts "
                           f"{entry['used']}", step=True)
            out[node.name] = {"min": entry["min"], "max": entry["max"], "used": used}
        return out


def _api_client(kubeconfig: str, context: str | None):
    """An ``ApiClient`` for the kubeconfig (and context); one line when it is missing or unusable."""
    from kubernetes import client, config

    if not kubeconfig:
        raise ReplayError("replay: --kubeconfig FILE is required (the cluster to replay on)")
    if not os.path.isfile(kubeconfig):
        raise ReplayError(f"--kubeconfig {kubeconfig}: no such file")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context or None, client_configuration=configuration)
    except Exception as err:  # noqa: BLE001 - the client's errors are of many kinds; each is one line here
        raise ReplayError(f"--kubeconfig {kubeconfig}: not a usable kubeconfig: {' '.join(str(err).split())}") from None
    configuration.retries = 0
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)
