"""Accelerated datasets on the cluster: a Fluid ``Dataset`` and ``AlluxioRuntime`` in front of a dataset.

Where Fluid's CRDs are served (``data.fluid.io/v1alpha1`` ``datasets`` and
``alluxioruntimes``), an admin may accelerate a dataset (``controller.datasets.accelerated``).
For each namespace that may use it, this room makes a Fluid ``Dataset`` named
``<name>-accelerated`` whose one mount is the dataset's source (``pvc://<its claim>``
for a ``persistentVolume`` or ``claim`` source, ``local://<path>`` for a folder) and an
``AlluxioRuntime`` of the same name (Fluid binds a runtime to the dataset of its name)
with a small memory tier (``fluid_cache_memory``). Both are labelled ours.

Fluid's controller (not ours) then makes a PersistentVolumeClaim named after the Fluid
``Dataset``, ``<name>-accelerated`` (hence that name: ours is named after the dataset
itself). Until that claim exists and is Bound the acceleration is Pending, "waiting for
Fluid to make claim <x>", and work mounts the dataset's own claim; once it is Bound, work
that starts mounts it instead (``set_acceleration(..., claim)``). An object the API server
refuses (a 422 of Fluid's schema) makes the pair Refused with the API server's words, not
tried again until the dataset, the choice or the configuration changes. Turning the
choice off deletes both objects once nothing uses the dataset in that namespace
(``controller.datasets.in_use``).

Whether Fluid is there is read from the discovery API in a worker thread (at start and at
most every ``fluid_check_seconds`` while datasets are reconciled); ``why`` is its answer:
None, or the sentence the API's 409 and the page's button show.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

from ...quota.dataset import claim_name
from .api import Kind, KubernetesError
from .informer import outage_error
from .objects import MANAGED_BY, MANAGER

GROUP, VERSION = "data.fluid.io", "v1alpha1"
FLUID_DATASET = Kind("Dataset", f"{GROUP}/{VERSION}", "datasets", True)
RUNTIME = Kind("AlluxioRuntime", f"{GROUP}/{VERSION}", "alluxioruntimes", True)
SUFFIX = "-accelerated"
BOUND, PENDING, REFUSED = "Bound", "Pending", "Refused"
NO_FLUID = (f"the cluster has no Fluid ({GROUP} Dataset and runtime CRDs); install Fluid to accelerate datasets")
NOT_ASKED = "the cluster has not been asked yet whether it has Fluid; try again in a moment"
#: on our Fluid objects: the dataset they accelerate, and what they were made from (a change remakes them)
DATASET_LABEL = "tenancy.jupyter.org/dataset"
SPEC_ANNOTATION = "tenancy.jupyter.org/accelerated-from"
OURS = f"{MANAGED_BY}={MANAGER},{DATASET_LABEL}"


def fluid_name(ds) -> str:
    """The Fluid Dataset and runtime of ``ds``, and so the claim Fluid makes: ``<name>-accelerated``."""
    return ds.name + SUFFIX


def mount_point(ds) -> str:
    """Where Fluid reads the dataset from: its claim in the namespace, or its folder on the nodes."""
    claim = claim_name(ds)
    return f"pvc://{claim}" if claim is not None else f"local://{ds.source}"


def _words(err: KubernetesError) -> str:
    text = str(err)
    head, sep, rest = text.partition(": ")
    return rest if sep and head.split(" ", 1)[0].isdigit() else text


class Fluid:
    """The backend's accelerated datasets: whether Fluid is served, the objects made, their states."""

    def __init__(self, backend):
        self.backend = backend  # its API, calls, log, configuration and controller
        self.why: str | None = NOT_ASKED
        self.checked_at: float | None = None  # loop time of the last discovery
        self.states: dict[tuple[str, str], tuple[str, str | None]] = {}
        self.refused: dict[tuple[str, str], str] = {}  # pair -> the digest that was refused
        self.held: set[tuple[str, str]] = set()  # no longer chosen, still in use: removed later

    # -- is Fluid there -----------------------------------------------------------------------
    def probe(self) -> str | None:
        """Ask the discovery API (a worker thread): None when Fluid's Dataset and AlluxioRuntime are
        served, else the sentence why acceleration cannot be had."""
        api = self.backend.api
        if VERSION not in (api.served_versions().get(GROUP) or []):
            return NO_FLUID
        served = api.served_resources(f"{GROUP}/{VERSION}")
        missing = [p for p in (FLUID_DATASET.plural, RUNTIME.plural) if p not in served]
        if missing:
            return (f"the cluster's Fluid serves no {' or '.join(missing)} ({GROUP}/{VERSION}); install Fluid "
                    "with its Dataset and AlluxioRuntime CRDs to accelerate datasets")
        return None

    async def check(self, now: float | None = None) -> str | None:
        """Discover again (in the worker pool); an API server that does not answer keeps the last answer."""
        b = self.backend
        try:
            why = await b.calls.call(self.probe)
        except KubernetesError as err:
            if not outage_error(err):
                raise
            return self.why
        if why != self.why:
            b.log.info("dataset acceleration: %s", "Fluid is served" if why is None else why)
        self.why, self.checked_at = why, now
        return why

    async def follow(self) -> None:
        """Ask whether Fluid is served now and every ``fluid_check_seconds``; its coming or going is a
        change for the datasets (their caches are made or waited for)."""
        b = self.backend
        loop = asyncio.get_running_loop()
        while True:
            before = self.why
            try:
                await self.check(loop.time())
            except KubernetesError as err:
                b.log.warning("could not ask whether Fluid is installed: %s", err)
            if self.why != before and b.datasets.wanted is not None:
                b.datasets.kick()
            await asyncio.sleep(b.fluid_check_seconds)

    def stale(self, now: float) -> bool:
        return self.checked_at is None or now - self.checked_at >= self.backend.fluid_check_seconds

    # -- the objects --------------------------------------------------------------------------
    def labels(self, ds) -> dict:
        return {**self.backend.extra_labels, MANAGED_BY: MANAGER, DATASET_LABEL: ds.name}

    def manifests(self, ds, ns: str) -> list[dict]:
        """The Fluid Dataset and its AlluxioRuntime for ``ds`` in ``ns``."""
        b, name = self.backend, fluid_name(ds)
        dataset_spec = {"mounts": [{"name": ds.name, "mountPoint": mount_point(ds), "path": "/",
                                    "readOnly": ds.read_only}],
                        "accessModes": ["ReadOnlyMany" if ds.read_only else "ReadWriteMany"]}
        runtime_spec = {"replicas": b.fluid_replicas,
                        "tieredstore": {"levels": [{"mediumtype": "MEM", "path": "/dev/shm",
                                                    "quota": b.fluid_cache_memory, "high": "0.95", "low": "0.7"}]}}
        out = []
        for kind, spec in ((FLUID_DATASET, dataset_spec), (RUNTIME, runtime_spec)):
            digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
            out.append({"apiVersion": kind.group_version, "kind": kind.name,
                        "metadata": {"name": name, "namespace": ns, "labels": self.labels(ds),
                                     "annotations": {SPEC_ANNOTATION: digest}},
                        "spec": spec})
        return out

    def _digest(self, manifests) -> str:
        return ",".join(m["metadata"]["annotations"][SPEC_ANNOTATION] for m in manifests)

    async def ensure(self, ds, ns: str, plain: tuple[str, str | None], claims: dict) -> tuple[str, str | None]:
        """Make the pair's Fluid objects (once the dataset itself is Bound there) and say how its cache is."""
        if self.why is not None:
            return PENDING, self.why
        if plain[0] != BOUND:
            return PENDING, f"waiting for the dataset itself in {ns} (it is {plain[0].lower()})" + \
                (f": {plain[1]}" if plain[1] else "")
        pair, wanted = (ds.name, ns), self.manifests(ds, ns)
        digest = self._digest(wanted)
        if self.refused.get(pair) == digest:
            return self.states.get(pair, (REFUSED, None))
        b = self.backend
        for manifest, kind in zip(wanted, (FLUID_DATASET, RUNTIME)):
            name = manifest["metadata"]["name"]
            found = await b.calls.call(b.api.read, kind, ns, name)
            if found is not None and (found["metadata"].get("labels") or {}).get(DATASET_LABEL) != ds.name:
                return self._refuse(pair, digest, f"{kind.name} {ns}/{name} exists and was not made by "
                                                  "jupyterhub-tenancy for this dataset; remove it or rename the dataset")
            have = (found or {}).get("metadata", {}).get("annotations", {}).get(SPEC_ANNOTATION)
            try:
                if found is None:
                    await b.calls.call(b.api.create, kind, manifest)
                    b.log.info("made Fluid %s %s/%s to accelerate dataset %s", kind.name, ns, name, ds.name)
                elif have != manifest["metadata"]["annotations"][SPEC_ANNOTATION]:
                    body = {**manifest, "metadata": {**manifest["metadata"],
                                                     "resourceVersion": found["metadata"]["resourceVersion"]}}
                    await b.calls.call(b.api.replace, kind, body)
            except KubernetesError as err:
                if outage_error(err) or err.status == 409:
                    raise  # tried again at the next pass
                return self._refuse(pair, digest, f"{kind.name} {ns}/{name}: {_words(err)}")
        self.refused.pop(pair, None)
        claim = claims.get((ns, fluid_name(ds)))
        phase = ((claim or {}).get("status") or {}).get("phase")
        if claim is not None and phase == BOUND:
            return BOUND, None
        what = f"waiting for Fluid to make claim {fluid_name(ds)} in {ns}"
        if claim is not None:
            what += f" (it is {phase or 'Pending'})"
        return PENDING, what + f" from its Dataset and AlluxioRuntime {fluid_name(ds)}"

    def _refuse(self, pair, digest: str, message: str) -> tuple[str, str]:
        if self.states.get(pair) != (REFUSED, message):
            self.backend.log.warning("accelerating dataset %s in %s is refused: %s", *pair, message)
        self.refused[pair] = digest
        return REFUSED, message

    def tell(self, pair, state: str, message: str | None, claim: str | None) -> None:
        self.states[pair] = (state, message)
        room = self.backend.datasets_room
        if room is not None:
            room.set_acceleration(pair[0], pair[1], state, message, claim if state == BOUND else None)

    # -- what is no longer chosen -------------------------------------------------------------
    async def remove_unwanted(self, wanted_pairs: set, in_use) -> None:
        """Delete our Fluid objects of pairs no longer accelerated, once nothing uses the dataset there."""
        if self.why is not None:
            return  # nothing of Fluid is served: nothing of ours can be there
        b = self.backend
        ours: dict[tuple[str, str], list] = {}
        for kind in (RUNTIME, FLUID_DATASET):
            for obj in await b.calls.call(b.api.list, kind, OURS):
                meta = obj["metadata"]
                pair = (meta["labels"][DATASET_LABEL], meta["namespace"])
                ours.setdefault(pair, []).append((kind, meta["name"]))
        self.held = set()
        for pair, objects in sorted(ours.items()):
            if pair in wanted_pairs:
                continue
            if in_use(*pair):
                self.held.add(pair)
                continue
            for kind, name in objects:  # the runtime first: Fluid tears the cache down from it
                await b.calls.call(b.api.delete, kind, pair[1], name)
            self.states.pop(pair, None)
            self.refused.pop(pair, None)
            b.log.info("removed the Fluid objects of dataset %s in %s (no longer accelerated, nothing mounts it)",
                       *pair)
