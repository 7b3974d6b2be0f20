"""Datasets on the cluster: what each namespace that may use a dataset needs, made, followed and removed.

The service decides which namespaces may use which dataset and hands the pairs
over (``KubernetesBackend.datasets_changed(wanted)``); this room makes them so:

- a ``persistentVolume`` source: a static PV binds one claim only, so each namespace
  gets its own PersistentVolume ``volume_name(ds, ns)`` (the dataset's PV spec, its
  ``claimRef`` pointing at ``ns/claim_name(ds)``) and a PersistentVolumeClaim
  ``claim_name(ds)`` in ``ns`` bound to it by ``volumeName`` (the PV's access modes,
  storage class and ``ds.size``). Both are labelled ours (``managed-by``, the dataset
  and, on the PV, the namespace). ``Bound`` once the API server says the claim is
  (kube-controller-manager's PV controller binds it); ``Pending`` with the binder's
  words (the claim's latest event) until then; ``Refused`` with the API server's
  words when it refuses the claim (a ResourceQuota's ``exceeded quota``) or the
  volume (an invalid spec). A refusal is not retried on its own: only when what
  decided it changes (the namespace's ResourceQuotas, the dataset, the tenants).
- a ``claim`` source: nothing is made; ``Bound`` while that claim exists and is Bound.
- a ``path`` source: nothing is made (a ``hostPath``); ``Bound``.

An accelerated dataset (an admin's choice, ``controller.datasets.accelerated``) also gets a
Fluid Dataset and runtime per namespace once its own pair is Bound (``fluid.Fluid``).

Drift is repaired as the provisioner repairs a tenant: the watches of claims and of
our volumes see a deletion and the pair is made again (a volume left ``Released``
by its deleted claim is pointed at the new one). A pair no longer wanted loses its
claim, then its volume, once ``controller.datasets.in_use(name, ns)`` is false;
while something still mounts it, it is looked at again every
``dataset_recheck_seconds``. Every API call runs in the backend's worker pool
(``calls.Calls``); the watches are ``informer.Informer``s, handled on the loop.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json

from ...quota.dataset import claim_name, volume_name
from ...quota.quantity import format_milli
from .api import RESOURCE_QUOTA, Kind, KubernetesError
from .fluid import fluid_name
from .informer import Informer, outage_error
from .objects import MANAGED_BY, MANAGER

PV = Kind("PersistentVolume", "v1", "persistentvolumes", False)
PVC = Kind("PersistentVolumeClaim", "v1", "persistentvolumeclaims", True)
BOUND, PENDING, REFUSED = "Bound", "Pending", "Refused"

#: on the claims and volumes we make: the dataset they are for, and (on the cluster-scoped volume) the namespace
DATASET_LABEL = "tenancy.jupyter.org/dataset"
NAMESPACE_LABEL = "tenancy.jupyter.org/namespace"
#: what a pair was made from (a hash of the dataset's source and size): a change remakes it
SOURCE_ANNOTATION = "tenancy.jupyter.org/dataset-source"
OURS = f"{MANAGED_BY}={MANAGER},{DATASET_LABEL}"
#: ResourceQuota keys whose use decides whether a claim is allowed (a change of these is worth a new try)
_STORAGE_KEYS = ("persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage")


def source_hash(ds) -> str:
    """What the pair is made from, as a short hash (its PV spec and claim size)."""
    text = json.dumps([ds.source, ds.size], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _words(err: KubernetesError) -> str:
    """The API server's own message, without the ``403 Forbidden:`` in front."""
    text = str(err)
    head, sep, rest = text.partition(": ")
    return rest if sep and head.split(" ", 1)[0].isdigit() else text


def _storage_key(key: str) -> bool:
    return key in _STORAGE_KEYS or ".storageclass.storage.k8s.io/" in key


