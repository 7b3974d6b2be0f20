"""``/api/v1/datasets[/NAME]``: the datasets as people see them; admins declare, change and remove them.

Users read the datasets their teams' namespaces may use (each namespace's state is theirs to
see only for their own); admins read and write all. ``PUT`` takes one ``Dataset`` object (JSON
or YAML) whose ``metadata.name`` is NAME; ``?dryRun=true`` says what would be provisioned,
kept or removed in each namespace, and what a namespace's ResourceQuota would refuse, and
changes nothing. A dataset the service's configuration or the cluster declares is not the
API's to change (409, with where to change it). Every change is in the audit trail the
tree editor shows (``dataset`` events: who, when, what).

``POST /api/v1/datasets/NAME/accelerate`` (admins) chooses to accelerate the dataset (a cache
in front of it in each namespace: Fluid on Kubernetes), ``DELETE`` undoes it; both answer the
dataset's view, whose ``acceleration`` says whether the backend can (``available``, ``why``),
whether it is chosen (``enabled``) and each namespace's cache (``state``). A backend that
cannot: 409 with its sentence. ``POST ...?dryRun=true`` says what would be made in each
namespace and changes nothing. The choice is kept in the store and audited.
"""

from __future__ import annotations

from tornado import web

from ..quota.dataset import KIND, claim_need, claim_refusal, parse_dataset
from ..quota.errors import ValidationError
from ..quota.manifests import load_yaml
from ..quota.quantity import add_into
from .datasets import BOUND, Conflict, NotFound
from .handlers import APIHandler
from .text import check_text
from .tree_edit import audit_trail


def visible(c, who, view: dict) -> dict:
    """A dataset's view cut to what ``who`` may see: a user, only their namespaces' states."""
    allowed = who.namespaces()
    if allowed is None:
        return view
    fast = view.get("acceleration")
    if fast is not None:
        fast = {**fast, "state": {ns: s for ns, s in fast["state"].items() if ns in allowed}}
    return {**view, "status": {ns: s for ns, s in view["status"].items() if ns in allowed},
            "inUse": {ns: n for ns, n in view["inUse"].items() if ns in allowed}, "acceleration": fast}


def provision(c, ds, old) -> list[dict]:
    """What applying ``ds`` (in place of ``old``, or None) would do in each namespace."""
    room = c.datasets
    new_ns = set(room.namespaces(ds))
    old_ns = set(room.namespaces(old)) if old is not None else set()
    out = []
    for ns in sorted(new_ns | old_ns):
        action = "remove" if ns not in new_ns else "create" if ns not in old_ns or _remade(old, ds) else "keep"
        refused = None
        if action != "remove" and ds.makes_claims:
            used: dict[str, int] = {}
            for (name, other_ns), (state, _) in room.states.items():
                if other_ns == ns and name != ds.name and state == BOUND and name in room.declared:
                    add_into(used, claim_need(room.declared[name]))
            refused = claim_refusal(ds, c.engine.resource_quotas.get(ns, {}).values(), used)
        out.append({"namespace": ns, "action": action, "refused": refused})
    return out


def _remade(old, new) -> bool:
    """Whether a namespace's claim and volume must be made anew (their source or size changed)."""
    return (old.source_kind, old.source, old.size, old.read_only) != (new.source_kind, new.source, new.size,
                                                                        new.read_only)


def changes(old, new) -> list[str]:
    """What changed from ``old`` to ``new`` (either None), one sentence each, for the audit trail."""
    if old is None:
        return [f"added dataset {new.name} for {', '.join(new.teams + new.namespaces)}"]
    if new is None:
        return [f"removed dataset {old.name}"]
    out = []
    spec_old, spec_new = old.raw.get("spec") or {}, new.raw.get("spec") or {}
    for key in sorted(set(spec_old) | set(spec_new)):
        if spec_old.get(key) != spec_new.get(key):
            out.append(f"{new.name}: {key} {_short(spec_old.get(key))} -> {_short(spec_new.get(key))}")
    return out or [f"{new.name}: no change"]


def _short(value) -> str:
    text = "unset" if value is None else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


class DatasetsHandler(APIHandler):
    async def get(self):
        c, who = self.controller, self.identity
        datasets = c.datasets.for_namespaces(who.namespaces())
        out = {"datasets": [visible(c, who, c.datasets.view(ds)) for ds in sorted(datasets, key=lambda d: d.name)]}
        if who.admin:  # the latest changes (the tree's and the datasets'), for the admins' page
            out["audit"] = audit_trail(c.store, 20)
        self.send(out)


