"""Datasets: shared data declared once, for the teams and namespaces that may use it (issue 20).

The ``Dataset`` object (``tenancy.jupyter.org/v1alpha1``)::

    metadata: {name: fashion-mnist}          # a DNS-1123 label: it names claims and volumes
    spec:
      description: Fashion-MNIST
      teams: [team-a, team-b]                # hub groups, or "*" (everyone); and/or
      namespaces: [team-a, team-b]           # namespaces
      source:                                # exactly one of
        persistentVolume: {...}              #   a PV spec: a PV and a claim per namespace
        claim: fashion-demo-pvc              #   an existing claim of that name in each namespace
        path: /srv/data/fashion              #   a folder (hostPath on Kubernetes)
      readOnly: true                         # default
      mountPath: /datasets/fashion-mnist     # default /datasets/<name>, never under /home
      size: 10Gi                             # what a claim made here asks for

Parsing checks one object; ``check_datasets`` checks a set of them together
(names and mount paths unique). ``claim_refusal`` says whether a namespace's
ResourceQuotas let a claim of the dataset be made, with the quota's numbers.
Who may use a dataset: its ``namespaces``, and every namespace when ``teams``
holds ``"*"``; the hub groups of ``teams`` are resolved by the service.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from . import meta as m
from .errors import ValidationError
from .quantity import MILLI, _show, format_milli, parse_quantity
from .resourcequota import exceeded_message

API_VERSION = "tenancy.jupyter.org/v1alpha1"
KIND = "Dataset"
SOURCES = ("persistentVolume", "claim", "path")
EVERYONE = "*"
HOME = "/home"  # where homes live (the local backend's accounts, z2jh's /home/jovyan): never a mount path
MOUNT_ROOT = "/datasets"
# The ResourceQuota keys a claim counts against.
CLAIM_COUNT_KEYS = ("persistentvolumeclaims", "count/persistentvolumeclaims")
STORAGE_KEY = "requests.storage"
_FIELDS = {"description", "teams", "namespaces", "source", "readOnly", "mountPath", "size"}


@dataclass(frozen=True)
class Dataset:
    name: str
    source_kind: str  # one of SOURCES
    source: object  # the PV spec (a mapping), the claim's name or the folder
    mount_path: str
    description: str = ""
    teams: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    read_only: bool = True
    size: int | None = None  # storage, in milli-units (quantity.py); always set for a persistentVolume
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def makes_claims(self) -> bool:
        """Whether a claim is made here in each namespace (and so counts against its ResourceQuota)."""
        return self.source_kind == "persistentVolume"

    def allows(self, namespace: str) -> bool:
        """Whether work in ``namespace`` may use it, by ``namespaces`` or ``teams: "*"``."""
        return namespace in self.namespaces or EVERYONE in self.teams


def parse_dataset(obj) -> Dataset:
    obj = m.mapping(obj, KIND)
    if obj.get("apiVersion") != API_VERSION:
        raise ValidationError(f"{KIND}: apiVersion must be {API_VERSION}, got {obj.get('apiVersion')!r}")
    name = m.label_name(m.mapping(obj.get("metadata"), f"{KIND}: metadata").get("name"), f"{KIND} metadata.name",
                        "dataset name")
    where = f"{KIND} {name}"
    spec = m.mapping(obj.get("spec"), f"{where}: spec")
    m.unknown_keys(spec, _FIELDS, f"{where}: spec")
    teams = _teams(spec.get("teams"), f"{where}: spec.teams")
    namespaces = tuple(m.namespace_name(ns, f"{where}: spec.namespaces")
                       for ns in m.sequence(spec.get("namespaces"), f"{where}: spec.namespaces"))
    if not teams and not namespaces:
        raise ValidationError(f"{where}: spec names no teams and no namespaces: say who may use it "
                              "(teams: [GROUP, ...] or \"*\", namespaces: [NAMESPACE, ...])")
    kind, source = _source(spec.get("source"), f"{where}: spec.source")
    mount_path = _absolute(spec.get("mountPath", f"{MOUNT_ROOT}/{name}"), f"{where}: spec.mountPath")
    if mount_path == "/" or _inside(mount_path, HOME):
        raise ValidationError(f"{where}: spec.mountPath {mount_path} would cover the home ({HOME}); "
                              f"mount it elsewhere, e.g. {MOUNT_ROOT}/{name}")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise ValidationError(f"{where}: spec.description: expected a string, got {_show(description)}")
    return Dataset(
        name=name, source_kind=kind, source=source, mount_path=mount_path, description=description,
        teams=teams, namespaces=namespaces, read_only=m.boolean(spec.get("readOnly", True), f"{where}: spec.readOnly"),
        size=_size(spec.get("size"), kind, source, where), raw=obj,
    )


def mount_path(value, what: str, name: str) -> str:
    """A mount path as written by a Dataset or a workload naming one: absolute, never going up, never
    on or over the home; normalised."""
    path = _absolute(value, what)
    if path == "/" or _inside(path, HOME) or _inside(HOME, path):
        raise ValidationError(f"{what}: {path} would cover the home ({HOME}); mount it elsewhere, "
                              f"e.g. {MOUNT_ROOT}/{name}")
    return path


def paths_clash(a: str, b: str) -> bool:
    """Whether two mount paths are the same or one is inside the other."""
    return _inside(a, b) or _inside(b, a)


def _teams(value, what: str) -> tuple[str, ...]:
    if value == EVERYONE:
        return (EVERYONE,)
    return tuple(m.string(team, what) for team in m.sequence(value, what))


def _source(value, what: str) -> tuple[str, object]:
    value = m.mapping(value, what, optional=True)
    m.unknown_keys(value, set(SOURCES), what)
    given = [k for k in SOURCES if k in value]
    if len(given) != 1:
        got = " and ".join(given) if given else "none"
        raise ValidationError(f"{what}: give exactly one of {', '.join(SOURCES)} (got {got})")
    kind = given[0]
    if kind == "persistentVolume":
        return kind, m.mapping(value[kind], f"{what}.persistentVolume")
    if kind == "claim":
        return kind, m.object_name(value[kind], f"{what}.claim")
    return kind, _absolute(value[kind], f"{what}.path")


def _absolute(value, what: str) -> str:
    m.string(value, what)
    if not value.startswith("/"):
        raise ValidationError(f"{what}: {_show(value)} is not an absolute path (start it with /)")
    if ".." in value.split("/"):
        raise ValidationError(f"{what}: {_show(value)} goes up with '..'; name the folder itself")
    return posixpath.normpath("/" + value.lstrip("/"))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _size(value, kind: str, source, where: str) -> int | None:
    capacity = None
    if kind == "persistentVolume":
        storage = m.mapping(source.get("capacity"), f"{where}: spec.source.persistentVolume.capacity",
                            optional=True).get("storage")
        if storage is not None:
            capacity = parse_quantity(storage, f"{where}: spec.source.persistentVolume.capacity.storage")
    if value is None:
        if kind == "persistentVolume" and capacity is None:
            raise ValidationError(f"{where}: spec.size is needed for a persistentVolume source (what each "
                                  "namespace's claim asks for), or give the volume's capacity.storage")
        return capacity
    size = parse_quantity(value, f"{where}: spec.size")
    if not size:
        raise ValidationError(f"{where}: spec.size must be more than 0")
    if capacity is not None and size > capacity:
        raise ValidationError(f"{where}: spec.size {format_milli('storage', size)} is more than the volume's "
                              f"capacity.storage {format_milli('storage', capacity)}")
    return size


def check_datasets(datasets) -> None:
    """Datasets that are declared together: each name once, no mount path on or inside another's."""
    seen: dict[str, Dataset] = {}
    for ds in datasets:
        if ds.name in seen:
            raise ValidationError(f"{KIND} {ds.name}: declared twice")
        for other in seen.values():
            if ds.mount_path == other.mount_path:
                raise ValidationError(f"{KIND} {ds.name}: mountPath {ds.mount_path} is also {KIND} {other.name}'s")
            inner, outer = (ds, other) if _inside(ds.mount_path, other.mount_path) else (other, ds)
            if _inside(inner.mount_path, outer.mount_path):
                raise ValidationError(f"{KIND} {ds.name}: mountPath {inner.mount_path} ({KIND} {inner.name}) is "
                                      f"inside {outer.mount_path} ({KIND} {outer.name})")
        seen[ds.name] = ds


