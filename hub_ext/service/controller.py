"""The controller: submissions in, engine decisions out, acted on by a backend, persisted as they happen.

It owns the engine and the owners (one per workload: a notebook is a bare
pod, a training job a Job with ``replicas`` pods), and after every change it
runs ``tick``: reconcile owners, ask the engine, start the admitted pods and
evict the victims through the backend, write the rows, tell listeners.
Time is wall-clock seconds; the engine stays pure.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field

from sqlalchemy import inspect as sa_inspect

from ..quota.errors import ValidationError
from ..quota.limitrange import LimitRange
from ..quota.namespace import Namespace
from ..quota.priorityclass import PriorityClass
from ..quota.resourcequota import ResourceQuota
from ..quota.quantity import format_list
from ..quota.tree import ElasticQuotaTree
from ..quota.workloads import WorkloadSpec
from ..scheduler.engine import Engine
from ..scheduler.model import Phase, Reason
from ..scheduler.owners import Owner
from ..tenants import Tenant, tree_with_tenants
from .health import Health
from .store import PodRow, Store, WorkloadRow
from .tree_edit import explain_preview
from .workloads import NOTEBOOK, TRAINING, Bounds, check_body, pod_template, with_default_requests

FINAL = ("Succeeded", "Failed", "Cancelled", "Stopped", "Preempted", "Rejected")


class Forbidden(Exception):
    """The caller may not do this (a 403); the message says why."""


class TooMany(Exception):
    """The caller has too much queued already (a 429); the message says how much and what to do."""


@dataclass
class Identity:
    name: str
    admin: bool = False
    tenants: list[Tenant] = field(default_factory=list)
    kind: str = "user"
    spawner: bool = False  # the hub's spawner, with the service's own token

    def namespaces(self) -> list[str] | None:
        """Namespaces this identity may act in (None: all)."""
        return None if self.admin else [t.namespace for t in self.tenants if t.usable]


#: The service acting on its own behalf (the hub's spawner uses the service's token too).
SERVICE = Identity(name="tenancy", admin=True, kind="service", spawner=True)


class Controller:
    def __init__(self, *, store: Store, backend, tree: ElasticQuotaTree | None, log=None,
                 notebook_priority_class: str = "low-priority-dev",
                 training_priority_class: str = "high-priority-research", clock=time.time, metrics=None,
                 bounds: Bounds = Bounds(), default_requests: dict | None = None, max_queued_per_user: int = 0):
        self.store, self.backend, self.base_tree = store, backend, tree
        self.log = log or logging.getLogger("tenancy")
        self.notebook_priority_class = notebook_priority_class
        self.training_priority_class = training_priority_class
        self.clock = clock
        self.metrics = metrics
        self.bounds = bounds
        self.default_requests = default_requests or {}  # kind -> {resource: amount}
        self.max_queued_per_user = max_queued_per_user  # 0: no cap
        self.health = Health(self.log, clock)  # what stops admissions (a start-up check, the cluster away)
        self.health.on_change = self.poke
        self.observed: dict[int, tuple] = {}  # engine uid -> (phase, node, message) the cluster reports
        self.engine = Engine(tree)
        for node in backend.nodes():
            self.engine.add_node(node.name, node.allocatable, node.labels)
        backend.controller = self
        self.tenants: list[Tenant] = []
        self.tree_manifest: dict | None = None  # the configured tree as written
        self.owners: dict[str, Owner] = {}
        self.rows: dict[str, WorkloadRow] = {}  # active workloads
        self.pod_rows: dict[int, PodRow] = {}  # engine uid -> row
        self.foreign: dict[str, int] = {}  # cluster pods we did not create (by their cluster uid) -> engine uid
        self.listeners: set[asyncio.Queue] = set()
        self._dirty = asyncio.Event()
        # What the next tick looks at: the workloads that changed (submitted, a pod ended or was lost,
        # an eviction done), or all of them after a change that may concern any (a tree, nodes, health).
        self._changed: set[str] = set()
        self._full = True
        # Workloads with a pod the API server refused (a ResourceQuota, say), by namespace: their owner
        # tries again, as a ReplicaSet or Job controller retries, on the passes after a quota's usage
        # went down in that namespace (a pod deleted or ended, a quota changed: ``engine.quota_freed``),
        # which needs no change to the workload itself. Thousands refused wait at no cost per pass.
        self._retrying: dict[str, set[str]] = {}
        self._waiters: list[tuple[WorkloadRow, asyncio.Future]] = []  # submissions waiting for a tick's commit
        self._reasons: dict[int, object] = {}  # engine uid -> the pod's reason as last written to its row
        self._positions: dict | None = None  # queue positions as of the last tick (see queue_positions)
        self._looping = False  # run() is ticking
        self._tasks: set[asyncio.Task] = set()
        self._missing: dict[str, float] = {}  # notebook workload id -> when the hub was first seen without its server
        # notebook workload id -> {"deadline", "message"} while it is being evicted: the page counts down
        self.evicting: dict[str, dict] = {}

    # -- tenants and tree -----------------------------------------------------
    def set_tenants(self, tenants: list[Tenant]) -> None:
        old = {(t.namespace, t.leaf) for t in self.tenants if t.usable}
        self.tenants = tenants
        changed = getattr(self.backend, "tenants_changed", None)
        if changed is not None:
            changed(tenants)
        if {(t.namespace, t.leaf) for t in tenants if t.usable} != old:
            self.engine.set_tree(tree_with_tenants(self.base_tree, tenants))
            self.poke()

    def set_tree(self, tree: ElasticQuotaTree | None) -> None:
        self.base_tree = tree
        self.engine.set_tree(tree_with_tenants(tree, self.tenants))
        self.poke()

    def apply_object(self, obj) -> None:
        """A ResourceQuota, LimitRange, PriorityClass or Namespace from configuration."""
        if isinstance(obj, ResourceQuota):
            self.engine.apply_resource_quota(obj)
        elif isinstance(obj, LimitRange):
            self.engine.apply_limit_range(obj)
        elif isinstance(obj, PriorityClass):
            self.engine.apply_priority_class(obj)
        elif not isinstance(obj, Namespace):
            raise ValidationError(f"{type(obj).__name__} cannot be configured here (ResourceQuota, LimitRange, PriorityClass, Namespace)")
        self.poke()

    def remove_object(self, kind: str, namespace: str, name: str) -> None:
        """A ResourceQuota or LimitRange that was applied is gone (deleted on the cluster)."""
        if kind == "ResourceQuota":
            self.engine.remove_resource_quota(namespace, name)
        elif kind == "LimitRange":
            self.engine.remove_limit_range(namespace, name)
        self.poke()

    def node_changed(self, node, schedulable: bool = True) -> None:
        """A node was resized, relabelled, cordoned, not Ready (``schedulable=False``) or is back: the
        engine's capacity changes at once; pods nominated on a node that takes no new ones wait again."""
        known = self.engine.cluster.nodes.get(node.name)
        if known is None:
            return
        was = known.schedulable
        requeued = self.engine.update_node(node.name, node.allocatable, node.labels, schedulable=schedulable)
        if was != schedulable:
            self.log.warning("node %s %s", node.name, "takes pods again" if schedulable else
                             "is cordoned, not Ready or tainted: its pods stay, no new ones go there")
        else:
            self.log.info("node %s changed: allocatable %s", node.name, format_list(known.allocatable))
        self._requeued(requeued, lost=set(), stop=set(), why=f"node {node.name} takes no new pods")
        self.poke()

    def node_removed(self, name: str) -> None:
        """A node was deleted from the cluster: its capacity goes at once, the work that ran there is
        lost and queued again in its old place (not failed), victims terminating there are gone."""
        node = self.engine.cluster.nodes.get(name)
        if node is None:
            return
        for pod in [p for p in node.residents.values() if p.phase is Phase.TERMINATING]:
            self.eviction_done(pod.uid)  # the victim went with its node
        now = self.clock()
        change = self.engine.remove_node(name, now)
        for pod in change.started:
            self._start(pod, now)
        self._requeued(change.requeued, lost={p.uid for p in change.lost}, stop={p.uid for p in change.stopped},
                       why=f"its node {name} was deleted")
        self.log.warning("node %s is gone: %d pod(s) that ran there are queued again", name, len(change.lost))
        self.poke()

    def pod_lost(self, uid: int, why: str) -> None:
        """A started pod was lost, not failed by its program (its node went, it was deleted under us,
        it was stuck terminating): it is queued again in its old place, as a restart does for pods
        killed while the service was away. A gang goes back whole; its members elsewhere stop."""
        pod = self.engine.pods.get(uid)
        if pod is None:
            return
        if pod.phase is Phase.TERMINATING:
            self.eviction_done(uid)
            return
        requeued = self.engine.requeue(uid)
        self._requeued(requeued, lost={uid}, stop={p.uid for p in requeued if p.uid != uid}, why=why)

    def _requeued(self, pods, *, lost: set, stop: set, why: str) -> None:
        """Book pods the engine queued again: the lost ones' objects go (never adopted), members of their
        gangs still running elsewhere are stopped; each workload's history says why."""
        now, touched = self.clock(), set()
        for pod in pods:
            self.observed.pop(pod.uid, None)
            prow = self.pod_rows.get(pod.uid)
            row = self.rows.get(prow.workload_id) if prow else None
            if row is None:
                continue
            if pod.uid in lost:
                forget = getattr(self.backend, "forget", None)
                self._spawn(forget(row, pod, prow) if forget is not None else self.backend.stop(row, pod, prow))
                self.store.record(now, "requeued", f"{pod.name} was lost ({why}); it is queued again in its place",
                                  row.id)
            elif pod.uid in stop:
                self._spawn(self.backend.stop(row, pod, prow))
                self.store.record(now, "requeued", f"{pod.name} is stopped: its gang is queued again whole ({why})",
                                  row.id)
            self._sync_pod(pod)
            touched.add(row.id)
        for wid in touched:
            self._sync(self.rows[wid])
        self.store.commit()
        self.notify(touched)
        self.poke(touched)

    def pod_observed(self, uid: int, phase: str, node: str | None, message: str | None) -> None:
        """What the cluster says of a started pod: ``Running`` on ``node``, or ``Pending`` (waiting for
        kube-scheduler or its kubelet) or ``Terminating`` with the cluster's message. Only this is
        shown as Running; the pod is counted on the node where the cluster put it."""
        pod = self.engine.pods.get(uid)
        if pod is None or pod.phase is not Phase.RUNNING:
            self.observed.pop(uid, None)
            return
        if node:
            for moved in self.engine.placed(uid, node):
                self._sync_pod(moved)
        self.observed[uid] = (phase, node, message)
        prow = self.pod_rows.get(uid)
        if prow is not None:
            self.notify([prow.workload_id])

    def add_nodes(self, nodes) -> None:
        """Nodes that joined the cluster: their capacity is shared out from now on."""
        for node in nodes:
            self.engine.add_node(node.name, node.allocatable, node.labels)
            self.log.info("node %s joined", node.name)
        if nodes:
            self.poke([])  # only the queue: no workload of ours changed

    # -- pods we did not create -------------------------------------------------------
    def observe_foreign(self, key: str, namespace: str, name: str, spec, node: str | None) -> None:
        """A pod on the cluster that no workload of ours made (another controller, ``kubectl``): its
        requests count as its namespace's usage while it runs. ``key`` is its cluster uid."""
        if key in self.foreign:
            return
        pod = self.engine.occupy(namespace, name, spec, node, self.clock(), owner=("Foreign", name))
        self.foreign[key] = pod.uid
        self.poke([])  # only the queue: no workload of ours changed

    def forget_foreign(self, key: str) -> None:
        uid = self.foreign.pop(key, None)
        if uid is not None:
            self.engine.delete(uid)
            self.poke([])  # only the queue: no workload of ours changed

    def preview_tree(self, tree: ElasticQuotaTree | None) -> dict:
        """What changing the tree to ``tree`` would do now, on a copy: who would be evicted, who would start."""
        engine = self.engine.replica(tree_with_tenants(tree, self.tenants))
        now = self.clock()
        evictions, admitted = [], []
        for _ in range(100):
            d = engine.schedule(now)
            evictions += d.evictions
            admitted += d.admitted + d.nominated
            if not d:
                break
        # Named as the pages name them; nodes left above a lowered max and work that could never start, too.
        return explain_preview(self, engine, evictions, admitted)

    def tenant_for(self, who: Identity, tenant: str | None, namespace: str | None) -> Tenant | None:
        """The tenant a submission goes to; Forbidden when the caller is not a member."""
        candidates = self.tenants if who.admin else who.tenants
        if tenant is not None:
            match = next((t for t in candidates if t.group == tenant), None)
        elif namespace is not None:
            match = next((t for t in candidates if t.namespace == namespace), None)
            if match is None and who.admin:
                return None  # admins may use any namespace, tenant or not
        else:
            usable = [t for t in who.tenants if t.usable]
            if len(usable) != 1:
                names = ", ".join(t.group for t in usable) or "none"
                raise ValidationError(f"workload: say which team (tenant) to use; yours: {names}")
            match = usable[0]
        if match is None:
            raise Forbidden(f"{who.name} is not a member of {'tenant ' + tenant if tenant else 'a tenant with namespace ' + str(namespace)}")
        if match.errors:
            raise ValidationError(f"tenant {match.group} is misconfigured: {'; '.join(match.errors)}")
        return match

    # -- submissions ----------------------------------------------------------
    def _checked_submission(self, who: Identity, body) -> tuple[dict, Tenant | None, str]:
        """(spec with defaults and its priority class, tenant, namespace) of a submission, or the 400/403/429."""
        spec = check_body(body, self.bounds)
        tenant = self.tenant_for(who, spec.get("tenant"), spec.get("namespace"))
        namespace = tenant.namespace if tenant else spec["namespace"]
        kind = spec["kind"]
        if kind == TRAINING:
            self._check_queue_share(who)
        spec = with_default_requests(spec, self.default_requests.get(kind) or {},
                                     self.engine.limit_ranges.get(namespace, {}).values())
        default = self.notebook_priority_class if kind == NOTEBOOK else self.training_priority_class
        pc = spec.get("priorityClassName", default)
        if kind == TRAINING and not who.admin and tenant is not None and pc not in tenant.priority_classes:
            raise Forbidden(f"tenant {tenant.group} may not use priority class {pc} (allowed: {', '.join(tenant.priority_classes)})")
        if kind == NOTEBOOK and pc != self.notebook_priority_class and not who.admin:
            raise Forbidden(f"notebooks run at {self.notebook_priority_class}")
        if pc not in self.engine.classes.by_name:
            raise ValidationError(f"workload: no PriorityClass named {pc}")
        spec["priorityClassName"] = pc
        return spec, tenant, namespace

    def preview_submit(self, who: Identity, body) -> dict:
        """What submitting ``body`` would do now, on a copy of the engine; nothing is stored.

        Says whether it would start (at once, or once its victims are gone), or why it would
        wait, and which workloads it would evict, each with its user and server name, so a
        client can warn before a job stops one of its own user's notebooks.
        """
        spec, tenant, namespace = self._checked_submission(who, body)
        kind, now = spec["kind"], self.clock()
        engine = self.engine.replica(tree_with_tenants(self.base_tree, self.tenants))
        name = _dns(spec.get("name") or (f"nb-{who.name}" if kind == NOTEBOOK else "train") + "-dry-run")
        owner = _owner(kind, namespace, name, spec)
        owner.reconcile(engine, now)
        ours, evictions, nominated = {p.uid for p in owner.pods}, [], set()
        for _ in range(100):
            d = engine.schedule(now)
            evictions += [e for e in d.evictions if e.preemptor.uid in ours]
            nominated |= {p.uid for p in d.nominated}
            if not d:
                break
        live = {(p.namespace, p.name): wid for wid, o in self.owners.items() for p in o.pods}
        victims = []
        for ev in evictions:
            row = self.rows.get(live.get((ev.victim.namespace, ev.victim.name), ""))
            victims.append({"workload": row.id if row else None, "kind": row.kind if row else None,
                            "name": row.name if row else ev.victim.name, "user": row.user if row else None,
                            "serverName": row.spec.get("serverName") if row else None,
                            "namespace": ev.victim.namespace, "pod": ev.victim.name, "message": ev.victim.reason.message})
        pods = [p for p in owner.pods if p.uid in engine.pods]
        head = next((p for p in pods if p.phase is not Phase.RUNNING), None)
        if head is None:
            state, reason = "Running", None
        elif head.phase is Phase.REJECTED:
            state, reason = "Rejected", head.reason
        else:
            state, reason = "Pending", None if head.uid in nominated else head.reason
        position = engine.positions().get(head.uid) if head is not None else None
        return {"dryRun": True, "kind": kind, "namespace": namespace, "tenant": tenant.group if tenant else None,
                "priorityClassName": spec["priorityClassName"], "state": state,
                "startsAfterEvictions": bool(head is not None and head.uid in nominated),
                "reason": reason.code if reason else None, "message": reason.message if reason else None,
                "position": position[0] if position else None, "leafPosition": position[1] if position else None,
                "evictions": victims}

    def submit(self, who: Identity, body) -> WorkloadRow:
        """Queue a workload and commit it now (in-process callers); the loop decides on its next tick."""
        row = self._submission(who, body)
        try:
            self.store.commit()
        except Exception:
            self.store.rollback()
            self._drop(row.id)
            raise
        self.poke([row.id])
        return row

    async def submit_and_decide(self, who: Identity, body) -> WorkloadRow:
        """Queue a workload and return once a scheduling pass has decided on it and committed it, with
        the other submissions of that pass (one commit for all: a group commit). Refusals of the
        submission itself (400, 403, 429) are raised at once."""
        if not self._looping:  # no loop (in-process use): decide now
            row = self.submit(who, body)
            try:
                self.tick()  # answer with the decision when it is immediate
            except Exception:  # noqa: BLE001 - the workload is stored; the next pass decides
                self.log.exception("scheduling pass failed")
            return row
        row = self._submission(who, body)
        done = asyncio.get_running_loop().create_future()
        self._waiters.append((row, done))
        self.poke([row.id])
        await done
        return row

    def _submission(self, who: Identity, body) -> WorkloadRow:
        """A checked submission in the engine and in the store's session (not committed)."""
        spec, tenant, namespace = self._checked_submission(who, body)
        kind, pc = spec["kind"], spec["priorityClassName"]
        now = self.clock()
        wid = secrets.token_hex(4)
        name = spec.get("name") or (f"nb-{who.name}" if kind == NOTEBOOK else "train") + f"-{wid}"
        row = WorkloadRow(id=wid, kind=kind, name=_dns(name), user=who.name, namespace=namespace,
                          tenant=tenant.group if tenant else None, spec=spec, state="Pending", created=now,
                          succeeded=0, pods=[])
        try:
            self._make_owner(row)
            self._reconcile(row, now)
        except Exception:
            self._drop(row.id)
            raise
        # Into the session only once the engine took it: a refusal leaves other submissions' rows alone.
        self.store.add(row)
        self.store.record(now, "submitted", f"{who.name} submitted {kind} {row.name} to {namespace} at {pc}", wid)
        self._sync(row)
        return row

    def _drop(self, wid: str) -> None:
        """Forget a workload in the engine and here (a submission that was not stored, a row set aside);
        the store keeps what it has."""
        owner = self.owners.pop(wid, None)
        for pod in owner.pods if owner else []:
            self.engine.delete(pod.uid)
            self._forget_pod(pod.uid)
        self.rows.pop(wid, None)

    def _check_queue_share(self, who: Identity) -> None:
        """One user's backlog must not push a teammate's work to the back of a long queue.
        (Notebooks are bounded by the hub's servers per user, so only jobs count.)"""
        if not self.max_queued_per_user:
            return
        queued = sum(1 for r in self.rows.values() if r.user == who.name and r.kind == TRAINING and r.state == "Pending")
        if queued >= self.max_queued_per_user:
            raise TooMany(f"{who.name} has {queued} training jobs waiting already, the most one user may queue; "
                          "cancel some or wait for them to start")

    def _make_owner(self, row: WorkloadRow) -> Owner:
        owner = _owner(row.kind, row.namespace, row.name, row.spec)
        owner.succeeded = row.succeeded or 0
        self.owners[row.id] = owner
        self.rows[row.id] = row
        return owner

    def cancel(self, who: Identity, row: WorkloadRow, *, by_spawner: bool = False, why: str | None = None) -> WorkloadRow:
        """End a workload. ``by_spawner``: its server is already gone (or never started), so the
        hub is not asked to stop it; only the hub's spawner (or the service itself) may say so."""
        self.check_access(who, row)
        if by_spawner and not who.spawner:
            raise Forbidden("only the hub's spawner may release a notebook without stopping its server")
        if row.state in FINAL:
            return row
        now = self.clock()
        owner = self.owners.pop(row.id, None)
        preempted = False
        for pod in list(owner.pods if owner else []):
            prow = self.pod_rows.get(pod.uid)
            if pod.phase is Phase.TERMINATING and row.kind == NOTEBOOK:
                preempted = True  # its server stopping is the end of an eviction
            if pod.phase in (Phase.RUNNING, Phase.TERMINATING) and prow is not None \
                    and not (by_spawner and row.kind == NOTEBOOK):
                self._spawn(self.backend.stop(row, pod, prow))
            self.engine.delete(pod.uid)
            if prow is not None:
                if pod.phase in (Phase.PENDING, Phase.RUNNING, Phase.REJECTED, Phase.TERMINATING):
                    prow.phase = "Evicted" if pod.phase is Phase.TERMINATING else "Deleted"
                    prow.finished_at = now
                self._forget_pod(pod.uid)
        if preempted:
            row.state = "Preempted"
        else:
            row.state = "Stopped" if row.kind == NOTEBOOK else "Cancelled"
            if why is None and by_spawner:
                server = row.spec.get("serverName") or ""
                why = f"{row.user}'s server {server + ' ' if server else ''}stopped: its room is free again"
            self.store.record(now, "cancelled",
                              why or f"{who.name} {'stopped' if row.kind == NOTEBOOK else 'cancelled'} {row.name}", row.id)
        row.finished = now
        self.rows.pop(row.id, None)
        self.evicting.pop(row.id, None)
        self.store.commit()
        self.notify([row.id])
        self.poke([])
        return row

    def reconcile_servers(self, active: set[tuple[str, str]], grace: float) -> list[WorkloadRow]:
        """Notebooks whose server the hub no longer runs (stopped while we were not told, a hub
        restart that dropped a pending spawn) give their room back once missing for ``grace``
        seconds. ``active``: ``(user, server name)`` of every server the hub runs or is starting."""
        now, released = self.clock(), []
        for row in [r for r in self.rows.values() if r.kind == NOTEBOOK]:
            if (row.user, row.spec.get("serverName") or "") in active:
                self._missing.pop(row.id, None)
                continue
            since = self._missing.setdefault(row.id, now)
            if now - since >= grace and now - row.created >= grace:
                self._missing.pop(row.id, None)
                server = row.spec.get("serverName") or ""
                self.cancel(SERVICE, row, by_spawner=True,
                            why=f"the hub no longer runs {row.user}'s server {server!r}: its room is free again" if server
                            else f"the hub no longer runs {row.user}'s server: its room is free again")
                released.append(row)
        for wid in [w for w in self._missing if w not in self.rows]:
            del self._missing[wid]
        return released

    def check_access(self, who: Identity, row: WorkloadRow) -> None:
        namespaces = who.namespaces()
        if namespaces is not None and row.user != who.name and row.namespace not in namespaces:
            raise Forbidden(f"{who.name} may not act on workloads in namespace {row.namespace}")

    # -- the loop -----------------------------------------------------------------
    def poke(self, workload_ids=None) -> None:
        """Ask for a tick: for the workloads ``workload_ids`` (and what is queued), or, without them,
        for every active workload (after a change that may concern any)."""
        if workload_ids is None:
            self._full = True
        else:
            self._changed.update(w for w in workload_ids if w is not None)
        self._dirty.set()

    def queue_positions(self) -> dict:
        """``engine.positions()`` as of the last tick, worked out once for the answers of its submissions."""
        if self._positions is None:
            self._positions = self.engine.positions()
        return self._positions

    async def run(self, interval: float = 1.0) -> None:
        self._looping = True
        try:
            await self._run(interval)
        finally:
            self._looping = False
            for _, done in self._waiters:
                if not done.done():
                    done.cancel()
            self._waiters = []

    async def _run(self, interval: float) -> None:
        while True:
            # asyncio.wait, not wait_for: before Python 3.12, wait_for swallows a cancellation that comes
            # as the event is set, and the service would never stop.
            waiter = asyncio.ensure_future(self._dirty.wait())
            try:
                await asyncio.wait({waiter}, timeout=interval)
            finally:
                waiter.cancel()
            self._dirty.clear()
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad tick must not stop scheduling
                self.log.exception("scheduling pass failed")

    def tick(self) -> None:
        """One scheduling pass: reconcile the workloads that changed (all of them after a ``poke()``
        without ids), ask the engine, start and evict, write what changed, commit once."""
        now = self.clock()
        started = time.perf_counter()
        full, self._full = self._full, False
        waiters, self._waiters = self._waiters, []
        touched: set[str] = set()
        seen: set[str] = set()
        waited: list = []  # pods the engine looked at that still wait
        self._positions = None
        try:
            for _ in range(100):
                freed, self.engine.quota_freed = self.engine.quota_freed, set()
                changed, self._changed = self._changed, set()
                for namespace in freed:
                    waiting = self._retrying.get(namespace, set())
                    waiting.intersection_update(self.rows)  # those that ended meanwhile
                    changed |= waiting
                seen |= changed
                for wid in list(self.rows) if full else changed:
                    row = self.rows.get(wid)
                    if row is not None:
                        self._reconcile(row, now)
                # While a blocking problem lasts (a start-up check, the API server away) nothing is admitted.
                decisions = self.engine.schedule(now) if not self.health.blocking else None
                if decisions is not None:
                    waited += decisions.waited
                if not decisions:
                    break
                for pod in decisions.admitted:
                    self._start(pod, now)
                    touched.add(self._wid(pod))
                for ev in decisions.evictions:
                    self._evict(ev, now)
                    touched.add(self._wid(ev.victim))
                for pod in decisions.nominated:
                    touched.add(self._wid(pod))
            if self.metrics is not None:
                self.metrics.observe_tick(time.perf_counter() - started)
            for wid in list(self.rows) if full else seen | touched:
                row = self.rows.get(wid)
                if row is None:
                    continue
                before = row.state
                self._sync(row)
                if row.state != before:  # e.g. a job that finished: its watchers hear it
                    touched.add(row.id)
            # Waiting pods the engine looked at may wait for another reason now: their rows say so. Only
            # those: the others kept theirs (going over the whole queue cost every pass milliseconds).
            for pod in waited:
                if pod.phase is Phase.PENDING and pod.node is None and \
                        pod.reason is not self._reasons.get(pod.uid, False) and pod.uid in self.pod_rows:
                    self._sync_pod(pod)
                    touched.add(self._wid(pod))
            self.store.commit()
            lost = [row for row, _ in waiters if not sa_inspect(row).persistent]
            if lost:  # rolled back by someone else (a failed history sample) before this commit: again
                for row in lost:
                    self.store.add(row)
                self.store.commit()
        except BaseException as err:
            if waiters:
                self.store.rollback()
                for row, done in waiters:
                    self._drop(row.id)
                    if not done.done():
                        done.set_exception(err if isinstance(err, Exception) else RuntimeError("stopped"))
            raise
        for _, done in waiters:
            if not done.done():
                done.set_result(None)
        self.notify(touched - {None})

    def _forget_pod(self, uid: int):
        """The pod ``uid`` has no row of ours any more (ended, evicted, dropped): its row, or None."""
        self._reasons.pop(uid, None)
        return self.pod_rows.pop(uid, None)

    def _wid(self, pod) -> str | None:
        prow = self.pod_rows.get(pod.uid)
        return prow.workload_id if prow else None

    def _reconcile(self, row: WorkloadRow, now: float) -> None:
        owner = self.owners.get(row.id)
        if owner is None:
            return
        before = {p.uid for p in owner.pods}
        owner.reconcile(self.engine, now)
        if any(p.phase is Phase.REJECTED for p in owner.pods):
            self._retrying.setdefault(row.namespace, set()).add(row.id)
        elif row.id in self._retrying.get(row.namespace, ()):
            self._retrying[row.namespace].discard(row.id)
        for index, pod in enumerate(owner.pods):
            if pod.uid not in before and pod.uid not in self.pod_rows:
                prow = PodRow(workload_id=row.id, index=_index(pod.name, index), name=pod.name,
                              phase=pod.phase.value, created=pod.created)
                row.pods.append(prow)
                self.pod_rows[pod.uid] = prow

    def _start(self, pod, now: float) -> None:
        prow = self.pod_rows.get(pod.uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if row is None:
            return
        self.store.record(now, "started", f"{pod.name} admitted on {pod.node}", row.id)
        if self.metrics is not None:
            self.metrics.admitted(pod)
        self._spawn(self.backend.start(row, pod, prow))

    def _evict(self, ev, now: float) -> None:
        victim = ev.victim
        prow = self.pod_rows.get(victim.uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if row is None:
            return
        self.store.record(now, victim.reason.code, victim.reason.message, row.id, victim.reason.details)
        if self.metrics is not None:
            self.metrics.evicted(victim)
        if row.kind == NOTEBOOK:  # its server stops after the backend's warning window, else the grace period
            warn = getattr(self.backend, "notebook_warning_seconds", None)
            self.evicting[row.id] = {"deadline": now + max(0.0, warn) if warn is not None else ev.deadline,
                                     "message": victim.reason.message}
        self._spawn(self.backend.evict(row, victim, prow, ev.deadline - now, victim.reason))

    def warn_eviction(self, wid: str, deadline: float, message: str) -> None:
        """A backend's own warning window for an evicted notebook: its server stops at ``deadline``."""
        self.evicting[wid] = {"deadline": deadline, "message": message}

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("backend action failed", exc_info=task.exception())

    # -- what backends report -------------------------------------------------------
    def pod_exited(self, uid: int, code: int, reason: Reason | None = None) -> None:
        """A started pod ended with ``code``; ``reason`` says why when the backend knows better than
        an exit status (the API server refused to create it, say)."""
        self.observed.pop(uid, None)
        pod = self.engine.pods.get(uid)
        if pod is None:
            return
        if pod.phase is Phase.TERMINATING:
            self.eviction_done(uid)
            return
        if pod.phase is not Phase.RUNNING:
            return
        now = self.clock()
        prow = self.pod_rows.get(uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if code == 0:
            self.engine.finish(uid, now)
            owner = self.owners.get(row.id) if row else None
            if owner is not None:
                owner.on_finished(pod)
                row.succeeded = owner.succeeded
            if row:
                self.store.record(now, "succeeded", f"{pod.name} finished", row.id)
        else:
            reason = reason or Reason("failed", f"{pod.name} exited with status {code}", {"exitCode": code})
            self.engine.fail(uid, now, reason)
            if row:
                self.store.record(now, "failed", reason.message, row.id, reason.details or None)
                self._finish_failed(row, now)
        self._sync_pod(pod)
        self.store.commit()
        self.poke([row.id] if row else [])

    def _finish_failed(self, row: WorkloadRow, now: float) -> None:
        owner = self.owners.pop(row.id, None)
        self._sync(row, owner)
        for pod in list(owner.pods if owner else []):
            prow = self._forget_pod(pod.uid)
            if pod.phase in (Phase.RUNNING, Phase.TERMINATING) and prow is not None:
                self._spawn(self.backend.stop(row, pod, prow))
            if prow is not None and pod.phase in (Phase.PENDING, Phase.RUNNING, Phase.TERMINATING, Phase.REJECTED):
                prow.phase, prow.finished_at = "Deleted", now
            self.engine.delete(pod.uid)  # finished pods too: the row keeps the history
        row.state, row.finished = "Failed", now
        self.rows.pop(row.id, None)

    def eviction_done(self, uid: int) -> None:
        self.observed.pop(uid, None)
        pod = self.engine.pods.get(uid)
        if pod is None or pod.phase is not Phase.TERMINATING:
            return
        now = self.clock()
        started = self.engine.complete_eviction(uid, now)
        self._sync_pod(pod)
        for p in started:
            self._start(p, now)
            self._changed.add(self._wid(p))
        prow = self._forget_pod(uid)
        self.engine.delete(uid)  # evicted: its row keeps the story; a Job's owner makes a new pod
        row = self.rows.get(prow.workload_id) if prow else None
        if row is not None and row.kind == NOTEBOOK:
            self.evicting.pop(row.id, None)
            self._sync(row)
            row.state, row.finished = "Preempted", now
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
        self.store.commit()
        if row is not None:
            self.notify([row.id])
        self.poke([row.id] if row is not None else [])

    # -- state of rows ----------------------------------------------------------------
    def _sync_pod(self, pod) -> None:
        prow = self.pod_rows.get(pod.uid)
        if prow is None:
            return
        self._reasons[pod.uid] = pod.reason
        reason = pod.reason.to_dict() if pod.reason else None
        if pod.phase is Phase.PENDING and reason and (prow.reason or {}).get("reason") != reason["reason"]:
            # The reason history of the job's page: each new reason it waits for, once.
            self.store.record(self.clock(), "waiting", reason["message"], prow.workload_id, reason.get("details"))
        # Only what changed is written: an unchanged row stays clean and costs the commit nothing.
        for attr, value in (("phase", pod.phase.value), ("node", pod.node), ("admitted_at", pod.admitted_at),
                            ("finished_at", pod.finished_at), ("created", pod.created), ("reason", reason)):
            if getattr(prow, attr) != value:
                setattr(prow, attr, value)

    def _sync(self, row: WorkloadRow, owner: Owner | None = None) -> None:
        owner = owner or self.owners.get(row.id)
        if owner is None:
            return
        for pod in owner.pods:
            self._sync_pod(pod)
        phases = [p.phase for p in owner.pods if p.uid in self.engine.pods]
        if row.kind == TRAINING and owner.succeeded >= (row.spec.get("replicas") or 1):
            row.state, row.finished = "Succeeded", row.finished or self.clock()
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
            for pod in owner.pods:  # done: the engine forgets them, the rows keep the history
                self.engine.delete(pod.uid)
                self._forget_pod(pod.uid)
        elif any(p is Phase.RUNNING for p in phases):
            if row.state != "Running":
                row.state = "Running"
        elif row.kind == NOTEBOOK and phases and phases[0] is Phase.REJECTED:
            row.state, row.finished = "Rejected", self.clock()
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
            for pod in owner.pods:
                self.engine.delete(pod.uid)
        elif row.state not in FINAL and row.state != "Pending":
            row.state = "Pending"

    # -- views ------------------------------------------------------------------------
    def views(self, rows) -> list[dict]:
        """``view`` of many rows, with the queue's positions worked out once."""
        positions = self.engine.positions()
        return [self.view(r, positions=positions) for r in rows]

    def view(self, row: WorkloadRow, *, events: bool = False, positions: dict | None = None) -> dict:
        positions = self.engine.positions() if positions is None else positions
        owner = self.owners.get(row.id)
        live = {p.name: p for p in (owner.pods if owner else [])}
        pods = []
        for prow in row.pods:
            item = {"name": prow.name, "phase": prow.phase, "node": prow.node, "created": prow.created,
                    "startedAt": prow.admitted_at, "finishedAt": prow.finished_at, **(prow.reason or {})}
            pod = live.get(prow.name)
            if pod is not None and pod.uid in positions:
                item["position"], item["leafPosition"] = positions[pod.uid]
            seen = self.observed.get(pod.uid) if pod is not None and pod.phase is Phase.RUNNING else None
            if seen is not None and seen[0] != "Running":  # admitted, not running on the cluster (yet)
                item["phase"], item["node"], item["message"] = seen[0], seen[1], seen[2]
                item["reason"] = _cluster_reason(seen)
            pods.append(item)
        current = [p for p in pods if p["phase"] not in ("Deleted",)]
        waiting = [p for p in current if p["phase"] in ("Pending", "Rejected")]
        head = waiting[0] if waiting else (current[-1] if current else {})
        out = {
            "id": row.id, "kind": row.kind, "name": row.name, "user": row.user, "namespace": row.namespace,
            "tenant": row.tenant, "priorityClassName": row.spec.get("priorityClassName"),
            "state": row.state, "created": row.created, "finished": row.finished,
            "replicas": row.spec.get("replicas", 1), "gang": bool(row.spec.get("gang")), "succeeded": row.succeeded,
            "resources": row.spec.get("resources"), "serverName": row.spec.get("serverName"),
            "reason": head.get("reason"), "message": head.get("message"), "details": head.get("details"),
            "position": head.get("position"), "leafPosition": head.get("leafPosition"),
            "pods": pods,
        }
        if out["state"] == "Running" and current and not any(p["phase"] == "Running" for p in current):
            out["state"] = "Pending"  # "Running" means what the cluster says
        if out["state"] == "Pending" and self.health.blocking:
            out["reason"], out["message"] = "service-blocked", \
                f"{self.health.blocking[0]} (nothing is admitted until this is fixed)"
        evicting = self.evicting.get(row.id) if row.state not in FINAL else None
        if evicting is not None:
            out["evictionDeadline"], out["evictionMessage"] = evicting["deadline"], evicting["message"]
        if events:
            out["events"] = [{"time": e.time, "type": e.type, "message": e.message, **({"details": e.details} if e.details else {})}
                             for e in self.store.events(row.id)]
        return out

    def notices(self, user: str, hours: float = 24) -> list[dict]:
        """The user's notebooks preempted lately: who took the room, and when."""
        since = self.clock() - hours * 3600
        out = []
        for row in self.store.workloads(user=user, namespaces=[], state="Preempted", limit=100)[0]:
            if row.state != "Preempted" or (row.finished or 0) < since:
                continue
            event = next((e for e in reversed(self.store.events(row.id)) if e.type in ("preempted", "reclaimed")), None)
            if event is not None:
                out.append({"workload": row.id, "name": row.name, "serverName": row.spec.get("serverName") or "",
                            "time": event.time, "message": event.message, **(event.details or {})})
        return out

    def quota_view(self) -> dict:
        return {name: {"min": format_list(v["min"]), "max": format_list(v["max"]), "used": format_list(v["used"])}
                for name, v in self.engine.quota.report().items()}

    # -- listeners (server-sent events) ----------------------------------------------
    def notify(self, workload_ids) -> None:
        if not self.listeners:
            return
        positions = None
        for wid in workload_ids:
            if wid is None:
                continue
            row = self.store.workload(wid)
            if row is None:
                continue
            positions = self.engine.positions() if positions is None else positions
            message = {"type": "workload", "workload": self.view(row, positions=positions)}
            for queue in list(self.listeners):
                queue.put_nowait(message)

    # -- restart --------------------------------------------------------------------------
    async def restore(self) -> int:
        """Rebuild engine and owners from the store: no workload lost, none admitted twice.

        Queued pods keep their place (their creation time); pods that still run
        are adopted where they ran; a training pod that ended while we were
        away is finished with its recorded exit status; a pod caught in its
        grace period is stopped and, for a training job, queued again.

        A workload that cannot be restored (an unknown kind, a spec that no longer
        makes a pod, pod rows that make no sense) is quarantined: its state becomes
        ``Quarantined`` with the error in ``message`` (the row is kept), one line is
        logged, and the others are restored. Rows whose JSON could not be read at all
        were moved into the table ``quarantine`` when the store opened; they are
        logged here. An error of the backend itself (the cluster unreachable) is no
        fault of a row: it stops the restore as before.
        """
        count = 0
        now = self.clock()
        for moved in self.store.moved_aside:
            self.log.error("%s", moved.describe())
        for wid in self.store.active_workload_ids():
            try:
                row = self.store.workload(wid)
                count += await self._restore_one(row, now)
            except _BackendFailed as failed:
                raise failed.error from None
            except Exception as err:  # noqa: BLE001 - whatever a bad row makes fail, the others go on
                self._quarantine(wid, err, now)
        self.store.record(now, "restored", f"restored {count} active workload(s)")
        self.store.commit()
        self.poke()
        return count

    async def _restore_one(self, row: WorkloadRow, now: float) -> int:
        """Restore one active workload; 1 if it is still active afterwards, else 0."""
        if row.kind not in (NOTEBOOK, TRAINING):
            raise ValidationError(f"unknown kind {row.kind!r} (notebook, training)")
        owner = self._make_owner(row)
        if owner.spec.gang:
            await self._restore_gang(row, owner, now)
        for prow in row.pods if not owner.spec.gang else []:
            owner._next_index = max(owner._next_index, prow.index + 1)
            if prow.phase not in ("Pending", "Running", "Rejected", "Terminating"):
                continue
            pod = self.engine.submit(
                row.namespace, prow.name, owner.spec.template, now, created=prow.created,
                owner=None if row.kind == NOTEBOOK else (owner.spec.kind, owner.spec.name))
            owner.pods.append(pod)
            self.pod_rows[pod.uid] = prow
            if prow.phase not in ("Running", "Terminating"):
                continue
            status = await _backend(self.backend.recover(row, prow, pod))
            if status == "running" and prow.phase == "Running" and self.engine.adopt(pod, prow.node, prow.admitted_at or now):
                continue
            if status == "running":
                await _backend(self.backend.stop(row, pod, prow))  # gone before its pod may be admitted again
            self._restore_ended(row, owner, pod, prow, status, now)
            if row.state in FINAL:
                break
        if row.state == "Failed":
            self._finish_failed(row, now)  # its other pods stop too
        elif row.state not in FINAL:
            self._sync(row)  # e.g. its last pod succeeded while we were away: it is done
        if row.state not in FINAL:
            return 1
        self.rows.pop(row.id, None)
        self.owners.pop(row.id, None)
        return 0

    async def _restore_gang(self, row: WorkloadRow, owner: Owner, now: float) -> None:
        """A gang comes back whole or not at all: all its running pods adopted where they ran, or
        those still running stopped and the whole gang queued again in its old place."""
        for prow in row.pods:
            owner._next_index = max(owner._next_index, prow.index + 1)
        prows = [p for p in row.pods if p.phase in ("Pending", "Running", "Rejected", "Terminating")]
        if not prows:
            return
        pods = self.engine.submit_gang(row.namespace, [p.name for p in prows], owner.spec.template, now,
                                       created=min(p.created for p in prows), owner=(owner.spec.kind, owner.spec.name))
        owner.pods += pods
        self.pod_rows.update((pod.uid, prow) for pod, prow in zip(pods, prows))
        ran = [(pod, prow) for pod, prow in zip(pods, prows) if prow.phase in ("Running", "Terminating")]
        if not ran:
            return  # it was waiting: it waits again, whole, in its place
        status = {pod.uid: await _backend(self.backend.recover(row, prow, pod)) for pod, prow in ran}
        if len(ran) == len(pods) and all(status[pod.uid] == "running" and prow.phase == "Running" for pod, prow in ran):
            adopted = [self.engine.adopt(pod, prow.node, prow.admitted_at or now) for pod, prow in ran]
            if all(adopted):
                return
            for pod, ok in zip(pods, adopted):
                if ok:  # a node is gone or full: the gang may not run in part
                    self.engine.delete(pod.uid)
            pods = self.engine.submit_gang(row.namespace, [p.name for p in prows], owner.spec.template, now,
                                           created=min(p.created for p in prows),
                                           owner=(owner.spec.kind, owner.spec.name))
            owner.pods = pods
            self.pod_rows.update((pod.uid, prow) for pod, prow in zip(pods, prows))
            status = {pod.uid: "running" for pod in pods}
            ran = list(zip(pods, prows))
        for pod, prow in ran:
            if status[pod.uid] == "running":
                await _backend(self.backend.stop(row, pod, prow))  # gone before the gang may be admitted again
        for pod, prow in ran:
            if isinstance(status[pod.uid], tuple) and status[pod.uid][1] and status[pod.uid][1] < 128 \
                    and prow.phase != "Terminating":
                self._restore_ended(row, owner, pod, prow, status[pod.uid], now)  # a member failed: the job fails
                return
        self.store.record(now, "requeued", f"gang {row.name} did not all run after the restart; it is queued "
                          "again, whole, in its place", row.id)

    def _quarantine(self, wid: str, err: Exception, now: float) -> None:
        """Set aside a workload that could not be restored: forgotten by the engine, kept in the store."""
        self._drop(wid)
        error = " ".join(str(err).split()) if isinstance(err, ValidationError) else f"{type(err).__name__}: {err}"
        error = error if len(error) <= 300 else error[:300] + "..."
        try:
            row = self.store.workload(wid)
            self.store.revert(row)  # what the failed attempt changed is not written
        except Exception:  # noqa: BLE001 - not even loadable: moved aside whole, as stored
            self.store.rollback()
            moved = self.store.move_aside("workloads", wid, f"it cannot be loaded ({error})")
            self.log.error("%s", moved.describe())
            return
        was = row.state
        row.state, row.finished = "Quarantined", now
        row.message = f"quarantined at restore (was {was}): {error}"
        self.store.record(now, "quarantined", row.message, wid)
        self.store.commit()
        self.log.error("workload %s (%s %s of %s in %s) quarantined at restore: %s; the row is kept with state "
                       "Quarantined: its owner may submit it again, or an admin may repair it in table workloads "
                       "and set its state back to %s", wid, row.kind, row.name, row.user, row.namespace, error, was)

    def _restore_ended(self, row, owner, pod, prow, status, now) -> None:
        """A pod that ran before the restart and does not run now."""
        was_evicted = prow.phase == "Terminating"
        if isinstance(status, tuple) and status[1] >= 128 and row.kind == TRAINING and not was_evicted:
            # Killed by a signal while we were away (a machine or hub shutdown): lost, not failed.
            self.store.record(now, "requeued", f"{prow.name} was stopped by signal {status[1] - 128} while the "
                              "service was down; it is queued again in its place", row.id)
            return
        if isinstance(status, tuple) and not was_evicted:  # ("exited", code)
            code = status[1]
            self.engine.delete(pod.uid)
            owner.pods.remove(pod)
            prow.phase, prow.finished_at = ("Succeeded" if code == 0 else "Failed"), now
            self.store.record(now, "succeeded" if code == 0 else "failed",
                              f"{prow.name} exited with status {code} while the service was down", row.id)
            if code == 0:
                owner.succeeded += 1
                row.succeeded = owner.succeeded
            else:
                row.state, row.finished = "Failed", now
            return
        if row.kind == NOTEBOOK:
            self.engine.delete(pod.uid)
            owner.pods.remove(pod)
            prow.phase, prow.finished_at = "Evicted", now
            row.state, row.finished = ("Preempted" if was_evicted else "Stopped"), now
        elif not was_evicted:
            self.store.record(now, "requeued", f"{prow.name} was gone after the restart; it is queued again in its place",
                              row.id)
        # a training pod waits in the queue again, in its old place


class _BackendFailed(Exception):
    """The backend (not a row) failed during a restore."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


async def _backend(call):
    try:
        return await call
    except Exception as err:  # noqa: BLE001 - told apart from a bad row's errors
        raise _BackendFailed(err) from err


def _owner(kind: str, namespace: str, name: str, spec: dict) -> Owner:
    """The owner of a workload's pods: a bare pod for a notebook, a Job of ``replicas`` pods for training."""
    template = pod_template(spec, spec["priorityClassName"], spec.get("gracePeriodSeconds"))
    k8s_kind = "Pod" if kind == NOTEBOOK else "Job"
    return Owner(WorkloadSpec(kind=k8s_kind, namespace=namespace, name=name, template=template,
                              pods=spec.get("replicas", 1),
                              completions=spec.get("replicas", 1) if k8s_kind == "Job" else None,
                              gang=bool(spec.get("gang"))))


def _cluster_reason(seen: tuple) -> str:
    """The reason code of a pod admitted but not running on the cluster (``pod_observed``)."""
    phase, node, message = seen
    if phase == "Terminating":
        return "terminating"
    return "waiting-for-kube-scheduler" if not node else "waiting-for-node"


def _dns(name: str) -> str:
    return name.lower().replace("_", "-")[:63].strip("-") or "workload"


def _index(name: str, fallback: int) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else fallback
