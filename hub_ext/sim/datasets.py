"""Datasets in a scenario: each dataset's claim per namespace, and whether work naming datasets may start.

In a scenario only a dataset's ``namespaces`` (and ``teams: "*"``, every
namespace) decide who may use it: teams are hub groups, and a scenario has
none. For each namespace that may use it, a dataset is ``Bound`` or
``Refused``: a ``persistentVolume`` source makes a claim there, refused when
the namespace's ResourceQuota forbids it (``persistentvolumeclaims``,
``requests.storage``, counting the other datasets' claims); the simulator's
claims bind at once, and a ``claim`` or ``path`` source needs none. A claim
that is Bound stays so (the API server checks quota when a claim is made, not
after); a Refused one is tried again whenever anything changes.

Work naming a dataset (``tenancy.jupyter.org/datasets``) that does not exist or
that its namespace may not use is refused (``dataset-not-allowed``); work
naming one not Bound in its namespace waits (``dataset-not-ready``): it is
held back before the engine, so it is neither admitted nor counted.
"""

from __future__ import annotations

from ..quota.dataset import EVERYONE, KIND, Dataset, check_datasets, claim_need, claim_refusal
from ..quota.errors import ValidationError
from ..quota.quantity import add_into
from ..quota.workloads import WorkloadSpec
from ..scheduler.model import DATASET_NOT_ALLOWED, DATASET_NOT_READY, Reason

BOUND, PENDING, REFUSED = "Bound", "Pending", "Refused"


class Datasets:
    def __init__(self):
        self.declared: dict[str, Dataset] = {}  # in the order they were first applied
        self.claims: dict[tuple[str, str], tuple[str, str | None]] = {}  # (dataset, namespace) -> (state, why)

    def apply(self, ds: Dataset) -> None:
        check_datasets([*(d for d in self.declared.values() if d.name != ds.name), ds])
        if self.declared.get(ds.name) != ds:
            self._drop(ds.name)  # changed: its claims are made anew
        self.declared[ds.name] = ds

    def delete(self, name: str) -> None:
        if self.declared.pop(name, None) is None:
            raise ValidationError(f"{KIND} {name} not found")
        self._drop(name)

    def _drop(self, name: str) -> None:
        for key in [k for k in self.claims if k[0] == name]:
            del self.claims[key]

    def refresh(self, namespaces, quotas_of) -> None:
        """Bring every claim up to date: ``namespaces`` the scenario knows (for ``"*"``), ``quotas_of(ns)``
        the ResourceQuotas of a namespace."""
        wanted = [(ds, ns) for ds in self.declared.values() for ns in self._allowed(ds, namespaces)]
        keep = {(ds.name, ns) for ds, ns in wanted}
        self.claims = {key: claim for key, claim in self.claims.items() if key in keep}
        for ds, ns in wanted:
            if self.claims.get((ds.name, ns), (None,))[0] == BOUND:
                continue
            used: dict[str, int] = {}
            for (other, other_ns), (state, _) in self.claims.items():
                if other_ns == ns and state == BOUND:
                    add_into(used, claim_need(self.declared[other]))
            why = claim_refusal(ds, quotas_of(ns), used)
            self.claims[(ds.name, ns)] = (REFUSED, why) if why else (BOUND, None)

    @staticmethod
    def _allowed(ds: Dataset, namespaces) -> list[str]:
        return sorted(set(ds.namespaces) | (set(namespaces) if EVERYONE in ds.teams else set()))

    def gate(self, spec: WorkloadSpec, pod: str) -> Reason | None:
        """Why a pod of ``spec`` named ``pod`` may not be made now (None: it may)."""
        ns = spec.namespace
        for name in spec.datasets:
            ds = self.declared.get(name)
            if ds is None or not ds.allows(ns):
                why = "does not exist" if ds is None else f"is not for namespace {ns} ({_audience(ds)})"
                return Reason(DATASET_NOT_ALLOWED, f'pods "{pod}" is forbidden: dataset {name} {why}',
                              {"dataset": name, "namespace": ns})
        for name in spec.datasets:
            state, why = self.claims.get((name, ns), (PENDING, None))
            if state != BOUND:
                text = f"waiting for dataset {name}: its claim in {ns} is {state.lower()}" + (f": {why}" if why else "")
                return Reason(DATASET_NOT_READY, text, {"dataset": name, "namespace": ns, "state": state})
        return None

    def report(self) -> dict[str, dict[str, str]]:
        """``{dataset: {namespace: state}}``, as ``--json`` prints it."""
        out: dict[str, dict[str, str]] = {name: {} for name in sorted(self.declared)}
        for (name, ns), (state, _) in sorted(self.claims.items()):
            out[name][ns] = state
        return out


def _audience(ds: Dataset) -> str:
    if ds.namespaces:
        return "its namespaces: " + ", ".join(ds.namespaces)
    return "it names only teams, hub groups: " + ", ".join(ds.teams)