def parse_datasets(raws, item, where: str) -> list[Dataset]:
    """Datasets declared together, each parsed (a bad one's line begins ``item(i)``, ``i`` its index
    from 0), then checked together (a clash's line begins ``where``: names, mount paths)."""
    out = []
    for i, raw in enumerate(raws):
        try:
            out.append(parse_dataset(raw))
        except ValidationError as err:
            raise err.within(item(i)) from None
    try:
        check_datasets(out)
    except ValidationError as err:
        raise err.within(where) from None
    return out


def claim_need(ds: Dataset) -> dict[str, int]:
    """What one claim of ``ds`` adds to each quota key a claim counts against (nothing without a claim)."""
    if not ds.makes_claims:
        return {}
    return {**{key: MILLI for key in CLAIM_COUNT_KEYS}, STORAGE_KEY: ds.size or 0}


def claim_refusal(ds: Dataset, quotas, used: dict[str, int]) -> str | None:
    """The quota's words when a namespace's ResourceQuotas forbid a claim of ``ds``, else None.

    ``quotas`` are the namespace's ResourceQuotas; ``used`` what the namespace's
    other claims already count (keys of ``claim_need``). Scoped quotas count pods
    only, as on the API server.
    """
    need = claim_need(ds)
    for quota in quotas:
        if quota.scopes:
            continue
        asked = {key: amount for key, amount in need.items() if key in quota.hard}
        over = exceeded_message(quota, asked, used)
        if over:
            return f'persistentvolumeclaims "{ds.name}" is forbidden: {over}'
    return None



# -- what a backend makes of a dataset in one namespace, and how work mounts it -----------------

def claim_name(ds: Dataset) -> str | None:
    """The PersistentVolumeClaim work in a namespace mounts for ``ds``: the one made here (named
    after the dataset) for a ``persistentVolume`` source, the existing one for a ``claim`` source,
    None for a ``path`` (a folder; ``hostPath`` on Kubernetes)."""
    if ds.source_kind == "persistentVolume":
        return ds.name
    if ds.source_kind == "claim":
        return str(ds.source)
    return None


def volume_name(ds: Dataset, namespace: str) -> str:
    """The PersistentVolume made for ``ds`` in ``namespace`` (a static PV binds one claim only, so
    each namespace has its own, from the same source). Cluster-scoped, so it names both; at most
    253 characters, a DNS subdomain."""
    return f"tenancy-{ds.name}.{namespace}"


def volume_source(ds: Dataset) -> dict:
    """The pod volume source that mounts ``ds`` (Kubernetes' shape, also what the workload's view
    carries): the claim, read-only as the dataset says, or the folder as a ``hostPath``."""
    claim = claim_name(ds)
    if claim is not None:
        return {"persistentVolumeClaim": {"claimName": claim, "readOnly": ds.read_only}}
    return {"hostPath": {"path": str(ds.source), "type": "Directory"}}
