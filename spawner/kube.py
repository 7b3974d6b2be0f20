"""Notebooks as pods in the team's namespace (KubeSpawner), admitted by the tenancy scheduler first.

The mixin picks the team and profile, queues the notebook and waits; once the
scheduler admits it, the pod is made for the workload it admitted: in the
tenant's namespace, at the workload's PriorityClass (``low-priority-dev``),
with exactly the profile's requests and limits, and labelled
``tenancy.jupyter.org/workload=<id>`` (how the Kubernetes backend finds the pod
to evict, and why it does not count it as foreign usage), ``.../tenant`` and
``.../quota-leaf``; it mounts the datasets the service says the notebook uses (the
``datasets`` of the workload: the namespace's claims, read-only unless a dataset
says otherwise) and gets ``TENANCY_DATASETS`` (``{name: mount path}``), as a
training Job of the Kubernetes backend does. Pod events follow the queue
messages on the spawn page.

When the API server still refuses the pod (a ResourceQuota's ``exceeded quota``,
a LimitRange, RBAC, a missing namespace), the spawn fails with one sentence that
names the limit and what to do, and the workload leaves the scheduler, which
had counted it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re

import aiohttp
from jupyterhub.spawner import SpawnException
from kubernetes.utils import parse_quantity
from kubernetes_asyncio.client.rest import ApiException
from kubespawner import KubeSpawner
from traitlets import Bool

from hub_ext.backends.kubernetes import mounts
from hub_ext.backends.kubernetes.objects import GROUP, QUOTA_LEAF, TENANT, WORKLOAD_LABEL, label_value

from .mixin import TenancySpawnerMixin

_RESOURCES = ("cpu_guarantee", "mem_guarantee", "cpu_limit", "mem_limit", "extra_resource_guarantees",
              "extra_resource_limits")
#: KubeSpawner settings a start overwrites; their configured values are the base of every start.
_PLACED = ("extra_labels", "extra_annotations", "volumes", "volume_mounts") + _RESOURCES
#: What the scheduler's admission decides, so a profile's kubespawner_override may not.
_ADMITTED = ("namespace", "enable_user_namespaces", "priority_class_name") + _RESOURCES

_QUOTA = re.compile(r"exceeded quota: (?P<name>[^,]+), requested: (?P<req>.*), used: (?P<used>.*), limited: (?P<lim>.*)$")
_QUOTA_MISSING = re.compile(r"failed quota: (?P<name>[^:]+): (?P<what>.*)$")
_LIMIT_RANGE = re.compile(r"(maximum|minimum) \S+ usage per (Container|Pod)|limit to request ratio")


def resource_traits(resources: dict) -> dict:
    """KubeSpawner's resource settings for a workload's ``{"requests": {...}, "limits": {...}}``."""
    out = {"cpu_guarantee": None, "mem_guarantee": None, "cpu_limit": None, "mem_limit": None,
           "extra_resource_guarantees": {}, "extra_resource_limits": {}}
    for kind, amounts in (("guarantee", resources.get("requests")), ("limit", resources.get("limits"))):
        for name, amount in (amounts or {}).items():
            try:
                if name == "cpu":
                    out[f"cpu_{kind}"] = float(parse_quantity(amount))
                elif name == "memory":
                    out[f"mem_{kind}"] = int(parse_quantity(amount))
                else:
                    out[f"extra_resource_{kind}s"][name] = str(amount)
            except ValueError:
                raise SpawnException(f"the profile's {name} amount {amount!r} is not a Kubernetes quantity",
                                     reason="profile", status_code=400) from None
    return out


def _literal(value):
    """``value`` with every brace doubled: KubeSpawner expands ``{username}`` and the like in the
    environment, volumes and mounts, and a dataset's JSON or path must come out as it is."""
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    return value


def _with(configured, added: list[dict]):
    """KubeSpawner's ``volumes`` / ``volume_mounts`` (a list, or a dict of them) with ``added`` too."""
    if isinstance(configured, dict):
        return {**configured, **{f"tenancy-{item['name']}-{i}": item for i, item in enumerate(added)}}
    return [*configured, *added]


def _api_message(err: ApiException) -> str:
    try:
        message = json.loads(err.body or "").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return " ".join((message or err.reason or f"status {err.status}").split())