class DatasetHandler(APIHandler):
    def _find(self, name: str):
        c, who = self.controller, self.identity
        ds = c.datasets.declared.get(name)
        if ds is None or ds not in c.datasets.for_namespaces(who.namespaces()):
            raise web.HTTPError(404, f"there is no dataset {name}" if who.admin or ds is None else
                                f"there is no dataset {name} that {who.name}'s teams may use")
        return ds

    async def get(self, name):
        c = self.controller
        self.send(visible(c, self.identity, c.datasets.view(self._find(name))))

    def _admin(self, verb: str, name: str) -> None:
        if not self.identity.admin:
            raise web.HTTPError(403, f"only admins may {verb} datasets ({self.identity.name} asked to {verb} {name})")

    async def put(self, name):
        self._admin("change", name)
        c = self.controller
        raw = self.raw_body().decode("utf-8", "replace")
        try:
            docs = load_yaml(raw, "request body")  # JSON is YAML too
            if len(docs) != 1:
                raise ValidationError(f"request body: send one {KIND}")
            check_text(docs[0], "request body")  # YAML's "\ud800" escape too
            ds = parse_dataset(docs[0])
            if ds.name != name:
                raise ValidationError(f"{KIND} {ds.name}: metadata.name must be {name}, the name in the address")
            c.datasets.writable(name)
            c.datasets.check(ds)
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None
        except Conflict as err:
            raise web.HTTPError(409, str(err)) from None
        old = c.datasets.declared.get(name)
        if self.get_argument("dryRun", "false").lower() in ("1", "true", "yes"):
            view = c.datasets.view(ds)
            self.send({"dryRun": True, "dataset": {**view, "origin": "api"}, "provision": provision(c, ds, old)})
            return
        what = changes(old, ds)
        c.datasets.apply(ds)
        self._audit(what)
        self.send(c.datasets.view(ds))

    async def delete(self, name):
        self._admin("remove", name)
        c = self.controller
        old = c.datasets.declared.get(name)
        try:
            c.datasets.delete(name)
        except NotFound as err:
            raise web.HTTPError(404, str(err)) from None
        except Conflict as err:
            raise web.HTTPError(409, str(err)) from None
        self._audit(changes(old, None))
        self.send({"deleted": name})

    def _audit(self, what: list[str]) -> None:
        c, by = self.controller, self.identity.name
        c.store.record(c.clock(), "dataset", f"{by} changed datasets: " + "; ".join(what),
                       details={"by": by, "changes": what})
        c.store.commit()


class AccelerateHandler(APIHandler):
    _admin, _audit = DatasetHandler._admin, DatasetHandler._audit  # not its PUT: that declares datasets

    async def post(self, name):
        self._admin("accelerate", name)
        c = self.controller
        ds = c.datasets.declared.get(name)
        if ds is None:
            raise web.HTTPError(404, f"there is no dataset {name}")
        if self.get_argument("dryRun", "false").lower() in ("1", "true", "yes"):
            why = c.datasets.can_accelerate()
            on = name in c.datasets.accelerated
            make = [] if why is not None else [
                {"namespace": ns, "action": "keep" if on else "create",
                 "objects": [{"apiVersion": o.get("apiVersion"), "kind": o.get("kind"),
                              "name": o["metadata"]["name"], "spec": o.get("spec")}
                             for o in c.backend.acceleration_objects(ds, ns)]}
                for ns in c.datasets.namespaces(ds)]
            self.send({"dryRun": True, "dataset": name, "available": why is None, "why": why, "make": make})
            return
        self._choose(name, True)

    async def delete(self, name):
        self._admin("accelerate", name)
        if name not in self.controller.datasets.declared:
            raise web.HTTPError(404, f"there is no dataset {name}")
        self._choose(name, False)

    def _choose(self, name: str, on: bool) -> None:
        c = self.controller
        try:
            changed = c.datasets.accelerate(name, on)
        except NotFound as err:
            raise web.HTTPError(404, str(err)) from None
        except Conflict as err:
            raise web.HTTPError(409, str(err)) from None
        if changed:
            self._audit([f"{name}: {'accelerated' if on else 'no longer accelerated'}"])
        self.send(c.datasets.view(c.datasets.declared[name]))


def dataset_routes(api: str) -> list:
    return [(api + "/datasets", DatasetsHandler), (api + r"/datasets/([a-z0-9][-a-z0-9]*)", DatasetHandler),
            (api + r"/datasets/([a-z0-9][-a-z0-9]*)/accelerate", AccelerateHandler)]
