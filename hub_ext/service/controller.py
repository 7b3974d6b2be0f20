"""The controller: submissions in, engine decisions out, acted on by a backend, persisted as they happen.

It holds what its rooms share (the engine, the store, the backend, the active
workloads' rows and owners, the tenants and the tree) and is the one object the
service, the handlers and the backends talk to; each method hands over to the room
whose job it is:

- ``admission``: submissions, refusals, dry runs, cancelling (``admission.py``);
- ``loop``: the scheduling pass, ``tick``, and the loop that runs it (``loop.py``);
- ``reports``: what the backends report, pods ended, evictions done, nodes (``reports.py``);
- ``policy``: the tree, the tenants and the namespace-level objects (``policy.py``);
- ``restorer``: rebuilding the state after a restart (``restore.py``);
- ``viewer``: workloads as they are shown, and the listeners told (``views.py``);
- ``servers``: notebooks whose server the hub lost (``servers.py``);
- ``books``: rows kept in step with the engine's pods (``books.py``);
- ``datasets``: the datasets declared, their states, what workloads mount (``datasets.py``).

Time is wall-clock seconds (``clock``); the engine stays pure. Calls from one room
to ``eviction_done``, ``_evict`` and ``_spawn`` go through the controller, so that a
subclass (the replay's) sees them all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..planning.history import record_nodes
from ..quota.tree import ElasticQuotaTree
from ..scheduler.engine import Engine
from ..scheduler.model import Reason
from ..scheduler.owners import Owner
from ..tenants import Tenant
from .admission import ActiveRows, Admission
from .books import Books
from .datasets import Datasets
from .health import Health
from .identity import SERVICE, Forbidden, Identity, TooMany
from .loop import Loop
from .policy import Policy
from .reports import Reports
from .restore import Restore
from .servers import ServerCheck
from .store import PodRow, Store, WorkloadRow
from .views import Views
from .workloads import FINAL, Bounds

__all__ = ["FINAL", "SERVICE", "Controller", "Forbidden", "Identity", "TooMany"]


class Controller:
    def __init__(self, *, store: Store, backend, tree: ElasticQuotaTree | None, log=None,
                 notebook_priority_class: str = "low-priority-dev",
                 training_priority_class: str = "high-priority-research", clock=time.time, metrics=None,
                 bounds: Bounds = Bounds(), default_requests: dict | None = None, max_workloads_per_user: int = 0,
                 max_workloads_per_team: int = 0, max_queued_per_user: int = 0):
        self.store, self.backend, self.base_tree = store, backend, tree
        self.log = log or logging.getLogger("tenancy")
        self.notebook_priority_class = notebook_priority_class
        self.training_priority_class = training_priority_class
        self.clock = clock
        self.metrics = metrics
        self.bounds = bounds
        self.default_requests = default_requests or {}  # kind -> {resource: amount}
        # active (waiting or running) workloads of one user, of one team; 0: no cap (max_queued_per_user: the old name)
        self.max_workloads_per_user = max_workloads_per_user or max_queued_per_user
        self.max_workloads_per_team = max_workloads_per_team
        self.health = Health(self.log, clock)  # what stops admissions (a start-up check, the cluster away)
        self.observed: dict[int, tuple] = {}  # engine uid -> (phase, node, message) the cluster reports
        self.engine = Engine(tree)
        for node in backend.nodes():
            self.engine.add_node(node.name, node.allocatable, node.labels)
        record_nodes(store, self.engine, clock(), "the service started with these nodes")  # for history export
        self.tenants: list[Tenant] = []
        self.tree_manifest: dict | None = None  # the configured tree as written
        self.owners: dict[str, Owner] = {}
        self.rows: dict[str, WorkloadRow] = ActiveRows()  # active workloads, counted per user and team
        self.pod_rows: dict[int, PodRow] = {}  # engine uid -> row
        self.foreign: dict[str, int] = {}  # cluster pods we did not create (by their cluster uid) -> engine uid
        self.listeners: set[asyncio.Queue] = set()
        self._tasks: set[asyncio.Task] = set()  # the backend's actions under way
        # notebook workload id -> {"deadline", "message", "task"} while it is being evicted: the page counts
        # down; "task" is the backend's eviction, cancelled if the eviction is withdrawn in its warning
        self.evicting: dict[str, dict] = {}
        # notebook workload id -> {"time", "message"}: its last eviction was withdrawn (the countdown says so)
        self.withdrawn: dict[str, dict] = {}
        self.books = Books(self)
        self.datasets = Datasets(self)
        self.loop = Loop(self)
        self.admission, self.reports, self.policy = Admission(self), Reports(self), Policy(self)
        self.restorer, self.viewer, self.servers = Restore(self), Views(self), ServerCheck(self)
        self.health.on_change = self.loop.poke
        backend.controller = self

    # -- policy ---------------------------------------------------------------------
    def set_tenants(self, tenants: list[Tenant]) -> None:
        self.policy.set_tenants(tenants)

    def set_tree(self, tree: ElasticQuotaTree | None) -> None:
        self.policy.set_tree(tree)

    def apply_object(self, obj) -> None:
        self.policy.apply_object(obj)

    def remove_object(self, kind: str, namespace: str, name: str) -> None:
        self.policy.remove_object(kind, namespace, name)

    def preview_tree(self, tree: ElasticQuotaTree | None) -> dict:
        return self.policy.preview_tree(tree)

    # -- admission ------------------------------------------------------------------
    def tenant_for(self, who: Identity, tenant: str | None, namespace: str | None) -> Tenant | None:
        return self.admission.tenant_for(who, tenant, namespace)

    def preview_submit(self, who: Identity, body) -> dict:
        return self.admission.preview_submit(who, body)

    def submit(self, who: Identity, body) -> WorkloadRow:
        return self.admission.submit(who, body)

    async def submit_and_decide(self, who: Identity, body) -> WorkloadRow:
        return await self.admission.submit_and_decide(who, body)

    def cancel(self, who: Identity, row: WorkloadRow, *, by_spawner: bool = False, why: str | None = None) -> WorkloadRow:
        return self.admission.cancel(who, row, by_spawner=by_spawner, why=why)

    def check_access(self, who: Identity, row: WorkloadRow) -> None:
        self.admission.check_access(who, row)

    def reconcile_servers(self, active: set[tuple[str, str]], grace: float) -> list[WorkloadRow]:
        return self.servers.reconcile_servers(active, grace)

    # -- the loop -------------------------------------------------------------------
    def poke(self, workload_ids=None) -> None:
        self.loop.poke(workload_ids)

    def queue_positions(self) -> dict:
        return self.loop.queue_positions()

    async def run(self, interval: float = 1.0) -> None:
        await self.loop.run(interval)

    def tick(self) -> None:
        self.loop.tick()

    def _evict(self, ev, now: float) -> None:
        self.loop.evict(ev, now)

    def _spawn(self, coro) -> asyncio.Task:
        """Run a backend's action in the background; its failure is logged."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("backend action failed", exc_info=task.exception())

    # -- what backends report ---------------------------------------------------------
    def pod_exited(self, uid: int, code: int, reason: Reason | None = None) -> None:
        self.reports.pod_exited(uid, code, reason)

    def eviction_done(self, uid: int) -> None:
        self.reports.eviction_done(uid)

    def warn_eviction(self, wid: str, deadline: float, message: str) -> None:
        self.reports.warn_eviction(wid, deadline, message)

    def pod_lost(self, uid: int, why: str) -> None:
        self.reports.pod_lost(uid, why)

    def pod_observed(self, uid: int, phase: str, node: str | None, message: str | None, notify: bool = True) -> None:
        self.reports.pod_observed(uid, phase, node, message, notify)

    def add_nodes(self, nodes) -> None:
        self.reports.add_nodes(nodes)

    def node_changed(self, node, schedulable: bool = True) -> None:
        self.reports.node_changed(node, schedulable)

    def node_removed(self, name: str) -> None:
        self.reports.node_removed(name)

    def dataset_state(self, name: str, namespace: str, state: str, message: str | None = None) -> None:
        """A backend's word on a wanted dataset in a namespace: Bound, Pending or Refused (with why)."""
        self.datasets.set_state(name, namespace, state, message)

    def observe_foreign(self, key: str, namespace: str, name: str, spec, node: str | None) -> None:
        self.reports.observe_foreign(key, namespace, name, spec, node)

    def forget_foreign(self, key: str) -> None:
        self.reports.forget_foreign(key)

    # -- restart ----------------------------------------------------------------------
    async def restore(self) -> int:
        return await self.restorer.restore()

    # -- views ------------------------------------------------------------------------
    def views(self, rows) -> list[dict]:
        return self.viewer.views(rows)

    def view(self, row: WorkloadRow, *, events: bool = False, positions: Callable[[], dict] | None = None) -> dict:
        return self.viewer.view(row, events=events, positions=positions)

    def notices(self, user: str, hours: float = 24) -> list[dict]:
        return self.viewer.notices(user, hours)

    def quota_view(self) -> dict:
        return self.viewer.quota_view()

    def notify(self, workload_ids) -> None:
        self.viewer.notify(workload_ids)
