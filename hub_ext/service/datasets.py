"""The controller's datasets: who declared them, who may use them, their state in each namespace,
and what each workload mounts.

A dataset comes from one of three places (its ``origin``): the service's configuration
(``TenancyService.datasets``, read at start), the API (``PUT /api/v1/datasets/NAME``: kept
in the store, so a restart keeps it) or the cluster (the Kubernetes backend follows the
``Dataset`` custom resources and hands over the whole set with ``from_cluster``). Each can
only be changed where it came from. Who may use one: its ``namespaces``, and the namespaces
of the tenants (hub groups) its ``teams`` name, every tenant's for ``"*"``; ``wanted()``
is that, pair by pair, and the backend is told whenever it may have changed. The backend
reports each pair's state (``dataset_state``): Bound, Pending or Refused.

A workload naming datasets (``datasets`` in its body) is refused when one does not exist or
is not for its namespace; one naming a dataset not Bound there is held back before the
engine (neither admitted nor counted), Pending with ``dataset-not-ready``, and released once
it is Bound. A workload naming none mounts every dataset Bound in its namespace.
"""

from __future__ import annotations

from ..quota.dataset import EVERYONE, KIND, Dataset, check_datasets, parse_dataset, paths_clash, volume_source
from ..quota.errors import ValidationError
from ..quota.quantity import format_milli
from ..scheduler.model import DATASET_NOT_READY, Reason
from .identity import Forbidden

BOUND, PENDING, REFUSED = "Bound", "Pending", "Refused"
STATES = (BOUND, PENDING, REFUSED)
CONFIG, API, CLUSTER = "config", "api", "cluster"
SETTING = "datasets"  # the store's setting: {name: manifest} of the API-made ones
ACCELERATED = "datasets-accelerated"  # the store's setting: the names an admin chose to accelerate


class Conflict(Exception):
    """The dataset cannot be changed here (a 409): the sentence says where it can."""


class NotFound(Exception):
    """There is no such dataset (a 404)."""


