"""Submissions in and workloads out: who may submit what where, the refusals (400, 403, 429), the dry
run of a submission, and cancelling.

A submission is checked (its body, its tenant, its priority class, the user's and the
team's share of the service's work), given its default requests and raised to the floor
every pod is charged, put in the engine and in the store's session; the scheduling loop
decides on it. Only the hub's spawner creates notebooks (a notebook is a hub server), and
only a notebook's owner or an admin stops one. Nothing here decides who runs.
"""

from __future__ import annotations

import secrets
from collections import Counter

from ..quota.errors import ValidationError
from ..scheduler.model import Phase
from ..tenants import Tenant, tree_with_tenants
from .books import owner_for
from .identity import Forbidden, Identity, TooMany
from .names import named
from .store import WorkloadRow
from .workloads import FINAL, NOTEBOOK, TRAINING, check_body, with_default_requests, with_floor


def team_of(tenant: str | None, namespace: str) -> str:
    """What a team cap counts by: the tenant's group, else (a namespace outside every team) the namespace."""
    return tenant if tenant is not None else f"namespace/{namespace}"


class ActiveRows(dict):
    """The active workloads by id (the controller's ``rows``), counted per user and per team as they
    come and go: the caps read two counts instead of walking ten thousand queued rows on every
    submission. A row's user, tenant and namespace never change, so the counts cannot drift."""

    def __init__(self):
        super().__init__()
        self.per_user: Counter = Counter()
        self.per_team: Counter = Counter()

    def _count(self, row, step: int) -> None:
        for counts, key in ((self.per_user, row.user), (self.per_team, team_of(row.tenant, row.namespace))):
            counts[key] += step
            if counts[key] <= 0:
                del counts[key]

    def __setitem__(self, key, row):
        old = self.get(key)
        if old is not None:
            self._count(old, -1)
        super().__setitem__(key, row)
        self._count(row, 1)

    def __delitem__(self, key):
        self._count(self[key], -1)
        super().__delitem__(key)

    _MISSING = object()

    def pop(self, key, default=_MISSING):
        if key in self:
            row = super().pop(key)
            self._count(row, -1)
            return row
        if default is ActiveRows._MISSING:
            raise KeyError(key)
        return default

    def popitem(self):
        key, row = super().popitem()
        self._count(row, -1)
        return key, row

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs):
        for key, row in dict(*args, **kwargs).items():
            self[key] = row

    def clear(self):
        super().clear()
        self.per_user.clear()
        self.per_team.clear()