def quota_signature(quotas: list[dict]) -> str:
    """What of a namespace's ResourceQuotas decides a claim: each one's limits (spec and what the
    quota controller enforces) and its storage use; not its pods' use, which changes all the time."""
    view = []
    for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        status = q.get("status") or {}
        used = {k: v for k, v in (status.get("used") or {}).items() if _storage_key(k)}
        view.append([q["metadata"]["name"], (q.get("spec") or {}).get("hard"), status.get("hard"), used])
    return json.dumps(view, sort_keys=True)


class Datasets:
    """The backend's datasets on the cluster: the pairs wanted, their claims and volumes, their states."""

    def __init__(self, backend):
        self.backend = backend  # its API, calls, monitor, controller, log and configuration
        self.wanted: dict[tuple[str, str], object] | None = None  # (name, namespace) -> Dataset
        self.wanted_key = None  # what ``wanted`` was when refusals were last forgotten
        self.chosen_key = None  # what was accelerated when the caches' refusals were last forgotten
        self.states: dict[tuple[str, str], tuple[str, str | None]] = {}  # last reported
        self.refused: dict[tuple[str, str], tuple[str, str]] = {}  # pair -> (source hash, quota signature)
        # pair -> the quota signature when its pass began: a refusal is kept against the quota the API
        # server answered for, not one that changed while the call was out (it is tried again then)
        self.asked: dict[tuple[str, str], str] = {}
        self.held: set[tuple[str, str]] = set()  # no longer wanted, still in use: removed later
        self.claims: dict[tuple[str, str], dict] = {}  # (namespace, name) -> every claim of the cluster
        self.volumes: dict[str, dict] = {}  # name -> our PersistentVolumes
        self.quotas: dict[str, dict[str, dict]] = {}  # namespace -> name -> ResourceQuota
        self.watches: list[Informer] = []
        self.dirty: asyncio.Event | None = None
        self.task: asyncio.Task | None = None
        self.passes = 0  # reconciles done (tests and the replay wait on it)
        self.busy = False

    # -- what the service tells us ------------------------------------------------------------
    def changed(self, wanted) -> None:
        """The pairs wanted now (on the loop): report what is known of them, reconcile in the background."""
        self.wanted = dict(wanted)
        key = sorted((name, ns, source_hash(ds)) for (name, ns), ds in self.wanted.items())
        if key != self.wanted_key:  # a dataset or a tenant changed: what was refused may pass now
            self.wanted_key = key
            self.refused.clear()
            self.backend.fluid.refused.clear()
        chosen = sorted(self.chosen())
        if chosen != self.chosen_key:  # the choice changed: a cache refused before is tried again
            self.chosen_key = chosen
            self.backend.fluid.refused.clear()
        for pair, (state, message) in list(self.states.items()):
            if pair in self.wanted:
                self._tell(pair, state, message)
        self.kick()

    def chosen(self) -> set[str]:
        """The names an admin chose to accelerate (the service's room says)."""
        room = self.backend.datasets_room
        return set(getattr(room, "accelerated", None) or ())

    def kick(self) -> None:
        """Reconcile soon (starting the watches and the worker on first use)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving (a dry run): nothing to do on the cluster
        if self.dirty is None:
            self.dirty = asyncio.Event()
        self.dirty.set()
        if self.task is None or self.task.done():
            self._watch(loop)
            self.task = asyncio.ensure_future(self._work())

    def close(self) -> None:
        for watch in self.watches:
            watch.stop()
        if self.task is not None:
            self.task.cancel()

    # -- the watches --------------------------------------------------------------------------
    def _watch(self, loop) -> None:
        if self.watches:
            return
        b = self.backend
        common = dict(timeout_seconds=b.relist_seconds, monitor=b.monitor, log=b.log)
        self.watches = [
            Informer(b.api, PVC, None, loop, self._claim_event, name="persistentvolumeclaims", **common).start(),
            Informer(b.api, PV, OURS, loop, self._volume_event, name="dataset persistentvolumes", **common).start(),
            Informer(b.api, RESOURCE_QUOTA, None, loop, self._quota_event, name="resourcequotas (datasets)",
                     **common).start(),
        ]

    @property
    def synced(self) -> bool:
        return bool(self.watches) and all(w.synced.is_set() for w in self.watches)

    def _claim_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            self.claims = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in obj}
            self.kick()
            return
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if kind == "DELETED":
            self.claims.pop(key, None)
        else:
            self.claims[key] = obj
        if self._concerns(key):
            self.kick()

    def _concerns(self, claim_key) -> bool:
        namespace, name = claim_key
        return any(ns == namespace and name in (claim_name(ds), fluid_name(ds))
                   for (_, ns), ds in (self.wanted or {}).items()) \
            or any(pair[1] == namespace for pair in self.held)

    def _volume_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            self.volumes = {o["metadata"]["name"]: o for o in obj}
        elif kind == "DELETED":
            self.volumes.pop(obj["metadata"]["name"], None)
        else:
            self.volumes[obj["metadata"]["name"]] = obj
        self.kick()

    def _quota_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            before = {ns: self.quota_signature(ns) for ns in self.quotas}
            self.quotas = {}
            for o in obj:
                self.quotas.setdefault(o["metadata"]["namespace"], {})[o["metadata"]["name"]] = o
            changed = {ns for ns in set(before) | set(self.quotas) if before.get(ns) != self.quota_signature(ns)}
        else:
            ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            before = self.quota_signature(ns)
            if kind == "DELETED":
                self.quotas.get(ns, {}).pop(name, None)
            else:
                self.quotas.setdefault(ns, {})[name] = obj
            changed = {ns} if before != self.quota_signature(ns) else set()
        if any(pair[1] in changed for pair in self.refused):
            self.kick()

    def quota_signature(self, namespace: str) -> str:
        return quota_signature(list(self.quotas.get(namespace, {}).values()))

    # -- the worker ---------------------------------------------------------------------------
    async def _work(self) -> None:
        b = self.backend
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not self.synced and loop.time() < deadline:  # the first lists, so that nothing is made twice
            await asyncio.sleep(0.05)
        while True:
            if not self.held and not self.backend.fluid.held and not self._pending():
                await self.dirty.wait()
            else:  # something to look at again (a claim binding, a pair in use): not only on events
                try:
                    await asyncio.wait_for(self.dirty.wait(), b.dataset_recheck_seconds)
                except asyncio.TimeoutError:
                    pass
            self.dirty.clear()
            self.busy = True
            try:
                await self.reconcile()
            except Exception:  # noqa: BLE001 - tried again at the next change or recheck
                b.log.exception("reconciling datasets failed")
            finally:
                self.busy = False
                self.passes += 1

    def _pending(self) -> bool:
        wanted = self.wanted or {}
        return any(state == PENDING for pair, (state, _) in self.states.items() if pair in wanted) or \
            any(state == PENDING for pair, (state, _) in self.backend.fluid.states.items() if pair in wanted)

    async def reconcile(self) -> None:
        """Make every wanted pair, report its state; remove what is ours and no longer wanted."""
        wanted = dict(self.wanted or {})
        for (name, ns), ds in sorted(wanted.items()):
            try:
                state, message = await self.ensure(ds, ns)
            except KubernetesError as err:
                if not outage_error(err):
                    raise
                state, message = PENDING, f"the API server does not answer ({err})"
            if (self.wanted or {}).get((name, ns)) is ds:  # still wanted as it was
                self._tell((name, ns), state, message)
        await self.remove_unwanted(wanted)
        await self.accelerate(wanted)

    async def accelerate(self, wanted) -> None:
        """The caches of the accelerated datasets (``fluid.Fluid``): made where chosen, removed where not."""
        fluid = self.backend.fluid
        if fluid.checked_at is None:
            await fluid.check(asyncio.get_running_loop().time())
        chosen = self.chosen()
        fast = {pair: ds for pair, ds in wanted.items() if pair[0] in chosen}
        for (name, ns), ds in sorted(fast.items()):
            try:
                state, message = await fluid.ensure(ds, ns, self.states.get((name, ns), (PENDING, None)), self.claims)
            except KubernetesError as err:
                if not (outage_error(err) or err.status == 409):
                    raise
                state, message = PENDING, f"the API server did not make it yet ({err})"
            if (self.wanted or {}).get((name, ns)) is ds and name in self.chosen():
                fluid.tell((name, ns), state, message, fluid_name(ds))
        for pair in [p for p in fluid.states if p not in fast]:
            fluid.states.pop(pair, None)
        await fluid.remove_unwanted(set(fast), self._in_use)

    def _tell(self, pair, state: str, message: str | None) -> None:
        self.states[pair] = (state, message)
        controller = self.backend.controller
        if controller is not None:
            controller.dataset_state(pair[0], pair[1], state, message)

    # -- one pair -----------------------------------------------------------------------------
    async def ensure(self, ds, ns: str) -> tuple[str, str | None]:
        if ds.source_kind == "path":
            return BOUND, None
        if ds.source_kind == "claim":
            return await self._existing_claim(ds, ns)
        pair, digest = (ds.name, ns), source_hash(ds)
        self.asked[pair] = self.quota_signature(ns)
        if self.refused.get(pair) == (digest, self.asked[pair]):
            return self.states.get(pair, (REFUSED, None))
        volume = await self._ensure_volume(ds, ns, digest)
        if isinstance(volume, tuple):
            return volume
        return await self._ensure_claim(ds, ns, digest, volume)

    async def _existing_claim(self, ds, ns: str) -> tuple[str, str | None]:
        name = claim_name(ds)
        claim = await self._claim(ns, name)
        if claim is None:
            return PENDING, f"there is no PersistentVolumeClaim {name} in {ns}; make it there (the dataset names it)"
        phase = (claim.get("status") or {}).get("phase") or "Pending"
        if phase == BOUND:
            return BOUND, None
        return PENDING, f"PersistentVolumeClaim {ns}/{name} is {phase}" + await self._binder_words(ns, name)

    async def _claim(self, ns: str, name: str) -> dict | None:
        if self.synced:
            return self.claims.get((ns, name))
        return await self.backend.calls.call(self.backend.api.read, PVC, ns, name)

    def labels(self, ds, ns: str | None = None) -> dict:
        out = {**self.backend.extra_labels, MANAGED_BY: MANAGER, DATASET_LABEL: ds.name}
        if ns is not None:
            out[NAMESPACE_LABEL] = ns
        return out

    def volume_manifest(self, ds, ns: str, digest: str) -> dict:
        spec = copy.deepcopy(dict(ds.source))
        spec["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                            "name": claim_name(ds)}
        return {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": volume_name(ds, ns), "labels": self.labels(ds, ns),
                             "annotations": {SOURCE_ANNOTATION: digest}},
                "spec": spec}

    def claim_manifest(self, ds, ns: str, digest: str) -> dict:
        source = dict(ds.source)
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name(ds), "namespace": ns, "labels": self.labels(ds),
                             "annotations": {SOURCE_ANNOTATION: digest}},
                "spec": {"accessModes": list(source.get("accessModes") or ["ReadOnlyMany"]),
                         # "" and not unset: a default StorageClass must not be given to a claim of a static volume
                         "storageClassName": source.get("storageClassName") or "",
                         "volumeName": volume_name(ds, ns),
                         "resources": {"requests": {"storage": format_milli("storage", ds.size or 0)}}}}

    async def _ensure_volume(self, ds, ns: str, digest: str):
        """Our volume for the pair (made or repaired), or the pair's (state, message) when it cannot be had now."""
        b, name = self.backend, volume_name(ds, ns)
        volume = self.volumes.get(name) if self.synced else await b.calls.call(b.api.read, PV, None, name)
        if volume is None:
            try:
                return await b.calls.call(b.api.create, PV, self.volume_manifest(ds, ns, digest))
            except KubernetesError as err:
                if err.status == 409:  # made meanwhile (ours, not seen yet), or someone else's
                    volume = await b.calls.call(b.api.read, PV, None, name)
                    if volume is None:
                        return PENDING, f"PersistentVolume {name} is being deleted; it is made again once gone"
                elif outage_error(err):
                    raise
                else:
                    return self._refuse(ds, ns, digest, f"PersistentVolume {name}: {_words(err)}")
        meta = volume["metadata"]
        if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGER:
            return self._refuse(ds, ns, digest, f"PersistentVolume {name} exists and was not made by jupyterhub-tenancy; "
                                                "remove it or rename the dataset")
        if meta.get("deletionTimestamp"):
            return PENDING, f"PersistentVolume {name} is being deleted; it is made again once gone"
        if (meta.get("annotations") or {}).get(SOURCE_ANNOTATION) != digest:
            return await self._remake(ds, ns, volume)
        if (volume.get("status") or {}).get("phase") == "Released":
            # its claim was deleted: the volume still names the old claim's uid; point it at the claim made anew
            fixed = copy.deepcopy(volume)
            fixed.pop("status", None)
            fixed["metadata"].pop("managedFields", None)
            fixed["spec"]["claimRef"] = self.volume_manifest(ds, ns, digest)["spec"]["claimRef"]
            try:
                volume = await b.calls.call(b.api.replace, PV, fixed)
            except KubernetesError as err:
                if err.status != 409:
                    raise
                # kube-controller-manager's volume controller wrote it meanwhile (our copy is older): the
                # watch brings the new one and the next pass points it again; not a failure
                return PENDING, f"PersistentVolume {name} was released by its deleted claim; it is being repaired"
            b.log.info("PersistentVolume %s was released by its deleted claim; pointed at %s/%s again", name, ns,
                       claim_name(ds))
        return volume

    async def _remake(self, ds, ns: str, volume: dict) -> tuple[str, str]:
        """The dataset's source changed: a volume's source cannot be changed, so the pair is made anew,
        once nothing mounts the old one."""
        name = volume["metadata"]["name"]
        if self._in_use(ds.name, ns):
            return PENDING, (f"the dataset's source changed; PersistentVolume {name} is made anew once no "
                             f"workload in {ns} mounts it")
        await self._delete_pair(ds.name, ns)
        return PENDING, f"the dataset's source changed; PersistentVolume {name} is being made anew"

    async def _ensure_claim(self, ds, ns: str, digest: str, volume: dict) -> tuple[str, str | None]:
        b, name = self.backend, claim_name(ds)
        claim = await self._claim(ns, name)
        if claim is None:
            try:
                claim = await b.calls.call(b.api.create, PVC, self.claim_manifest(ds, ns, digest))
                b.log.info("made PersistentVolumeClaim %s/%s for dataset %s", ns, name, ds.name)
            except KubernetesError as err:
                if outage_error(err):
                    raise
                if err.status == 409:
                    claim = await b.calls.call(b.api.read, PVC, ns, name)
                    if claim is None:
                        return PENDING, f"PersistentVolumeClaim {ns}/{name} is being deleted; it is made again once gone"
                elif err.status == 403 and "status unknown for quota" in str(err):
                    # the quota controller has not counted the namespace yet: not a refusal, a moment's wait
                    return PENDING, _words(err)
                else:
                    # A pass that raced this one may have made the claim just now (our cache has not seen
                    # it): the quota then refuses a second one. The claim that exists is the answer.
                    claim = await b.calls.call(b.api.read, PVC, ns, name) if err.status == 403 else None
                    if claim is None:
                        return self._refuse(ds, ns, digest, _words(err))
        meta = claim["metadata"]
        if (meta.get("labels") or {}).get(DATASET_LABEL) != ds.name:
            return self._refuse(ds, ns, digest, f"PersistentVolumeClaim {ns}/{name} exists and was not made by "
                                                "jupyterhub-tenancy for this dataset; remove it or rename the dataset")
        if meta.get("deletionTimestamp"):
            return PENDING, f"PersistentVolumeClaim {ns}/{name} is being deleted; it is made again once gone"
        self.refused.pop((ds.name, ns), None)
        phase = (claim.get("status") or {}).get("phase") or "Pending"
        if phase == BOUND:
            return BOUND, None
        return PENDING, (f"PersistentVolumeClaim {ns}/{name} is {phase}, waiting for PersistentVolume "
                         f"{volume['metadata']['name']}" + await self._binder_words(ns, name))

    def _refuse(self, ds, ns: str, digest: str, message: str) -> tuple[str, str]:
        pair = (ds.name, ns)
        if self.states.get(pair) != (REFUSED, message):
            self.backend.log.warning("dataset %s in %s is refused: %s", ds.name, ns, message)
        asked = self.asked.get(pair, self.quota_signature(ns))
        self.refused[pair] = (digest, asked)
        if asked != self.quota_signature(ns):  # the quota changed while the call was out: ask again
            self.kick()
        return REFUSED, message

    async def _binder_words(self, ns: str, name: str) -> str:
        """``: <the latest event of the claim>`` (the PV controller's words), or nothing."""
        b = self.backend
        try:
            found = await b.calls.call(b.api.request, "GET", f"/api/v1/namespaces/{ns}/events", query={
                "fieldSelector": f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name}"})
        except KubernetesError as err:
            if outage_error(err):
                raise
            return ""
        events = sorted(found.get("items") or [], key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        return f": {' '.join(events[-1]['message'].split())}" if events and events[-1].get("message") else ""

    # -- what is no longer wanted -------------------------------------------------------------
    def _in_use(self, name: str, ns: str) -> bool:
        room = self.backend.datasets_room
        return bool(room is not None and room.in_use(name, ns))

    async def remove_unwanted(self, wanted) -> None:
        ours = await self._ours()
        self.held = set()
        for pair in sorted(ours - set(wanted)):
            if self._in_use(*pair):
                self.held.add(pair)
                continue
            await self._delete_pair(*pair)
            self.states.pop(pair, None)
            self.refused.pop(pair, None)
            self.asked.pop(pair, None)
            self.backend.log.info("removed dataset %s from %s (no longer wanted, nothing mounts it)", *pair)

    async def _ours(self) -> set[tuple[str, str]]:
        """The (dataset, namespace) pairs we made on the cluster (a claim or a volume of ours)."""
        b = self.backend
        if self.synced:
            claims = [c for c in self.claims.values()
                      if (c["metadata"].get("labels") or {}).get(MANAGED_BY) == MANAGER]
            volumes = list(self.volumes.values())
        else:
            claims = await b.calls.call(b.api.list, PVC, OURS)
            volumes = await b.calls.call(b.api.list, PV, OURS)
        pairs = set()
        for c in claims:
            labels = c["metadata"].get("labels") or {}
            if labels.get(DATASET_LABEL) and not c["metadata"].get("deletionTimestamp"):
                pairs.add((labels[DATASET_LABEL], c["metadata"]["namespace"]))
        for v in volumes:
            labels = v["metadata"].get("labels") or {}
            if labels.get(DATASET_LABEL) and labels.get(NAMESPACE_LABEL) and not v["metadata"].get("deletionTimestamp"):
                pairs.add((labels[DATASET_LABEL], labels[NAMESPACE_LABEL]))
        return pairs

    async def _delete_pair(self, name: str, ns: str) -> None:
        """The claim first (what mounts see), then the volume: both ours (found by their labels)."""
        b = self.backend
        for claim in await b.calls.call(b.api.list, PVC, f"{OURS}={name}", ns):
            await b.calls.call(b.api.delete, PVC, ns, claim["metadata"]["name"])
        for volume in await b.calls.call(b.api.list, PV, f"{OURS}={name},{NAMESPACE_LABEL}={ns}"):
            await b.calls.call(b.api.delete, PV, None, volume["metadata"]["name"])
