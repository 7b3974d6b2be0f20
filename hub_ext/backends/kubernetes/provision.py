"""Provision tenants on a cluster: Namespace, RBAC, ResourceQuota, LimitRange, PriorityClasses.

``Provisioner.reconcile(tenants)`` makes the cluster match the usable tenants
(``hub_ext.tenants.Tenant``, built from hub groups) and returns what it did:

- per tenant: its Namespace (labelled with the tenant and quota leaf), the
  ``ml-developer`` Role of the first seed and a RoleBinding of it to the tenant's
  group (and optionally to the hub's service account), a ResourceQuota and a
  LimitRange whose defaults let pods that declare nothing pass the quota;
- read-only access to a shared namespace (``production``): a Role ``ml-viewer``
  there and one RoleBinding per tenant;
- the PriorityClasses (the first seed's three by default).

Rules:

- **Idempotent**: objects are read and compared first (``objects.differences``);
  a write happens only on a difference, so a second run changes nothing.
- **Drift is repaired**: whatever the provisioner owns (its labels and
  annotations, a Role's rules, a binding's subjects, a quota's spec ...) is put
  back; labels and annotations others add are kept.
- **Only what it created**: every object it creates carries
  ``app.kubernetes.io/managed-by=jupyterhub-tenancy`` and its instance label
  (``objects.Marker``). An object of the same name without them is never
  changed or deleted; it is reported as a conflict. Objects it created for a
  tenant that is gone (or that are no longer wanted) are deleted, except
  namespaces, which are kept unless ``delete_namespaces`` is set (and even then
  only when no pod is left in them). Objects of a tenant whose group properties
  are wrong right now are left alone: a typo in the admin panel does not revoke
  a team's access.
- **Errors are one line each** in the result (403, 409, 422, an unreachable
  server), never a traceback; one failed object does not stop the others.

Everything is synchronous (the ``kubernetes`` client is); the service calls
``await provisioner.reconcile_async(tenants)``, which runs it in a thread.

This module is over 500 lines for one reason: ``Provisioner`` is one configurable
class, and its ``c.Provisioner.*`` traits with their help texts are about 190 of
them. What it builds and compares is in ``objects``.

Permissions the provisioner's identity needs (a ClusterRole, for the Helm chart):
``get, list, create, update, delete`` on namespaces, resourcequotas, limitranges
(core), roles and rolebindings (rbac.authorization.k8s.io) and priorityclasses
(scheduling.k8s.io); ``list`` on pods (only with ``delete_namespaces``); and to
create the Roles and bind them, either the permissions the Roles grant (pods,
services, deployments, jobs, pods/log) or the ``escalate`` and ``bind`` verbs on
roles.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field

from traitlets import Any, Bool, Dict, Float, List, TraitError, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from ...quota.errors import ValidationError
from ...quota.priorityclass import PREEMPT, SEED_CLASSES, parse_priority_class
from .api import (
    KINDS, LIMIT_RANGE, NAMESPACE, POD, PRIORITY_CLASS, RESOURCE_QUOTA, ROLE, ROLE_BINDING, Api, KubernetesError,
    missing_group_versions,
)
from .objects import (
    DEFAULT_LIMITS, DEV_QUOTA, DEVELOPER_RULES, QUOTA_LEAF, RBAC, SHARED, VIEWER_RULES, Marker, describe_key,
    differences, group_of, key, label_value, merged, needs_recreate, validate as validate_object,
)

KIND_BY_NAME = {k.name: k for k in KINDS}
ORDER = {k.name: i for i, k in enumerate(KINDS)}


@dataclass
class Action:
    """One thing done (or not) to one object; ``str`` is one line."""

    kind: str
    namespace: str | None
    name: str
    message: str

    def __str__(self) -> str:
        return f"{describe_key(self.kind, self.namespace, self.name)}: {self.message}" if self.kind else self.message


@dataclass
class ProvisionResult:
    """What a reconcile did. ``changed`` is False when the cluster already matched."""

    created: list[Action] = field(default_factory=list)
    updated: list[Action] = field(default_factory=list)
    deleted: list[Action] = field(default_factory=list)
    conflicts: list[Action] = field(default_factory=list)
    kept: list[Action] = field(default_factory=list)
    errors: list[Action] = field(default_factory=list)
    unchanged: int = 0

    CATEGORIES = ("created", "updated", "deleted", "conflicts", "kept", "errors")

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        """Every action as one line, ``<kind> <namespace>/<name>: <message>``, created first, errors last."""
        return [str(action) for cat in self.CATEGORIES for action in getattr(self, cat)]

    def summary(self) -> str:
        counts = ", ".join(f"{len(getattr(self, cat))} {cat}" for cat in self.CATEGORIES)
        return f"{counts}, {self.unchanged} unchanged"

    def to_dict(self) -> dict:
        out = {cat: [{**asdict(a), "text": str(a)} for a in getattr(self, cat)] for cat in self.CATEGORIES}
        out["unchanged"] = self.unchanged
        out["changed"] = self.changed
        return out


def _seed_priority_classes() -> list[dict]:
    return [{"name": pc.name, "value": pc.value, "globalDefault": pc.global_default, "description": pc.description,
             "preemptionPolicy": pc.preemption_policy} for pc in SEED_CLASSES]


def _config_error(obj: dict, err: ValidationError) -> str:
    """``not provisioned: <what is wrong>``, without repeating the object's name."""
    meta = obj["metadata"]
    text = str(err)
    for prefix in (describe_key(obj["kind"], meta.get("namespace"), meta["name"]) + ":", f"{obj['kind']}:"):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    return f"not provisioned (check the configuration): {text}"