class Admission:
    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store, self.books = controller.engine, controller.store, controller.books
        self.rows, self.owners, self.pod_rows = controller.rows, controller.owners, controller.pod_rows

    def tenant_for(self, who: Identity, tenant: str | None, namespace: str | None) -> Tenant | None:
        """The tenant a submission goes to; Forbidden when the caller is not a member."""
        candidates = self.c.tenants if who.admin else who.tenants
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

    def checked(self, who: Identity, body) -> tuple[dict, Tenant | None, str, list[str]]:
        """(spec with defaults, floor and priority class, tenant, namespace, the requests the floor raised)
        of a submission, or the 400/403."""
        c = self.c
        spec = check_body(body, c.bounds)
        tenant = self.tenant_for(who, spec.get("tenant"), spec.get("namespace"))
        namespace = tenant.namespace if tenant else spec["namespace"]
        kind = spec["kind"]
        ranges = self.engine.limit_ranges.get(namespace, {}).values()
        spec = with_default_requests(spec, c.default_requests.get(kind) or {}, ranges)
        spec, raised = with_floor(spec, c.bounds.min_requests, ranges)
        default = c.notebook_priority_class if kind == NOTEBOOK else c.training_priority_class
        pc = spec.get("priorityClassName", default)
        if kind == TRAINING and not who.admin and tenant is not None and pc not in tenant.priority_classes:
            raise Forbidden(f"tenant {tenant.group} may not use priority class {pc} (allowed: {', '.join(tenant.priority_classes)})")
        if kind == NOTEBOOK and pc != c.notebook_priority_class and not who.admin:
            raise Forbidden(f"notebooks run at {c.notebook_priority_class}")
        if pc not in self.engine.classes.by_name:
            raise ValidationError(f"workload: no PriorityClass named {pc}")
        spec["priorityClassName"] = pc
        c.datasets.check_submission(who, spec, namespace)
        return spec, tenant, namespace, raised

    def check_share(self, who: Identity, tenant: Tenant | None, namespace: str) -> None:
        """One user's (or one team's) work must not push everybody else's to the back of a long queue.
        Running work counts as much as waiting work: what runs (a job of zero requests, a notebook
        the hub forgot) holds its place as surely. Notebooks and jobs alike."""
        c = self.c
        user_most, team_most = c.max_workloads_per_user, c.max_workloads_per_team
        mine = self.rows.per_user[who.name]
        ours = self.rows.per_team[team_of(tenant.group if tenant is not None else None, namespace)]
        if user_most and mine >= user_most:
            raise TooMany(f"{who.name} has {mine} notebooks and jobs waiting or running already, the most one user "
                          "may have (TenancyService.max_workloads_per_user); cancel some or wait for them to finish")
        if team_most and ours >= team_most:
            team = f"team {tenant.group}" if tenant is not None else f"namespace {namespace}"
            raise TooMany(f"{team} has {ours} notebooks and jobs waiting or running already, the most one team may "
                          "have (TenancyService.max_workloads_per_team); cancel some or wait for them to finish")

    def preview_submit(self, who: Identity, body) -> dict:
        """What submitting ``body`` would do now, on a copy of the engine; nothing is stored.

        Says whether it would start (at once, or once its victims are gone), or why it would
        wait, and which workloads it would evict, each with its user, server name and the name
        people call it (``who``: "bob's notebook (Large)"), so a client can warn before a job
        stops anybody's work. When it would stop some, ``lowerPriority`` is the highest class
        below its own that the submitter may use and that stops nobody (what it would do
        there: wait, with its position, or start), or None.
        """
        out = self._preview(who, body)
        out["lowerPriority"] = self._lower_priority(who, body, out) if out["evictions"] else None
        return out

    def _lower_priority(self, who: Identity, body, answer: dict) -> dict | None:
        """The first class below ``answer``'s, highest first, at which ``body`` stops nobody."""
        if answer["kind"] != TRAINING or not isinstance(body, dict):
            return None
        classes = self.engine.classes.by_name
        value = classes[answer["priorityClassName"]].value
        tenant = next((t for t in self.c.tenants if t.group == answer["tenant"]), None)
        allowed = list(classes) if who.admin or tenant is None else tenant.priority_classes
        lower = sorted((classes[n] for n in allowed if n in classes and classes[n].value < value),
                       key=lambda pc: -pc.value)
        for pc in lower:
            there = self._preview(who, {**body, "priorityClassName": pc.name})
            if not there["evictions"] and there["state"] != "Rejected":
                return {key: there[key] for key in ("priorityClassName", "state", "reason", "message",
                                                    "position", "leafPosition")}
        return None

    def _preview(self, who: Identity, body) -> dict:
        c = self.c
        spec, tenant, namespace, _ = self.checked(who, body)
        kind, now = spec["kind"], c.clock()
        engine = self.engine.replica(tree_with_tenants(c.base_tree, c.tenants))
        name = _dns(spec.get("name") or (f"nb-{who.name}" if kind == NOTEBOOK else "train") + "-dry-run")
        owner = owner_for(kind, namespace, name, spec)
        held = c.datasets.gate(spec, namespace)
        if held is not None:  # held back before the engine: neither admitted nor counted
            return {"dryRun": True, "kind": kind, "namespace": namespace, "tenant": tenant.group if tenant else None,
                    "priorityClassName": spec["priorityClassName"], "state": "Pending", "startsAfterEvictions": False,
                    "reason": held.code, "message": held.message, "position": None, "leafPosition": None,
                    "evictions": []}
        owner.reconcile(engine, now)
        ours, evictions, nominated = {p.uid for p in owner.pods}, [], set()
        for _ in range(100):
            d = engine.schedule(now)
            evictions += [e for e in d.evictions if e.preemptor.uid in ours]
            nominated |= {p.uid for p in d.nominated}
            if not d:
                break
        live = {(p.namespace, p.name): wid for wid, o in self.owners.items() for p in o.pods} if evictions else {}
        victims = []
        for ev in evictions:
            row = self.rows.get(live.get((ev.victim.namespace, ev.victim.name), ""))
            victims.append({"workload": row.id if row else None, "kind": row.kind if row else None,
                            "who": named(row) if row else f"pod {ev.victim.name} in {ev.victim.namespace}",
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
        row = self.submission(who, body)
        try:
            self.store.commit()
        except Exception:
            self.store.rollback()
            self.books.drop(row.id)
            raise
        self.c.loop.poke([row.id])
        return row

    async def submit_and_decide(self, who: Identity, body) -> WorkloadRow:
        """Queue a workload and return once a scheduling pass has decided on it and committed it, with
        the other submissions of that pass (one commit for all: a group commit). Refusals of the
        submission itself (400, 403, 429) are raised at once."""
        loop = self.c.loop
        if not loop.looping:  # no loop (in-process use): decide now
            row = self.submit(who, body)
            try:
                loop.tick()  # answer with the decision when it is immediate
            except Exception:  # noqa: BLE001 - the workload is stored; the next pass decides
                self.c.log.exception("scheduling pass failed")
            return row
        row = self.submission(who, body)
        await loop.decide(row)
        return row

    def submission(self, who: Identity, body) -> WorkloadRow:
        """A checked submission in the engine and in the store's session (not committed)."""
        spec, tenant, namespace, raised = self.checked(who, body)
        kind, pc = spec["kind"], spec["priorityClassName"]
        if kind == NOTEBOOK and not who.spawner:
            # A notebook is a hub server: queued by the spawner as the hub starts it, with the
            # service's token. Posted by anyone else it would hold room with no server behind it.
            raise Forbidden("notebooks are started by the hub: start a server from the hub's home page "
                            "(or the hub's API) instead of submitting one here")
        self.check_share(who, tenant, namespace)
        now = self.c.clock()
        wid = secrets.token_hex(4)
        name = spec.get("name") or (f"nb-{who.name}" if kind == NOTEBOOK else "train") + f"-{wid}"
        row = WorkloadRow(id=wid, kind=kind, name=_dns(name), user=who.name, namespace=namespace,
                          tenant=tenant.group if tenant else None, spec=spec, state="Pending", created=now,
                          succeeded=0, pods=[])
        try:
            self.books.make_owner(row)
            self.c.loop.reconcile(row, now)
        except Exception:
            self.books.drop(row.id)
            raise
        # Into the session only once the engine took it: a refusal leaves other submissions' rows alone.
        self.store.add(row)
        floor = f"; {', '.join(raised)}" if raised else ""
        self.store.record(now, "submitted", f"{who.name} submitted {kind} {row.name} to {namespace} at {pc}{floor}", wid)
        self.books.sync(row)
        return row

    def check_access(self, who: Identity, row: WorkloadRow) -> None:
        namespaces = who.namespaces()
        if namespaces is not None and row.user != who.name and row.namespace not in namespaces:
            raise Forbidden(f"{who.name} may not act on workloads in namespace {row.namespace}")

    @staticmethod
    def check_stop(who: Identity, row: WorkloadRow) -> None:
        """A notebook is its owner's server: a teammate may read it, never stop it (as the hub refuses too)."""
        if row.kind == NOTEBOOK and row.user != who.name and not who.admin:
            raise Forbidden(f"only {row.user} or an admin may stop {row.user}'s notebook {row.name}")

    def cancel(self, who: Identity, row: WorkloadRow, *, by_spawner: bool = False, why: str | None = None) -> WorkloadRow:
        """End a workload. ``by_spawner``: its server is already gone (or never started), so the
        hub is not asked to stop it; only the hub's spawner (or the service itself) may say so."""
        c = self.c
        self.check_access(who, row)
        self.check_stop(who, row)
        if by_spawner and not who.spawner:
            raise Forbidden("only the hub's spawner may release a notebook without stopping its server")
        if row.state in FINAL:
            return row
        now = c.clock()
        owner = self.owners.pop(row.id, None)
        preempted = False
        for pod in list(owner.pods if owner else []):
            prow = self.pod_rows.get(pod.uid)
            if pod.phase is Phase.TERMINATING and row.kind == NOTEBOOK:
                preempted = True  # its server stopping is the end of an eviction
            if pod.phase in (Phase.RUNNING, Phase.TERMINATING) and prow is not None \
                    and not (by_spawner and row.kind == NOTEBOOK):
                c._spawn(c.backend.stop(row, pod, prow))
            self.engine.delete(pod.uid)
            if prow is not None:
                if pod.phase in (Phase.PENDING, Phase.RUNNING, Phase.REJECTED, Phase.TERMINATING):
                    prow.phase = "Evicted" if pod.phase is Phase.TERMINATING else "Deleted"
                    prow.finished_at = now
                self.books.forget_pod(pod.uid)
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
        c.evicting.pop(row.id, None)
        c.withdrawn.pop(row.id, None)
        c.datasets.forget(row.id)
        self.store.commit()
        c.viewer.notify([row.id])
        c.loop.poke([])
        return row


def _dns(name: str) -> str:
    return name.lower().replace("_", "-")[:63].strip("-") or "workload"
