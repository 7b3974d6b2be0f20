"""``tenancy serve``: the scheduler service, normally started by the hub as a managed service."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler
from tornado import web
from traitlets import Bool, Dict, Float, Integer, List, Type, Unicode, default
from traitlets.config import Application

from ..backends import Backend
from ..backends.kubernetes.api import KubernetesError
from ..backends.local import LocalBackend
from ..quota.errors import ValidationError
from ..quota.manifests import parse_object, read_file
from ..quota.tree import parse_tree
from ..tenants import tenants_from_groups
from .controller import Controller
from .dashboard import DashboardHandler
from .handlers import load_openapi, routes
from .hub import HubClient, HubError
from .metrics import Metrics
from .store import Store

OPENAPI = Path(__file__).with_name("openapi.yaml")


class TenancyService(Application):
    name = "tenancy-serve"
    description = "The quota/preemption scheduler service of jupyterhub-tenancy."

    config_file = Unicode("tenancy_config.py", help="Config file to load (Python, traitlets).").tag(config=True)
    aliases = {"config": "TenancyService.config_file", "port": "TenancyService.port", "ip": "TenancyService.ip",
               "db": "TenancyService.db_url", "tree": "TenancyService.tree_file"}

    ip = Unicode("127.0.0.1", help="Address to listen on.").tag(config=True)
    port = Integer(0, help="Port to listen on (default: from JUPYTERHUB_SERVICE_URL, else 10101).").tag(config=True)
    db_url = Unicode("sqlite:///tenancy.sqlite",
                     help="SQLAlchemy URL of the service's database, e.g. postgresql://user@host/tenancy.").tag(config=True)
    tree_file = Unicode("", help="An ElasticQuotaTree YAML file (empty: no tree; every namespace is its own leaf).").tag(config=True)
    tree = Dict(help="The ElasticQuotaTree as a dict (used when tree_file is empty).").tag(config=True)
    objects = List(
        Dict(),
        help="""
        Namespace-level objects, as manifests: ``ResourceQuota``, ``LimitRange``,
        ``PriorityClass`` (beyond the three built in), ``Namespace``. Example::

            c.TenancyService.objects = [{"apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "dev-quota", "namespace": "team-d"},
                "spec": {"hard": {"requests.cpu": "15", "pods": "4"}}}]
        """,
    ).tag(config=True)
    backend_class = Type(
        LocalBackend, klass=Backend,
        help="""
        Where workloads run: ``hub_ext.backends.local.LocalBackend`` (this machine; the
        default) or ``hub_ext.backends.kubernetes.KubernetesBackend`` (a cluster; configure
        it with ``c.KubernetesBackend.*``).
        """,
    ).tag(config=True)
    notebook_priority_class = Unicode("low-priority-dev", help="PriorityClass of notebook servers.").tag(config=True)
    training_priority_class = Unicode("high-priority-research",
                                      help="Default PriorityClass of training jobs.").tag(config=True)
    tenant_groups = Dict(
        help="""
        Tenants to create at start-up, as hub groups with properties::

            {"team-a": {"tenancy.namespace": "team-a", "tenancy.quota-leaf": "root.a.1"}}

        A group that already has tenancy properties is left alone: the admin panel's edits win.
        """,
    ).tag(config=True)
    sync_timeout_seconds = Float(
        30.0, help="How long scheduling waits at start for the backend's first read of the cluster.",
    ).tag(config=True)
    groups_refresh_seconds = Float(5.0, help="How often hub groups (tenants) are read again.").tag(config=True)
    authenticate_metrics = Bool(True, help="Whether /metrics needs a token like the API.").tag(config=True)
    prefix = Unicode(help="URL prefix (the hub's service prefix).").tag(config=True)

    @default("prefix")
    def _default_prefix(self):
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/tenancy/")

    @default("port")
    def _default_port(self):
        url = os.environ.get("JUPYTERHUB_SERVICE_URL", "")
        try:
            from urllib.parse import urlparse

            return urlparse(url).port or 10101
        except ValueError:
            return 10101

    def initialize(self, argv=None):
        super().initialize(argv)
        if self.config_file and os.path.exists(self.config_file):
            self.load_config_file(self.config_file)
            self.update_config(self.cli_config)  # the command line wins over the file

    def load_tree(self):
        if self.tree_file:
            docs = read_file(self.tree_file)
            if len(docs) != 1:
                raise ValidationError(f"{self.tree_file}: expected one ElasticQuotaTree")
            return parse_tree(docs[0]), docs[0]
        if self.tree:
            return parse_tree(dict(self.tree)), dict(self.tree)
        return None, None

    def make_app(self) -> tuple[web.Application, Controller]:
        store = Store(self.db_url)
        self.hub = HubClient()
        backend = self.backend_class(hub=self.hub, parent=self)
        saved = store.setting("tree")
        tree, manifest = (parse_tree(saved), saved) if saved else self.load_tree()
        if tree is None and hasattr(backend, "quota_tree"):
            tree, manifest = backend.quota_tree()  # the cluster's own ElasticQuotaTree, if it has one
        self.metrics = Metrics()
        controller = Controller(store=store, backend=backend, tree=tree, log=self.log, metrics=self.metrics,
                                notebook_priority_class=self.notebook_priority_class,
                                training_priority_class=self.training_priority_class)
        controller.tree_manifest = manifest
        for i, raw in enumerate(self.objects):
            try:
                controller.apply_object(parse_object(raw))
            except ValidationError as err:
                raise err.within(f"TenancyService.objects[{i}]") from None
        prefix = self.prefix if self.prefix.endswith("/") else self.prefix + "/"
        # The handlers (ours and jupyterhub's OAuth callback) all use this one singleton.
        hub_auth = HubOAuth.instance(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""), cache_max_age=30)
        # Both clients hold the token now; keep it out of the environment that workloads inherit.
        # (The local backend is for one trust domain: pods run as the service's OS user.)
        os.environ.pop("JUPYTERHUB_API_TOKEN", None)
        app = web.Application(
            routes(prefix) + [(prefix + "oauth_callback", HubOAuthCallbackHandler), (prefix, DashboardHandler)],
            controller=controller, hub=self.hub, hub_auth=hub_auth, metrics=self.metrics,
            openapi=load_openapi(OPENAPI), authenticate_metrics=self.authenticate_metrics,
            cookie_secret=os.urandom(32), xsrf_cookies=False,
        )
        return app, controller

    async def seed_tenants(self) -> None:
        existing = {g["name"]: g for g in await self.hub.groups(fresh=True)}
        for name, props in self.tenant_groups.items():
            group = existing.get(name)
            if group is None:
                await self.hub.request("POST", f"/groups/{name}", ok=(201, 409))
                group = {"properties": {}}
            current = group.get("properties") or {}
            if any(k.startswith("tenancy.") for k in current):
                continue
            await self.hub.request("PUT", f"/groups/{name}/properties", {**current, **props})
            self.log.info("created tenant group %s", name)

    async def refresh_tenants(self, controller: Controller) -> None:
        while True:
            try:
                groups = await self.hub.groups(fresh=True)
                controller.set_tenants(tenants_from_groups(groups, controller.base_tree, controller.engine.classes.by_name))
            except HubError as err:
                self.log.warning("%s", err)
            await asyncio.sleep(self.groups_refresh_seconds)

    async def serve(self) -> None:
        app, controller = self.make_app()
        if self.hub.configured:
            try:
                await self.seed_tenants()
                groups = await self.hub.groups(fresh=True)
                controller.set_tenants(tenants_from_groups(groups, controller.base_tree, controller.engine.classes.by_name))
            except HubError as err:
                self.log.warning("%s", err)
        backend = controller.backend
        restored = await controller.restore()  # first: adopting what runs is checked against our own pods only
        tasks = [asyncio.ensure_future(backend.run())] if hasattr(backend, "run") else []
        self.log.info("restored %d active workload(s)", restored)
        app.listen(self.port, self.ip, xheaders=True)
        self.log.info("tenancy service listening on http://%s:%s%s", self.ip, self.port, self.prefix)
        if hasattr(backend, "synced"):
            # Nothing is admitted before the cluster's other pods, quotas and limits are known.
            try:
                await asyncio.wait_for(backend.synced.wait(), self.sync_timeout_seconds)
            except asyncio.TimeoutError:
                self.log.warning("the cluster's pods, quotas and limits are not read after %.0f s; scheduling anyway",
                                 self.sync_timeout_seconds)
        tasks.append(asyncio.ensure_future(controller.run()))
        if self.hub.configured:
            tasks.append(asyncio.ensure_future(self.refresh_tenants(controller)))
        await asyncio.gather(*tasks)

    def start(self):
        try:
            asyncio.run(self.serve())
        except (ValidationError, KubernetesError) as err:
            print(f"tenancy serve: error: {err}", file=sys.stderr)
            sys.exit(1)
        except KeyboardInterrupt:
            pass


def main(argv=None) -> int:
    TenancyService.launch_instance(argv)
    return 0