class _Abort(Exception):
    """The API server cannot be reached: stop this reconcile."""


class Provisioner(LoggingConfigurable):
    """Reconciles tenants' Namespaces, RBAC, ResourceQuotas, LimitRanges and the PriorityClasses."""

    api_client = Any(
        help="""
        The ``kubernetes.client.ApiClient`` to use; its identity needs the permissions listed in
        this module's docstring. Default: in-cluster credentials, else the local kubeconfig.
        """,
    )

    @default("api_client")
    def _default_api_client(self):
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)
        return client.ApiClient(configuration)

    instance = Unicode(
        "jupyterhub",
        help="""
        Name of this hub on the cluster, put in the ``tenancy.jupyter.org/instance`` label of
        every object created. Objects of another instance are never touched, so several hubs
        can share one cluster. Changing it orphans what the old name created (nothing is deleted).
        """,
    ).tag(config=True)

    group_mapping = Dict(
        value_trait=Any(),
        help="""
        Kubernetes (identity provider) group name(s) per hub group, for the RoleBindings:
        ``{"data-science-alpha": "oidc:data-science-alpha"}`` or a list of names. Groups not
        listed use ``group_template``.
        """,
    ).tag(config=True)

    group_template = Unicode(
        "{group}",
        help="""
        Kubernetes group name bound for a hub group not in ``group_mapping``; ``{group}`` is the
        hub group's name. The default binds the same name, as the identity provider's groups
        reach both the hub (through the authenticator) and the API server (through OIDC).
        """,
    ).tag(config=True)

    hub_service_account = Unicode(
        "",
        help="""
        ``namespace/name`` of a ServiceAccount also bound to each tenant's developer Role (the
        hub's, so that the spawner can create pods there). Empty: none.
        """,
    ).tag(config=True)

    developer_role = Unicode("ml-developer", help="Name of the Role created in each tenant namespace.").tag(config=True)

    developer_rules = List(
        Dict(), default_value=DEVELOPER_RULES,
        help="Rules of the developer Role (default: the first seed's ``ml-developer``, verbatim).",
    ).tag(config=True)

    role_binding_name = Unicode(
        "{namespace}-binding",
        help="Name of the RoleBinding in each tenant namespace; ``{namespace}`` and ``{group}`` are replaced.",
    ).tag(config=True)

    shared_namespace = Unicode(
        "production",
        help="""
        A namespace every tenant group may read (get/list/watch) but not change, with a Role
        ``viewer_role`` and one RoleBinding per tenant. Created when missing. Empty: none.
        """,
    ).tag(config=True)

    viewer_role = Unicode("ml-viewer", help="Name of the read-only Role in the shared namespace.").tag(config=True)

    viewer_rules = List(
        Dict(), default_value=VIEWER_RULES,
        help="Rules of the read-only Role: get, list, watch on pods, deployments, jobs, services, pods/log.",
    ).tag(config=True)

    viewer_binding_name = Unicode(
        "{namespace}-viewer",
        help="""
        Name of each tenant's RoleBinding in the shared namespace; ``{namespace}`` (the tenant's)
        and ``{group}`` are replaced.
        """,
    ).tag(config=True)

    resource_quota_name = Unicode("dev-quota", help="Name of the ResourceQuota in each tenant namespace.").tag(config=True)

    resource_quota = Dict(
        value_trait=Unicode(), default_value=DEV_QUOTA,
        help="""
        ``spec.hard`` of each tenant's ResourceQuota (default: the first seed's ``dev-quota``:
        requests 20 CPU / 100Gi / 4 GPUs, limits 40 CPU / 200Gi, 10 pods). Empty: no quota.
        """,
    ).tag(config=True)

    tenant_resource_quotas = Dict(
        help="""
        Per hub group, changes to ``resource_quota``: ``{"data-science-beta": {"requests.nvidia.com/gpu": "8",
        "pods": None}}`` sets the GPUs and drops the pod count for that tenant. A group mapped
        to None gets no ResourceQuota.
        """,
    ).tag(config=True)

    limit_range_name = Unicode("tenancy-defaults", help="Name of the LimitRange in each tenant namespace.").tag(config=True)

    limit_range = List(
        Dict(), default_value=DEFAULT_LIMITS,
        help="""
        ``spec.limits`` of each tenant's LimitRange. The default gives containers that declare
        nothing a request of 500m CPU / 1Gi and a limit of 1 CPU / 2Gi, so that the quota (which
        requires every container to declare CPU and memory) admits them. Empty: no LimitRange.
        """,
    ).tag(config=True)

    tenant_limit_ranges = Dict(
        help="Per hub group, ``spec.limits`` replacing ``limit_range`` for that tenant (None: no LimitRange).",
    ).tag(config=True)

    priority_classes = List(
        Dict(), default_value=_seed_priority_classes(),
        help="""
        PriorityClasses to keep on the cluster, each ``{"name", "value", "globalDefault",
        "description", "preemptionPolicy"}``. Default: the first seed's ``critical-prod``
        (1000000), ``high-priority-research`` (500000) and ``low-priority-dev`` (100000, the
        global default). Empty: none are managed.
        """,
    ).tag(config=True)

    use_existing_namespaces = Bool(
        True,
        help="""
        Provision a tenant in a namespace that already exists and was not created by this
        provisioner (the namespace itself is left as is and reported as a conflict). Whoever
        edits hub group properties can then grant a group access to any such namespace; turn
        this off to provision only in namespaces the provisioner created.
        """,
    ).tag(config=True)

    protected_namespaces = List(
        Unicode(), default_value=["default", "kube-system", "kube-public", "kube-node-lease"],
        help="Namespaces never given to a tenant (names starting with ``kube-`` never are either).",
    ).tag(config=True)

    delete_namespaces = Bool(
        False,
        help="""
        Delete the namespace of a tenant that is gone (only one this provisioner created, and
        only once no pod is left in it). Off by default: a namespace holds people's work.
        Everything else created for a gone tenant is always deleted.
        """,
    ).tag(config=True)

    request_timeout = Float(15.0, help="Timeout in seconds of each API request (0: none).").tag(config=True)

    @validate("hub_service_account")
    def _check_service_account(self, proposal):
        value = proposal["value"]
        if value and (value.count("/") != 1 or not all(value.split("/"))):
            raise TraitError(f"hub_service_account must be namespace/name, got {value!r}")
        return value

    @validate("group_template", "role_binding_name", "viewer_binding_name")
    def _check_template(self, proposal):
        try:
            proposal["value"].format(group="g", namespace="n")
        except (KeyError, IndexError, ValueError) as err:
            raise TraitError(f"{proposal['trait'].name}: {proposal['value']!r} is not a valid template "
                             f"({type(err).__name__}: {err}); use {{group}} and {{namespace}}") from None
        return proposal["value"]

    @validate("group_mapping")
    def _check_group_mapping(self, proposal):
        for group, names in proposal["value"].items():
            if not (isinstance(names, str) or isinstance(names, list) and all(isinstance(n, str) for n in names)):
                raise TraitError(f"group_mapping[{group!r}] must be a group name or a list of them, got {names!r}")
        return proposal["value"]

    @validate("tenant_resource_quotas", "tenant_limit_ranges")
    def _check_per_tenant(self, proposal):
        wanted = dict if proposal["trait"].name == "tenant_resource_quotas" else list
        for group, value in proposal["value"].items():
            if value is not None and not isinstance(value, wanted):
                raise TraitError(f"{proposal['trait'].name}[{group!r}] must be a {wanted.__name__} or None, "
                                 f"got {value!r}")
        return proposal["value"]

    def __init__(self, api_client=None, **kwargs):
        if api_client is not None:
            kwargs["api_client"] = api_client
        super().__init__(**kwargs)

    @property
    def marker(self) -> Marker:
        return Marker(self.instance)

    # ------------------------------------------------------------------ desired state
    def kubernetes_groups(self, group: str) -> list[str]:
        mapped = self.group_mapping.get(group)
        if mapped is None:
            return [self.group_template.format(group=group)]
        return [mapped] if isinstance(mapped, str) else [str(g) for g in mapped]

    def _subjects(self, group: str) -> list[dict]:
        subjects = [{"kind": "Group", "apiGroup": RBAC, "name": name} for name in self.kubernetes_groups(group)]
        if self.hub_service_account:
            namespace, name = self.hub_service_account.split("/")
            subjects.append({"kind": "ServiceAccount", "name": name, "namespace": namespace})
        return subjects

    def _quota_hard(self, group: str) -> dict | None:
        if group in self.tenant_resource_quotas and self.tenant_resource_quotas[group] is None:
            return None
        hard = dict(self.resource_quota)
        for res, value in (self.tenant_resource_quotas.get(group) or {}).items():
            if value is None:
                hard.pop(res, None)
            else:
                hard[res] = value if isinstance(value, str) else str(value)
        return hard or None

    def _limits(self, group: str) -> list | None:
        limits = self.tenant_limit_ranges[group] if group in self.tenant_limit_ranges else self.limit_range
        return limits or None

    def desired(self, tenants) -> tuple[list[dict], list[Action], set[str], set[tuple]]:
        """What should exist: ``(objects in apply order, config errors, groups to leave alone, keys to keep)``.

        Groups to leave alone are tenants that are not usable right now; keys to keep are
        objects whose desired form could not be built (bad config): neither is deleted.
        """
        mark = self.marker
        out: list[dict] = []
        errors: list[Action] = []
        hold_groups: set[str] = set()
        hold_keys: set[tuple] = set()
        seen: dict[str, str] = {}
        shared = self.shared_namespace

        def add(obj):
            try:
                validate_object(obj)
            except ValidationError as err:
                meta = obj["metadata"]
                errors.append(Action(obj["kind"], meta.get("namespace"), meta["name"], _config_error(obj, err)))
                hold_keys.add(key(obj))
                return
            out.append(obj)

        for tenant in sorted(tenants, key=lambda t: t.group):
            group, ns = tenant.group, tenant.namespace
            if not tenant.usable:
                hold_groups.add(group)
                continue
            if ns in self.protected_namespaces or ns.startswith("kube-"):
                errors.append(Action("", None, "", f"tenant {group}: namespace {ns} is protected; skipped"))
                hold_groups.add(group)
                continue
            if ns in seen or ns == shared:
                owner = f"tenant {seen[ns]}" if ns in seen else "the shared namespace"
                errors.append(Action("", None, "", f"tenant {group}: namespace {ns} already belongs to {owner}; skipped"))
                hold_groups.add(group)
                continue
            seen[ns] = group
            names = {"namespace": ns, "group": group}
            labels = {QUOTA_LEAF: label_value(tenant.leaf)} if tenant.leaf else {}
            add(mark.manifest(NAMESPACE, ns, group=group, labels=labels))
            add(mark.manifest(ROLE, self.developer_role, ns, group=group, rules=self.developer_rules))
            add(mark.manifest(
                ROLE_BINDING, self.role_binding_name.format(**names), ns, group=group,
                subjects=self._subjects(group), roleRef={"apiGroup": RBAC, "kind": "Role", "name": self.developer_role}))
            limits = self._limits(group)
            if limits:
                add(mark.manifest(LIMIT_RANGE, self.limit_range_name, ns, group=group,
                                  spec={"limits": limits}))
            hard = self._quota_hard(group)
            if hard:
                add(mark.manifest(RESOURCE_QUOTA, self.resource_quota_name, ns, group=group,
                                  spec={"hard": hard}))
            if shared:
                add(mark.manifest(
                    ROLE_BINDING, self.viewer_binding_name.format(**names), shared, group=group,
                    subjects=[s for s in self._subjects(group) if s["kind"] == "Group"],
                    roleRef={"apiGroup": RBAC, "kind": "Role", "name": self.viewer_role}))
        if shared:
            add(mark.manifest(NAMESPACE, shared, labels={SHARED: "true"}))
            add(mark.manifest(ROLE, self.viewer_role, shared, rules=self.viewer_rules))
        for raw in self.priority_classes:
            obj = mark.manifest(PRIORITY_CLASS, str(raw.get("name", "")), **{
                k: raw[k] for k in ("value", "globalDefault", "description", "preemptionPolicy") if k in raw})
            obj.setdefault("preemptionPolicy", PREEMPT)
            try:
                parse_priority_class(obj)
            except ValidationError as err:
                errors.append(Action("PriorityClass", None, obj["metadata"]["name"], _config_error(obj, err)))
                hold_keys.add(key(obj))
                continue
            out.append(obj)
        out.sort(key=lambda o: ORDER[o["kind"]])  # stable: tenants stay in order within a kind
        return out, errors, hold_groups, hold_keys

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, tenants) -> ProvisionResult:
        """Make the cluster match ``tenants`` (unusable ones are left as they are); never raises for API errors."""
        result = ProvisionResult()
        try:
            api = Api(self.api_client, self.request_timeout)
        except Exception as err:  # noqa: BLE001 - no credentials: say so in one line
            result.errors.append(Action("", None, "", f"no Kubernetes credentials: {' '.join(str(err).split())}"))
            self.log.error("tenancy provisioning: %s", result.errors[0])
            return result
        try:
            kinds = self._served_kinds(api, result)
            desired, errors, hold_groups, hold_keys = self.desired(tenants)
            result.errors.extend(errors)
            desired = [obj for obj in desired if KIND_BY_NAME[obj["kind"]] in kinds]
            blocked: dict[str, list] = {}  # namespace -> [why, objects skipped]
            for obj in desired:
                ns = obj["metadata"].get("namespace")
                if ns in blocked:
                    blocked[ns][1] += 1
                    continue
                ok = self._apply(api, obj, result)
                if obj["kind"] == "Namespace" and ok is not True:
                    blocked[obj["metadata"]["name"]] = [ok or "it could not be provisioned", 0]
            for ns, (why, skipped) in blocked.items():
                if skipped:
                    result.errors.append(Action("Namespace", None, ns, f"{skipped} objects in it not provisioned: {why}"))
            current = {t.group for t in tenants if t.usable}
            self._remove_orphans(api, kinds, {key(o) for o in desired} | hold_keys, hold_groups, current, result)
        except _Abort as err:
            result.errors.append(Action("", None, "", f"reconcile stopped: {err}"))
        for cat in result.CATEGORIES:
            log = self.log.error if cat == "errors" else self.log.warning if cat == "conflicts" else self.log.info
            for action in getattr(result, cat):
                log("tenancy provisioning: %s: %s", cat, action)
        self.log.info("tenancy provisioning (instance %s): %s", self.instance, result.summary())
        return result

    async def reconcile_async(self, tenants) -> ProvisionResult:
        """``reconcile`` in a thread, for the service's event loop."""
        return await asyncio.to_thread(self.reconcile, tenants)

    def _served_kinds(self, api: Api, result: ProvisionResult) -> set:
        """The managed kinds whose API the server serves; an error per missing group version."""
        try:
            served = api.served_versions()
        except KubernetesError as err:
            raise _Abort(f"discovery failed: {err}") from None
        missing = missing_group_versions(served, sorted({k.group_version for k in KINDS}))
        for gv, reason in missing.items():
            names = ", ".join(k.name for k in KINDS if k.group_version == gv)
            result.errors.append(Action("", None, "", f"{reason}: {names} not provisioned"))
        return {k for k in KINDS if k.group_version not in missing}

    def _apply(self, api: Api, obj: dict, result: ProvisionResult):
        """Create or repair one object. True when it is in place (or left alone, but usable);
        otherwise, for a namespace, why nothing is to be provisioned in it (an error or a
        conflict is recorded)."""
        kind = KIND_BY_NAME[obj["kind"]]
        meta = obj["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        verb = "read"
        try:
            for attempt in range(2):  # a 409 (changed meanwhile) is retried once, after a fresh read
                try:
                    verb = "read"
                    live = api.read(kind, ns, name)
                    if live is None:
                        verb = "create"
                        api.create(kind, obj)
                        result.created.append(Action(kind.name, ns, name, "created"))
                        return True
                    owner = self.marker.owner(live)
                    if owner:
                        return self._conflict(obj, live, owner, result)
                    if (live.get("metadata") or {}).get("deletionTimestamp"):
                        result.errors.append(Action(kind.name, ns, name, "is being deleted; provisioned again once gone"))
                        return "it is being deleted"
                    diff = differences(obj, live)
                    if not diff:
                        result.unchanged += 1
                        return True
                    if needs_recreate(diff, kind.name):
                        verb = "recreate"
                        api.delete(kind, ns, name)
                        api.create(kind, obj)
                        result.updated.append(Action(kind.name, ns, name, f"recreated ({', '.join(diff)} differed)"))
                    else:
                        verb = "update"
                        api.replace(kind, merged(obj, live))
                        result.updated.append(Action(kind.name, ns, name, f"updated ({', '.join(diff)} differed)"))
                    return True
                except KubernetesError as err:
                    if err.status != 409 or attempt:
                        raise
        except KubernetesError as err:
            if err.unreachable:
                raise _Abort(str(err)) from None
            result.errors.append(Action(kind.name, ns, name, f"cannot {verb}: {err}"))
            return f"cannot {verb} it"
        return True  # pragma: no cover - the loop returns or raises

    def _conflict(self, obj: dict, live: dict, owner: str, result: ProvisionResult):
        """Record an object of the same name that is not ours; whether to provision inside (namespaces)."""
        meta = obj["metadata"]
        same = not differences(obj, live, metadata=False)
        message = f"exists, but {owner}; left as is" + (
            " (it matches what would be provisioned)" if same else " (it differs from what would be provisioned)")
        result.conflicts.append(Action(obj["kind"], meta.get("namespace"), meta["name"], message))
        if obj["kind"] != "Namespace" or self.use_existing_namespaces or meta["name"] == self.shared_namespace:
            return True
        return "it was not created by jupyterhub-tenancy and use_existing_namespaces is off"

    def _remove_orphans(self, api: Api, kinds: set, wanted: set, hold_groups: set, current: set,
                        result: ProvisionResult) -> None:
        """Delete what this instance created and no longer wants (namespaces: see ``delete_namespaces``)."""
        for kind in reversed(KINDS):  # what a namespace holds before the namespace
            if kind not in kinds:
                continue
            try:
                items = api.list(kind, self.marker.selector)
            except KubernetesError as err:
                if err.unreachable:
                    raise _Abort(str(err)) from None
                result.errors.append(Action("", None, "", f"cannot list {kind.name} objects: {err}; none removed"))
                continue
            for item in items:
                meta = item.get("metadata") or {}
                ns, name = meta.get("namespace"), meta.get("name")
                if (kind.name, ns, name) in wanted or meta.get("deletionTimestamp") or self.marker.owner(item):
                    continue
                group = group_of(item)
                why = f"tenant {group} is gone" if group and group not in current else "no longer in the configuration"
                if group in hold_groups:
                    result.kept.append(Action(kind.name, ns, name, f"kept: tenant {group} has errors right now"))
                    continue
                try:
                    if kind is NAMESPACE:
                        if not self.delete_namespaces:
                            result.kept.append(Action(kind.name, ns, name, f"kept ({why}; delete_namespaces is off)"))
                            continue
                        pods = api.list(POD, namespace=name, limit=1)
                        if pods:
                            result.kept.append(Action(kind.name, ns, name, f"kept ({why}, but pods are left in it)"))
                            continue
                    api.delete(kind, ns, name)
                    result.deleted.append(Action(kind.name, ns, name, f"deleted ({why})"))
                except KubernetesError as err:
                    if err.unreachable:
                        raise _Abort(str(err)) from None
                    result.errors.append(Action(kind.name, ns, name, f"cannot delete: {err}"))