class TenancyKubeSpawner(TenancySpawnerMixin, KubeSpawner):
    """KubeSpawner, with each pod placed where and how the tenancy scheduler admitted it.

    The hub needs to create, watch and delete pods (and events, PVCs, secrets,
    services as configured) in every tenant namespace: the provisioner binds a
    ServiceAccount there with ``Provisioner.hub_service_account``.
    ``enable_user_namespaces`` should stay off: the tenant's namespace wins.
    """

    exact_resources = Bool(
        True,
        help="""
        Give the pod exactly the profile's requests and limits, the amounts the scheduler
        admitted, replacing ``cpu_guarantee``, ``mem_guarantee``, ``cpu_limit``,
        ``mem_limit`` and ``extra_resource_*`` from configuration (a profile without
        resources gets none, and the namespace's LimitRange fills them in, as the scheduler
        assumed). Turn off to keep configured amounts the profile does not name.
        """,
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._configured = {name: copy.deepcopy(getattr(self, name)) for name in _PLACED}

    def _choose(self):
        self._choice = super()._choose()
        return self._choice

    # -- where the pod goes ------------------------------------------------------------
    def place(self, wl: dict) -> None:
        """Point KubeSpawner at the admitted workload: namespace, priority, labels, resources, datasets."""
        group, profile = self._choice
        for name, value in self._configured.items():
            setattr(self, name, copy.deepcopy(value))
        self._override(profile, (self.profiles.get(profile) or {}).get("kubespawner_override") or {})
        if wl["namespace"] != self.namespace:
            self._pvc_exists = False  # a PVC remembered from another team's namespace is not here
        self.namespace = self.tenancy_namespace = wl["namespace"]
        self.dns_name = self.dns_name_template.format(namespace=self.namespace, name=self.pod_name)
        self.priority_class_name = wl.get("priorityClassName") or "low-priority-dev"
        tenant = wl.get("tenant") or group.name
        labels = {WORKLOAD_LABEL: wl["id"], TENANT: label_value(tenant)}
        leaf = (group.properties or {}).get("tenancy.quota-leaf")
        if leaf:
            labels[QUOTA_LEAF] = label_value(leaf)
        self.extra_labels = {**self.extra_labels, **labels}
        # A label value cannot hold every group name; the annotation has it verbatim.
        self.extra_annotations = {**self.extra_annotations, GROUP: tenant}
        for name, value in resource_traits(wl.get("resources") or {}).items():
            if self.exact_resources or value:
                setattr(self, name, value)
        uses = wl.get("datasets") or []
        self.volumes = _with(self.volumes, _literal(mounts.volumes(uses)))
        self.volume_mounts = _with(self.volume_mounts, _literal(mounts.volume_mounts(uses)))
        self.environment = {**self.environment, mounts.ENV: _literal(mounts.env_value(uses))}

    def _override(self, profile: str, override: dict) -> None:
        """A profile's other KubeSpawner settings (``{"kubespawner_override": {"image": ...}}``, as in
        KubeSpawner's ``profile_list``); dicts are merged into the configured value."""
        for name, value in override.items():
            if name in _ADMITTED or not self.has_trait(name):
                why = "is decided by the scheduler's admission" if name in _ADMITTED else "is not a KubeSpawner setting"
                raise SpawnException(f"profile {profile}: kubespawner_override {name} {why}; ask an admin to fix the profile",
                                     reason="profile", status_code=500)
            self._configured.setdefault(name, copy.deepcopy(getattr(self, name)))
            if callable(value):
                value = value(self)
            current = getattr(self, name)
            setattr(self, name, {**current, **value} if isinstance(value, dict) and isinstance(current, dict) else value)

    async def load_user_options(self):
        # Profiles are the mixin's (filtered by team) and were applied by place(); KubeSpawner's
        # profile_list is not used, and its check would refuse our profile slugs.
        return

    async def _start(self):
        try:
            self.place(self._latest)
        except SpawnException:
            await self._forget()  # admitted, but no pod will be made for it
            raise
        try:
            return await super()._start()
        except (SpawnException, TimeoutError):  # TimeoutError: the hub words a start timeout itself
            raise
        except (ApiException, aiohttp.ClientError, OSError) as err:
            # Watching or creating in the namespace failed (unreachable, forbidden): one line, not a traceback.
            message = _api_message(err) if isinstance(err, ApiException) else " ".join(str(err).split())
            await self._forget()
            raise SpawnException(f"The notebook could not be started in namespace {self.namespace}: "
                                 f"{message or type(err).__name__}. Ask an admin to check the hub's access to "
                                 "the cluster.", reason="kubernetes", status_code=503) from None

    async def _make_create_pod_request(self, pod, request_timeout):
        # KubeSpawner's own version retries timeouts and a 409 and re-raises the rest with a
        # traceback; here the rest becomes a sentence, and a 409's cleanup must not leave the
        # scheduler's queue (self.stop would).
        try:
            await asyncio.wait_for(self.api.create_namespaced_pod(self.namespace, pod), request_timeout)
            return True
        except asyncio.TimeoutError:
            return False
        except ApiException as err:
            if err.status == 409:
                self.log.info("pod %s/%s is left over from an earlier start; deleting it", self.namespace, self.pod_name)
                await KubeSpawner.stop(self, now=True)
                return False
            refusal = self.creation_refusal(err)  # the hub logs it, with the API server's own words
            # The scheduler counted this notebook when it admitted it; it never ran.
            await self._forget()
            raise refusal from None

    def creation_refusal(self, err: ApiException) -> SpawnException:
        """The API server's refusal of the pod as one sentence: which limit, and what to do."""
        ns, message = self.namespace, _api_message(err)
        m = _QUOTA.search(message)
        if err.status == 403 and m:
            return SpawnException(
                f"The ResourceQuota {m['name']} of namespace {ns} refuses this server: it asks for {m['req']} "
                f"where {m['used']} is used of {m['lim']}. Stop another server or job of your team, pick a "
                "smaller profile, or ask an admin to raise the quota.",
                reason="resource-quota", status_code=403, log_message=message)
        m = _QUOTA_MISSING.search(message)
        if err.status == 403 and m:
            return SpawnException(
                f"The ResourceQuota {m['name']} of namespace {ns} refuses this server: {m['what']}. "
                "Ask an admin to give the profile those amounts or the namespace a LimitRange with defaults.",
                reason="resource-quota", status_code=403, log_message=message)
        if err.status == 403 and _LIMIT_RANGE.search(message):
            detail = message.split(" is forbidden: ", 1)[-1].strip("[]")
            return SpawnException(
                f"This profile breaks the LimitRange of namespace {ns}: {detail}. Pick a smaller profile "
                "or ask an admin to change the limits.", reason="limit-range", status_code=403, log_message=message)
        if err.status == 403:
            what = f"The hub may not create the notebook pod in namespace {ns}"
            hint = "Ask an admin to give the hub's service account access to the team's namespace."
        elif err.status == 404:
            what = f"Namespace {ns} does not exist (yet)"
            hint = "Ask an admin to provision the team's namespace."
        else:
            what = f"The cluster refused the notebook pod in namespace {ns}"
            hint = "Ask an admin to check the profile against the namespace's limits."
        return SpawnException(f"{what}: {message}. {hint}", reason="kubernetes",
                              status_code=err.status if 400 <= (err.status or 0) < 600 else 500, log_message=message)

    # -- state and lifecycle ------------------------------------------------------------------
    def get_state(self):
        state = super().get_state()
        if getattr(self, "tenancy_namespace", None):
            state["tenancy_namespace"] = self.tenancy_namespace
        return state

    def load_state(self, state):
        super().load_state(state)
        self.tenancy_namespace = state.get("tenancy_namespace")
        if self.tenancy_namespace:  # after a hub restart, poll() and stop() look there
            self.namespace = self.tenancy_namespace

    def clear_state(self):
        super().clear_state()
        self.tenancy_namespace = None

    async def stop(self, now=False):
        if getattr(self, "tenancy_namespace", None):
            return await super().stop(now=now)
        # Never admitted (refused or cancelled in the queue): no pod was made, so look for none.
        await self._forget()

    async def progress(self):
        async for event in TenancySpawnerMixin.progress(self):
            yield event
        wl = getattr(self, "_latest", None) or {}
        if wl.get("state") != "Running":
            return
        # The pod's events (scheduled, pulled, started) once it is made in the tenant's namespace.
        while self.tenancy_namespace != wl["namespace"] or self.namespace != wl["namespace"]:
            if self._start_future is not None and self._start_future.done():
                return
            await asyncio.sleep(0.1)
        async for event in KubeSpawner.progress(self):
            yield event