class Datasets:
    def __init__(self, controller):
        self.c = controller
        self.declared: dict[str, Dataset] = {}
        self.origins: dict[str, str] = {}
        self.states: dict[tuple[str, str], tuple[str, str | None]] = {}  # (name, namespace) -> (state, words)
        self.held: dict[str, Reason] = {}  # workload id -> why it is held back (dataset-not-ready)
        self.accelerated: set[str] = set()  # the names an admin chose to accelerate (kept in the store)
        # (name, namespace) -> (state, words, the cache's claim), as the backend reports the acceleration
        self.fast: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
        self.started = False  # the backend is told of changes only once the service has started

    # -- what is declared ----------------------------------------------------------------------
    def configure(self, datasets: list[Dataset]) -> None:
        """The configuration's datasets (checked together by the caller), then the API-made ones the
        store keeps; one of those whose name the configuration took now is left aside, with a log line."""
        for ds in datasets:
            self.declared[ds.name], self.origins[ds.name] = ds, CONFIG
        for name, manifest in sorted((self.c.store.setting(SETTING) or {}).items()):
            try:
                ds = parse_dataset(manifest)
                check_datasets([*self.declared.values(), ds])
            except ValidationError as err:
                self.c.log.error("the dataset %s made through the API is left aside: %s; PUT it again or DELETE it",
                                 name, err)
                continue
            self.declared[ds.name], self.origins[ds.name] = ds, API
        # a cluster dataset's name is kept before the cluster is read: it is accelerated once it arrives
        self.accelerated = set(self.c.store.setting(ACCELERATED) or [])

    def origin(self, name: str) -> str | None:
        return self.origins.get(name)

    def check(self, ds: Dataset) -> None:
        """The 400 of a dataset that would clash with the others (its name's own old self aside)."""
        check_datasets([*(d for d in self.declared.values() if d.name != ds.name), ds])

    def writable(self, name: str) -> None:
        """Conflict unless the API may change or delete ``name`` (a new one, or one it made)."""
        origin = self.origins.get(name)
        if origin == CONFIG:
            raise Conflict(f"{KIND} {name} is declared in the service's configuration (TenancyService.datasets): "
                           "change it there and restart the service")
        if origin == CLUSTER:
            raise Conflict(f"{KIND} {name} is a custom resource on the cluster: change it there "
                           f"(kubectl edit dataset {name}, or kubectl delete dataset {name})")

    def apply(self, ds: Dataset, origin: str = API) -> None:
        if origin == API:
            self.writable(ds.name)
        self.check(ds)
        self.declared[ds.name], self.origins[ds.name] = ds, origin
        if origin == API:
            self._save()
        self.changed()

    def delete(self, name: str) -> None:
        if name not in self.declared:
            raise NotFound(f"there is no dataset {name}")
        self.writable(name)
        del self.declared[name], self.origins[name]
        self.accelerated.discard(name)
        self._save()
        self.changed()

    def from_cluster(self, datasets: list[Dataset]) -> None:
        """The full set of the cluster's ``Dataset`` resources (replacing the previous one). One whose
        name the configuration or the API took, or that clashes with the others, is left out, logged."""
        for name in [n for n, o in self.origins.items() if o == CLUSTER]:
            del self.declared[name], self.origins[name]
        for ds in datasets:
            if ds.name in self.declared:
                self.c.log.warning("the cluster's Dataset %s is ignored: a dataset of that name is declared by the %s",
                                   ds.name, "configuration" if self.origins[ds.name] == CONFIG else "API")
                continue
            try:
                self.check(ds)
            except ValidationError as err:
                self.c.log.warning("the cluster's Dataset %s is ignored: %s", ds.name, err)
                continue
            self.declared[ds.name], self.origins[ds.name] = ds, CLUSTER
        self.changed()

    def _save(self) -> None:
        store = self.c.store
        store.set_setting(SETTING, {n: ds.raw for n, ds in self.declared.items() if self.origins[n] == API})
        store.set_setting(ACCELERATED, sorted(self.accelerated))
        store.commit()

    # -- acceleration ------------------------------------------------------------------------------
    def can_accelerate(self) -> str | None:
        """None when the backend can accelerate datasets, else its sentence why not."""
        return self.c.backend.acceleration()

    def accelerate(self, name: str, on: bool) -> bool:
        """An admin's choice: accelerate ``name`` (``on``) or no longer. NotFound for an unknown dataset,
        Conflict (the backend's sentence) when the backend cannot accelerate. Whether anything changed."""
        if name not in self.declared:
            raise NotFound(f"there is no dataset {name}")
        if on:
            why = self.can_accelerate()
            if why is not None:
                raise Conflict(f"{KIND} {name} cannot be accelerated: {why}")
        if (name in self.accelerated) == on:
            return False
        if on:
            self.accelerated.add(name)
        else:
            self.accelerated.discard(name)
            for key in [k for k in self.fast if k[0] == name]:
                del self.fast[key]
        self._save()
        self.changed()
        return True

    def set_acceleration(self, name: str, namespace: str, state: str, message: str | None = None,
                         claim: str | None = None) -> None:
        """A backend's word on the cache of an accelerated dataset in a namespace: Bound (work may mount
        ``claim``), Pending or Refused, with why."""
        if state not in STATES:
            raise ValueError(f"acceleration state {state!r}: one of {', '.join(STATES)}")
        if name not in self.accelerated or (name, namespace) not in self.wanted():
            return  # a late report of a choice undone, or of a pair no longer wanted
        self.fast[(name, namespace)] = (state, message, claim)

    def acceleration_state(self, name: str, namespace: str) -> tuple[str, str | None, str | None]:
        return self.fast.get((name, namespace), (PENDING, f"the cache is not made in {namespace} yet", None))

    def _fast_claim(self, name: str, namespace: str) -> str | None:
        """The cache's claim work in ``namespace`` mounts for ``name`` now, or None (the dataset's own)."""
        if name not in self.accelerated:
            return None
        state, _, claim = self.fast.get((name, namespace), (None, None, None))
        return claim if state == BOUND and claim else None

    def acceleration_view(self, ds: Dataset, namespaces: list[str]) -> dict:
        why = self.can_accelerate()
        enabled = ds.name in self.accelerated
        state = {}
        if enabled:
            for ns in namespaces:
                s, words, claim = self.acceleration_state(ds.name, ns)
                state[ns] = {"state": s, "message": words, "claim": claim}
        return {"available": why is None, "why": why, "enabled": enabled, "state": state}

    # -- who may use what ----------------------------------------------------------------------
    def namespaces(self, ds: Dataset) -> list[str]:
        """The namespaces that may use ``ds``: its own, and those of the tenants its teams name."""
        tenants = self.c.tenants
        out = set(ds.namespaces)
        if EVERYONE in ds.teams:
            out |= {t.namespace for t in tenants}
        else:
            out |= {t.namespace for t in tenants if t.group in ds.teams}
        return sorted(out)

    def allows(self, ds: Dataset, namespace: str) -> bool:
        return namespace in self.namespaces(ds)

    def wanted(self) -> dict[tuple[str, str], Dataset]:
        return {(ds.name, ns): ds for ds in self.declared.values() for ns in self.namespaces(ds)}

    def changed(self) -> None:
        """``wanted()`` may have changed: the backend is told (once the service started), states of
        pairs no longer wanted are dropped, held workloads are looked at again."""
        if not self.started:
            return
        wanted = self.wanted()
        for key in [k for k in self.states if k not in wanted]:
            del self.states[key]
            self._health(key, None)
        for key in [k for k in self.fast if k not in wanted]:
            del self.fast[key]
        self.c.backend.datasets_changed(wanted)
        self._release()

    def start(self) -> None:
        """The service starts: from now on the backend hears of every change, beginning with this one."""
        self.started = True
        self.changed()

    # -- what backends report --------------------------------------------------------------------
    def set_state(self, name: str, namespace: str, state: str, message: str | None = None) -> None:
        if state not in STATES:
            raise ValueError(f"dataset state {state!r}: one of {', '.join(STATES)}")
        if (name, namespace) not in self.wanted():
            return  # a late report of a pair no longer wanted
        before = self.states.get((name, namespace))
        self.states[(name, namespace)] = (state, message)
        self._health((name, namespace), (state, message))
        if before != (state, message):
            self._release()

    def state(self, name: str, namespace: str) -> tuple[str, str | None]:
        return self.states.get((name, namespace), (PENDING, f"it is not provisioned in {namespace} yet"))

    def _health(self, key: tuple[str, str], state) -> None:
        name, ns = key
        refused = state is not None and state[0] == REFUSED
        self.c.health.set(f"dataset:{name}:{ns}", f"dataset {name} in {ns} is refused: {state[1] or 'no reason given'}"
                          if refused else None, blocking=False)

    def _release(self) -> None:
        """Held workloads are reconciled again: a dataset they wait for may be Bound now."""
        if self.held:
            self.c.loop.poke(list(self.held))

    # -- workloads ---------------------------------------------------------------------------------
    def check_submission(self, who, spec: dict, namespace: str) -> None:
        """The 403 of a submission naming a dataset that does not exist or its namespace may not use,
        and the 400 of a mount path of its own that clashes with another dataset's."""
        named = spec.get("datasets")
        for item in named or ():
            ds = self.declared.get(item["name"])
            if ds is None:
                raise Forbidden(f"{who.name} may not use dataset {item['name']}: there is no dataset {item['name']}")
            if not self.allows(ds, namespace):
                raise Forbidden(f"{who.name} may not use dataset {ds.name}: it is not for namespace {namespace}")
        mounts = [(item["name"], self._mount_path(item)) for item in named or ()]
        for i, (name, path) in enumerate(mounts):
            for other, other_path in mounts[:i]:
                if paths_clash(path, other_path):
                    raise ValidationError(f"workload: datasets: {name} would be mounted at {path}, which clashes "
                                          f"with {other} at {other_path}; give one a mountPath (NAME:PATH)")

    def _mount_path(self, item: dict) -> str:
        return item.get("mountPath") or self.declared[item["name"]].mount_path

    def _bound_in(self, namespace: str) -> list[dict]:
        return [{"name": name} for (name, ns), (state, _) in sorted(self.states.items())
                if ns == namespace and state == BOUND and name in self.declared]

    def pin(self, row) -> None:
        """A workload naming no dataset starts: what it mounts is what is Bound now, kept in its spec
        (``mounted``), so that a dataset Bound later is not counted as used by it."""
        if row.spec.get("datasets") is None and row.spec.get("mounted") is None:
            row.spec = {**row.spec, "mounted": self._bound_in(row.namespace)}
        if row.spec.get("cached") is None:  # the caches it mounts: kept while it runs, whatever the choice later
            named = row.spec.get("datasets") if row.spec.get("datasets") is not None else row.spec["mounted"]
            cached = {item["name"]: self._fast_claim(item["name"], row.namespace) for item in named}
            row.spec = {**row.spec, "cached": {n: claim for n, claim in cached.items() if claim}}

    def uses(self, row) -> list[dict]:
        """What the workload mounts (or, waiting, will): each ``{"name", "mountPath", "readOnly", "volume"}``."""
        named = row.spec.get("datasets")
        if named is None:  # every dataset Bound in its namespace (when it started, once it has)
            named = row.spec.get("mounted")
        if named is None:
            named = self._bound_in(row.namespace)
        cached = row.spec.get("cached")
        out = []
        for item in named:
            ds = self.declared.get(item["name"])
            if ds is not None:
                claim = cached.get(ds.name) if cached is not None else self._fast_claim(ds.name, row.namespace)
                volume = volume_source(ds) if claim is None else \
                    {"persistentVolumeClaim": {"claimName": claim, "readOnly": ds.read_only}}
                out.append({"name": ds.name, "mountPath": self._mount_path(item), "readOnly": ds.read_only,
                            "volume": volume})
        return out

    def in_use(self, name: str, namespace: str) -> bool:
        """Whether a workload that runs or starts in ``namespace`` mounts ``name``."""
        for wid, row in self.c.rows.items():
            if row.namespace != namespace or wid in self.held:
                continue
            owner = self.c.owners.get(wid)
            if owner is None or not any(p.phase.value in ("Running", "Terminating") for p in owner.pods):
                continue
            if any(u["name"] == name for u in self.uses(row)):
                return True
        return False

    def gate(self, spec: dict, namespace: str) -> Reason | None:
        """Why a workload of ``spec`` in ``namespace`` may not make its next pods now: a dataset it names is
        not Bound there."""
        for item in spec.get("datasets") or ():
            name = item["name"]
            ds = self.declared.get(name)
            if ds is None or not self.allows(ds, namespace):
                why = "it is gone" if ds is None else f"it is no longer for namespace {namespace}"
                return Reason(DATASET_NOT_READY, f"waiting for dataset {name}: {why}",
                              {"dataset": name, "namespace": namespace, "state": "Missing"})
            state, words = self.state(name, namespace)
            if state != BOUND:
                text = f"waiting for dataset {name}: it is {state.lower()} in {namespace}" + \
                       (f": {words}" if words else "")
                return Reason(DATASET_NOT_READY, text, {"dataset": name, "namespace": namespace, "state": state})
        return None

    def hold(self, row, owner, now: float) -> bool:
        """Whether the workload's owner must not make its next pods now (its row then says why, once)."""
        if not row.spec.get("datasets"):
            return False
        reason = self.gate(row.spec, row.namespace) if owner.upcoming(self.c.engine) else None
        if reason is None:
            self.held.pop(row.id, None)
            return False
        before = self.held.get(row.id)
        self.held[row.id] = reason
        if before is None or before.message != reason.message:
            self.c.store.record(now, "waiting", reason.message, row.id, reason.details)
        return True

    def forget(self, wid: str) -> None:
        self.held.pop(wid, None)

    # -- as the API shows them -----------------------------------------------------------------
    def view(self, ds: Dataset) -> dict:
        namespaces = self.namespaces(ds)
        source = ds.source_kind
        detail = {"persistentVolume": _pv_detail, "claim": str, "path": str}[source](ds.source)
        status = {}
        for ns in namespaces:
            state, words = self.state(ds.name, ns)
            status[ns] = {"state": state, "message": words}
        in_use = {ns: self.count_users(ds.name, ns) for ns in namespaces}
        access = list((ds.source or {}).get("accessModes") or []) if source == "persistentVolume" else \
            (["ReadOnlyMany"] if ds.read_only else ["ReadWriteMany"])
        return {"name": ds.name, "description": ds.description, "source": {"kind": source, "detail": detail},
                "readOnly": ds.read_only, "mountPath": ds.mount_path,
                "size": format_milli("storage", ds.size) if ds.size else None, "accessModes": access,
                "teams": list(ds.teams), "namespaces": namespaces, "status": status, "inUse": in_use,
                "origin": self.origins.get(ds.name), "manifest": ds.raw,
                "acceleration": self.acceleration_view(ds, namespaces)}

    def count_users(self, name: str, namespace: str) -> int:
        """How many running workloads of ``namespace`` mount ``name``."""
        count = 0
        for wid, row in self.c.rows.items():
            if row.namespace == namespace and row.state == "Running" and \
                    any(u["name"] == name for u in self.uses(row)):
                count += 1
        return count

    def listing(self, namespaces) -> list[dict]:
        """The datasets of ``namespaces``, one per dataset and namespace (``/me``, for the Lab panel)."""
        out = []
        for ds in sorted(self.for_namespaces(namespaces), key=lambda d: d.name):
            for ns in self.namespaces(ds):
                if ns in namespaces:
                    state, message = self.state(ds.name, ns)
                    out.append({"name": ds.name, "description": ds.description, "mountPath": ds.mount_path,
                                "readOnly": ds.read_only, "state": state, "message": message, "namespace": ns})
        return out

    def for_namespaces(self, namespaces) -> list[Dataset]:
        """The datasets any of ``namespaces`` may use (None: all)."""
        if namespaces is None:
            return list(self.declared.values())
        wanted = set(namespaces)
        return [ds for ds in self.declared.values() if wanted & set(self.namespaces(ds))]


def _pv_detail(spec) -> str:
    """A PV spec in a few words: its volume source and capacity."""
    spec = spec or {}
    skip = {"capacity", "accessModes", "persistentVolumeReclaimPolicy", "storageClassName", "mountOptions",
            "volumeMode", "nodeAffinity", "claimRef"}
    kinds = [k for k in spec if k not in skip]
    where = ""
    if kinds:
        inner = spec[kinds[0]] or {}
        where = f"{kinds[0]} " + str(inner.get("path") or inner.get("volumeHandle") or inner.get("server") or "").strip()
    capacity = (spec.get("capacity") or {}).get("storage")
    return (where.strip() + (f", {capacity}" if capacity else "")).strip(", ") or "a PersistentVolume"
