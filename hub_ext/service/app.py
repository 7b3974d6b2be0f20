"""``tenancy serve``: the scheduler service, normally started by the hub as a managed service.

Why it is over 500 lines: half of it is ``TenancyService``'s configurable traits with their
help text (the configuration reference is made from them), which belong on the one
Application; the rest starts the service: one replica, or one of several with leader election.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import signal
import socket
import sys
import time
from pathlib import Path

from jupyterhub.services.auth import HubOAuth
from sqlalchemy.exc import SQLAlchemyError
from tornado import web
from tornado.httpserver import HTTPServer
from traitlets import (Bool, CaselessStrEnum, Dict, Float, Integer, List, TraitError, Type, Unicode, default, observe,
                       validate)
from traitlets.config import Application

from ..backends import Backend, contract_problems
from ..backends.kubernetes.api import KubernetesError
from ..backends.kubernetes.leader import lease_namespace
from ..backends.local import LocalBackend
from ..quota.errors import ValidationError
from ..quota.dataset import parse_datasets
from ..quota.manifests import parse_object, read_file
from ..quota.quantity import parse_resource_list
from ..quota.tree import parse_tree
from ..tenants import tenants_from_groups
from .controller import Controller
from .dashboard import page_routes
from .group_check import group_check_routes
from .dataset_handlers import dataset_routes
from .planning_handlers import planning_routes
from .handlers import load_openapi, routes
from .history import History
from .hub import HubClient, HubError, hub_token, take_hub_token
from .security import cookie_secret
from .fairness import FairShare
from .metrics import Metrics
from .own_servers import own_server_routes
from .room import RoomHandler
from .security import OAuthCallbackHandler, StaticFiles
from .lock import AlreadyRunning, InstanceLock
from .forward import Switch, standby_app
from .health import Health, watch_database
from .heap import freeze_startup, tune
from .store import SQLITE_SYNCHRONOUS, Store, StoreError, explain
from .streams import StreamSlots
from .wait_estimate import estimate_routes
from .watchdog import Watchdog, hub_parent
from .workloads import KINDS, MIN_REQUESTS, Bounds

OPENAPI = Path(__file__).with_name("openapi.yaml")
STATIC = Path(__file__).with_name("static")


class TenancyService(Application):
    name = "tenancy-serve"
    description = "The quota/preemption scheduler service of jupyterhub-tenancy."

    config_file = Unicode("tenancy_config.py", help="Config file to load (Python, traitlets).").tag(config=True)
    aliases = {"config": "TenancyService.config_file", "port": "TenancyService.port", "ip": "TenancyService.ip",
               "db": "TenancyService.db_url", "tree": "TenancyService.tree_file"}

    ip = Unicode("127.0.0.1", help="Address to listen on.").tag(config=True)
    port = Integer(0, help="Port to listen on (default: from JUPYTERHUB_SERVICE_URL, else 10101).").tag(config=True)
    db_url = Unicode(
        "sqlite:///tenancy.sqlite",
        help="""
        SQLAlchemy URL of the service's database. SQLite (the default; a relative path is
        relative to the working directory): ``sqlite:////var/lib/tenancy/tenancy.sqlite``.
        PostgreSQL: ``postgresql://USER:PASSWORD@HOST:5432/DBNAME`` with the driver installed
        (``pip install 'jupyterhub-tenancy[postgres]'`` for psycopg 3; psycopg2 works too);
        the tables are created at start. One service runs per database: a second one finds
        it locked (a file ``<database>.lock`` beside a SQLite file, an advisory lock in
        PostgreSQL) and exits with a line naming the process that holds it.
        """,
    ).tag(config=True)
    lock_wait_seconds = Float(
        20.0,
        help="""
        How long a starting service waits for a previous one to release the database (and
        the port) before it gives up. A previous service whose hub is gone (an orphan of a
        hub killed with SIGKILL) is stopped with SIGTERM first; one that still runs under a
        live parent on this machine is a mistake: the new one exits at once. Keep this
        below the hub's service ``timeout`` (30 s by default).
        """,
    ).tag(config=True)
    exit_with_hub = Bool(
        help="""
        Exit when the hub that started this service is gone: its parent process exits, the
        hub's API refuses the service's token, or the hub's API does not answer for
        ``hub_grace_seconds``. Default: on when the parent process is JupyterHub (a managed
        service), off otherwise (an external service, e.g. the Helm chart's Deployment).
        """,
    ).tag(config=True)
    hub_grace_seconds = Float(
        30.0, help="With exit_with_hub: how long the hub's API may be unreachable before the service exits.",
    ).tag(config=True)

    @default("exit_with_hub")
    def _default_exit_with_hub(self):
        return hub_parent() is not None

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
    datasets = List(
        Dict(),
        help="""
        Datasets: shared data declared once, for the teams (hub groups, or ``"*"``) and
        namespaces that may use it, mounted into their notebooks and training jobs. Each is a
        ``Dataset`` object (``tenancy.jupyter.org/v1alpha1``) as a dict; its source is exactly
        one of ``persistentVolume`` (a PV spec: a PV and a claim per namespace, on Kubernetes),
        ``claim`` (an existing claim in each namespace) or ``path`` (a folder: what the local
        backend mounts; ``hostPath`` on Kubernetes). Example::

            c.TenancyService.datasets = [{"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset",
                "metadata": {"name": "fashion-mnist"},
                "spec": {"description": "Fashion-MNIST", "teams": ["team-a", "team-b"],
                         "source": {"path": "/srv/data/fashion-mnist"}, "readOnly": True}}]

        A bad one stops the service at start with one line naming it. Datasets declared here
        cannot be changed through the API (409); those made through the API are kept in the
        service's database.

        .. versionadded:: 0.5
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

        .. deprecated:: 0.2
            This needs the service to hold the hub scopes ``admin:groups`` and ``groups``,
            with which anyone who obtains its token can change any team's members and
            properties. Define the groups in the hub's configuration instead:
            ``c.JupyterHub.load_groups = {"team-a": {"users": [...], "properties": {...}}}``.
        """,
    ).tag(config=True)
    sync_timeout_seconds = Float(
        30.0, help="How long scheduling waits at start for the backend's first read of the cluster.",
    ).tag(config=True)
    sqlite_synchronous = CaselessStrEnum(
        list(SQLITE_SYNCHRONOUS), default_value="NORMAL",
        help="""
        SQLite's ``synchronous`` setting for the service's database (its journal is a write-ahead
        log). NORMAL, the default: a commit does not wait for the disk, so a crash of the service
        loses nothing, but a crash of the machine (power, kernel) may lose the last commits
        (submissions answered just before); the database stays sound either way, and what ran on
        the cluster is found again at the next start. FULL waits for the disk at every commit
        (a scheduling pass's commit blocked the service for 1-3 ms here). PostgreSQL is not
        affected by this setting.
        """,
    ).tag(config=True)
    gc_thresholds = List(
        Integer(), default_value=[5000, 10, 10], minlen=3, maxlen=3,
        help="The garbage collector's three generation thresholds (gc.set_threshold). CPython's default "
             "(700, 10, 10) walks the service's thousands of live pods and rows often under load: a quarter "
             "of its CPU in the cluster benchmark. Larger first thresholds make each middle collection walk "
             "more: at (20000, 20, 20), with 5,000 jobs queued, one took 0.67 s and stalled every submit "
             "meanwhile (0.13 s at the default here, for less collection time in all).").tag(config=True)
    groups_refresh_seconds = Float(5.0, help="How often hub groups (tenants) are read again.").tag(config=True)
    authenticate_metrics = Bool(
        True, help="Whether /metrics needs a token: an admin's hub token or the scrape token (``metrics_token``). "
                   "False opens it to anyone who can reach the service.").tag(config=True)
    metrics_token = Unicode(
        help="""
        The token Prometheus sends to scrape ``/metrics`` (``Authorization: Bearer <token>``; in a
        scrape config, ``authorization: {credentials: <token>}``), besides admins' hub tokens. Users'
        tokens are refused there: the metrics name every namespace. Default: ``$TENANCY_METRICS_TOKEN``,
        else none (admins' tokens only). Example: the output of ``openssl rand -hex 32``.
        """,
    ).tag(config=True)

    @default("metrics_token")
    def _metrics_token_default(self):
        return os.environ.get("TENANCY_METRICS_TOKEN", "")
    history_interval_seconds = Float(
        15.0,
        help="""
        How often the pages' history is sampled (cluster, nodes, quota tree, jobs) and kept in the
        service's database (table ``samples``), so the dashboards plot the past without Prometheus.
        The live figures on the pages are pushed more often, whenever they change. Example: ``60.0``.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)
    history_retention_hours = Float(
        48.0,
        help="""
        How long samples of the pages' history are kept; older ones are deleted as new ones are
        taken. At the default interval, 48 hours is about 11,500 rows. Example: ``24 * 7`` for a week.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)
    service_name = Unicode(
        help="""
        The service's name in the hub (default: ``$JUPYTERHUB_SERVICE_NAME``, else ``tenancy``). A
        request made with this service's own token is the hub's spawner: only it may release a
        notebook's room without stopping its server.
        """,
    ).tag(config=True)
    servers_check_seconds = Float(
        5.0,
        help="""
        How often notebook workloads are checked against the servers the hub runs. A notebook
        whose server the hub no longer runs or starts gives its room back after
        ``servers_grace_seconds`` (a backstop: the spawner normally says so at once).
        """,
    ).tag(config=True)
    servers_grace_seconds = Float(
        10.0, help="How long a notebook's server may be missing from the hub before its room is given back.",
    ).tag(config=True)
    cookie_secret = Unicode(
        "",
        help="""
        Signs the service's cookies (the pages' login through the hub). Empty (the default): derived
        from the service's hub API token, which every replica holds, so that a login made at one
        leader is honoured by the next after a takeover. Set it (at least 32 characters, the same on
        every replica) to rotate the cookies apart from the token.
        """,
    ).tag(config=True)

    @validate("cookie_secret")
    def _valid_cookie_secret(self, proposal):
        value = proposal["value"]
        if value and len(value) < 32:
            raise TraitError(f"TenancyService.cookie_secret has {len(value)} characters; at least 32 are needed")
        return value

    token_cache_seconds = Float(
        4.0, help="How long the hub's answer about a token is trusted: a revoked token is refused after this.",
    ).tag(config=True)
    max_body_bytes = Integer(1024 * 1024, help="Largest request body the API accepts (413 beyond).").tag(config=True)
    requests_per_user = Integer(
        2,
        help="""
        API requests of one user (or token owner) worked on at once; the others wait their
        turn, so one user's flood does not slow everybody else's answers. 0: no limit.
        """,
    ).tag(config=True)
    max_event_streams_per_user = Integer(
        10,
        help="""
        Event streams (``GET /api/v1/events``: each open page and JupyterLab tab holds one) one
        user may hold open at once; the next is refused (429) until one closes. 0: no cap.
        """,
    ).tag(config=True)
    max_reclaim_grace_seconds = Float(
        60.0,
        help="""
        The longest grace period a borrowing pod gets when it is evicted to give another team
        back its guarantee (a reclaim): a pod's own ``gracePeriodSeconds`` (or its PriorityClass's)
        above it is cut to it, and the pod is killed once it has passed (Kubernetes deletes it
        with this grace period; the local backend sends SIGKILL). Without it, a borrower asking
        for an hour's grace and ignoring SIGTERM would hold the other team's guarantee for an
        hour. Other evictions (priority preemption within a team) keep their grace period.
        """,
    ).tag(config=True)

    @validate("max_reclaim_grace_seconds")
    def _valid_reclaim_grace(self, proposal):
        if proposal["value"] < 0:
            raise TraitError(f"TenancyService.max_reclaim_grace_seconds must be 0 or more, got {proposal['value']}")
        return proposal["value"]

    max_replicas = Integer(64, help="Most pods (replicas) one training job may ask for.").tag(config=True)
    max_workloads_per_user = Integer(
        20,
        help="""
        Most notebooks and training jobs one user may have waiting or running at once (429
        beyond); 0 for no cap. Running work counts: a user whose jobs start at once must not
        fill the cluster's queue either.

        .. versionadded:: 0.6 (as ``max_queued_per_user`` before, which counted waiting jobs only)
        """,
    ).tag(config=True)
    max_workloads_per_team = Integer(
        100,
        help="""
        Most notebooks and training jobs one team (tenant; a namespace outside every team) may
        have waiting or running at once (429 beyond); 0 for no cap.

        .. versionadded:: 0.6
        """,
    ).tag(config=True)
    max_queued_per_user = Integer(
        None, allow_none=True,
        help="The old name of ``max_workloads_per_user``; still honoured (it now counts running work too).",
    ).tag(config=True)

    @observe("max_queued_per_user")
    def _old_cap_name(self, change):
        if change["new"] is not None:
            self.log.warning("TenancyService.max_queued_per_user is now called max_workloads_per_user and counts "
                             "running work too; the old name still works")
            self.max_workloads_per_user = change["new"]

    min_requests = Dict(
        dict(MIN_REQUESTS),
        help="""
        The least each pod is charged, per resource: a request below it (``0``, ``1e-30``)
        is raised to it, and so is a limit below it; a resource left open is given it unless
        a LimitRange of the namespace gives a default. Without it, pods that ask for nothing
        would run uncharged, as many as the caps allow. ``{"cpu": "100m", "memory": "64Mi"}``
        (the default); ``{}`` turns it off.

        .. versionadded:: 0.6
        """,
    ).tag(config=True)
    max_script_bytes = Integer(256 * 1024, help="Largest training script (Python source) accepted.").tag(config=True)
    max_command_bytes = Integer(64 * 1024, help="Largest training command line (all arguments) accepted.").tag(config=True)
    max_env_bytes = Integer(64 * 1024, help="Largest environment (all names and values) one workload may set.").tag(config=True)
    default_requests = Dict(
        {"notebook": {"cpu": "1", "memory": "1Gi"}, "training": {"cpu": "1", "memory": "1Gi"}},
        help="""
        Requests given, per kind, to workloads that leave a resource open (neither requested
        nor limited, and no LimitRange default in their namespace), so nothing runs uncharged.
        ``{"training": {"cpu": "1", "memory": "1Gi"}}``; an empty mapping for a kind turns this off.
        """,
    ).tag(config=True)

    leader_election = Bool(
        False,
        help="""
        Run as one of several replicas on one shared database (PostgreSQL), with leader election
        on a ``coordination.k8s.io/v1`` Lease (``lease_namespace``/``lease_name``), as client-go's
        ``leaderelection`` does it. Only the leader runs the scheduler, the backend's background
        work and acts on the cluster (it alone takes the database lock); the others answer
        ``/api/v1/health`` (``role``: ``follower``, ``leader``: its identity) and forward every
        other request to the leader's ``advertise_url``. A follower takes over within
        ``lease_duration_seconds`` (plus up to two ``retry_period_seconds``) of the leader's last
        renewal; a leader that cannot renew within ``renew_deadline_seconds`` exits at once,
        before the lease expires for the others, and starts again as a follower.
        The Lease is on the cluster of ``c.KubernetesBackend.kubeconfig`` (in-cluster by default);
        it needs get, create and update on ``coordination.k8s.io`` leases in its namespace.

        .. versionadded:: 0.4
        """,
    ).tag(config=True)
    lease_name = Unicode("jupyterhub-tenancy", help="With leader_election: the Lease's name.").tag(config=True)
    lease_namespace = Unicode(
        help="With leader_election: the Lease's namespace (default: ``$POD_NAMESPACE``, else the "
             "in-cluster ServiceAccount's namespace, else ``default``).",
    ).tag(config=True)
    lease_duration_seconds = Float(
        15.0, help="With leader_election: how long followers wait, after the lease record last changed, before "
                   "taking it (client-go's LeaseDuration).",
    ).tag(config=True)
    renew_deadline_seconds = Float(
        10.0, help="With leader_election: how long the leader keeps acting without a successful renewal before it "
                   "exits (client-go's RenewDeadline); below lease_duration_seconds.",
    ).tag(config=True)
    retry_period_seconds = Float(
        2.0, help="With leader_election: how often the leader renews and followers try (client-go's RetryPeriod).",
    ).tag(config=True)
    identity = Unicode(
        help="With leader_election: this replica's name in the Lease (default: the host name, the pod's, and a "
             "random suffix, so that a restarted process is a new holder).",
    ).tag(config=True)
    advertise_url = Unicode(
        help="""
        With leader_election: where the other replicas reach this one when it leads, written in the
        Lease's annotation ``tenancy.jupyter.org/advertise-url``. Default: ``http://$POD_IP:<port>``
        (the chart sets ``POD_IP``), else this service's ip (or host name) and port. Example::

            c.TenancyService.advertise_url = "http://10.0.3.7:10101"
        """,
    ).tag(config=True)

    @default("lease_namespace")
    def _default_lease_namespace(self):
        return lease_namespace()

    @default("identity")
    def _default_identity(self):
        return f"{socket.gethostname()}_{secrets.token_hex(4)}"

    @default("advertise_url")
    def _default_advertise_url(self):
        host = os.environ.get("POD_IP") or (self.ip if self.ip not in ("", "0.0.0.0", "::") else socket.gethostname())
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @default("service_name")
    def _default_service_name(self):
        return os.environ.get("JUPYTERHUB_SERVICE_NAME", "tenancy")
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
        problems = contract_problems(self.backend_class)
        if problems:
            raise ValidationError(f"TenancyService.backend_class: {'; '.join(problems)}")
        datasets = self._datasets()  # before anything is made: a bad one is the only line
        store = Store(self.db_url, sqlite_synchronous=self.sqlite_synchronous)
        self.hub = HubClient()
        backend = self.backend_class(hub=self.hub, parent=self)
        saved = store.setting("tree")
        tree, manifest = (parse_tree(saved), saved) if saved else self.load_tree()
        if tree is None:
            tree, manifest = backend.quota_tree()  # the cluster's own ElasticQuotaTree, if it has one
        self.metrics = Metrics()
        controller = Controller(store=store, backend=backend, tree=tree, log=self.log, metrics=self.metrics,
                                notebook_priority_class=self.notebook_priority_class,
                                training_priority_class=self.training_priority_class,
                                bounds=Bounds(max_replicas=self.max_replicas, max_command_bytes=self.max_command_bytes,
                                              max_script_bytes=self.max_script_bytes, max_env_bytes=self.max_env_bytes,
                                              min_requests=self._min_requests()),
                                default_requests=self._default_requests(),
                                max_workloads_per_user=self.max_workloads_per_user,
                                max_workloads_per_team=self.max_workloads_per_team)
        controller.tree_manifest = manifest
        controller.engine.max_reclaim_grace = self.max_reclaim_grace_seconds
        for i, raw in enumerate(self.objects):
            try:
                controller.apply_object(parse_object(raw))
            except ValidationError as err:
                raise err.within(f"TenancyService.objects[{i}]") from None
        controller.datasets.configure(datasets)
        prefix = self.prefix if self.prefix.endswith("/") else self.prefix + "/"
        # The handlers (ours and jupyterhub's OAuth callback) all use this one singleton.
        # The token came through a pipe (take_hub_token): it is in no environment, ours or a workload's.
        # Without a hub (started by hand, no token) nothing can be authenticated; HubOAuth wants a
        # token all the same.
        hub_auth = HubOAuth.instance(api_token=hub_token() or "no-hub-configured",
                                     cache_max_age=self.token_cache_seconds)
        self.history = History(controller, interval=self.history_interval_seconds,
                               retention_hours=self.history_retention_hours, metrics=self.metrics)
        app = web.Application(
            routes(prefix) + dataset_routes(prefix + "api/v1") + planning_routes(prefix + "api/v1")
            + group_check_routes(prefix + "api/v1")
            + [(prefix + "api/v1/room", RoomHandler), (prefix + "oauth_callback", OAuthCallbackHandler)]
            + own_server_routes(prefix) + estimate_routes(prefix)
            + page_routes(prefix),
            controller=controller, hub=self.hub, hub_auth=hub_auth, metrics=self.metrics,
            history=self.history, page_prefix=prefix,
            openapi=load_openapi(OPENAPI), authenticate_metrics=self.authenticate_metrics,
            metrics_token=self.metrics_token,
            cookie_secret=cookie_secret(self.cookie_secret, hub_token()), xsrf_cookies=False,
            service_name=self.service_name, max_body_bytes=self.max_body_bytes,
            fairness=FairShare(self.requests_per_user), streams=StreamSlots(self.max_event_streams_per_user),
            static_path=str(STATIC), static_url_prefix=prefix + "static/", static_handler_class=StaticFiles,
        )
        return app, controller

    def _datasets(self) -> list:
        """``datasets``, each parsed, and checked together (names, mount paths): one line for a bad one."""
        return parse_datasets(self.datasets, lambda i: f"TenancyService.datasets[{i}]", "TenancyService.datasets")

    def _default_requests(self) -> dict:
        for kind, amounts in self.default_requests.items():
            if kind not in KINDS:
                raise ValidationError(f"TenancyService.default_requests: unknown kind {kind!r} (notebook, training)")
            parse_resource_list(amounts, f"TenancyService.default_requests[{kind!r}]")
        return dict(self.default_requests)

    def _min_requests(self) -> dict:
        parse_resource_list(self.min_requests, "TenancyService.min_requests")
        return dict(self.min_requests)

    async def watch_servers(self, controller: Controller) -> None:
        """The backstop for notebooks whose end nobody reported (see ``servers_check_seconds``)."""
        while True:
            await asyncio.sleep(self.servers_check_seconds)
            try:
                active = await self.hub.active_servers()
            except HubError as err:  # unknown is not gone: release nothing
                self.log.warning("%s", err)
                continue
            for row in controller.reconcile_servers(active, self.servers_grace_seconds):
                self.log.info("notebook %s of %s: the hub no longer runs its server; its room is free", row.id, row.user)

    async def seed_tenants(self) -> None:
        """Create ``tenant_groups`` through the hub API (deprecated: see the trait)."""
        if not self.tenant_groups:
            return
        self.log.warning("TenancyService.tenant_groups is deprecated: it needs the admin:groups and groups scopes, "
                         "with which anyone holding this service's token can change every team; define the groups "
                         "with their properties in the hub's c.JupyterHub.load_groups instead")
        try:
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
        except HubError as err:
            if " answered 403:" not in str(err):
                raise
            self.log.warning("TenancyService.tenant_groups: the hub does not let this service create groups or set "
                             "their properties (as it should not), so they were not created; move them to the hub's "
                             "c.JupyterHub.load_groups")

    async def refresh_tenants(self, controller: Controller) -> None:
        while True:
            try:
                groups = await self.hub.groups(fresh=True)
                controller.set_tenants(tenants_from_groups(groups, controller.base_tree, controller.engine.classes.by_name))
            except HubError as err:
                self.log.warning("%s", err)
            await asyncio.sleep(self.groups_refresh_seconds)

    async def serve(self) -> None:
        if self.leader_election:
            return await self.serve_elected()
        app, controller = self.make_app()
        await self.read_tenants(controller)
        # Listen first: while the cluster is away /health says so (the API answers 503 until restored).
        controller.health.starting = True
        await self.listen(app)
        self.log.info("tenancy service listening on http://%s:%s%s", self.ip, self.port, self.prefix)
        await self.act(controller)

    async def read_tenants(self, controller: Controller) -> None:
        if self.hub.configured:
            try:
                await self.seed_tenants()
                groups = await self.hub.groups(fresh=True)
                controller.set_tenants(tenants_from_groups(groups, controller.base_tree, controller.engine.classes.by_name))
            except HubError as err:
                self.log.warning("%s", err)

    def elector(self, loop, became_leader: asyncio.Event):
        """The backend's leader election (``Backend.leader_elector``); its callbacks reach the event loop."""

        def show():  # on the loop: what /health says of the election
            election, health = self.election, self.health_now
            health.leader = election.leader
            takeover = self.lease_duration_seconds + 2 * self.retry_period_seconds
            health.set("leader-election", f"cannot read or write the lease {election.where}: {election.error}"
                       if election.error else None if election.leader else
                       f"no replica leads right now; one takes over within {takeover:.0f} s", blocking=False,
                       log=False)  # the election logs its own lines

        election = self.backend_class.leader_elector(
            self, on_started_leading=lambda: loop.call_soon_threadsafe(became_leader.set),
            on_change=lambda: loop.call_soon_threadsafe(show))
        if election is None:
            raise ValidationError(f"TenancyService.leader_election: {self.backend_class.__name__} elects no leader; "
                                  "run one replica, without leader_election")
        return election

    async def serve_elected(self) -> None:
        """One replica of several: follow (health, requests forwarded) until this one leads, then
        take the database lock, build the service from the database and act."""
        self.hub = HubClient()
        loop = asyncio.get_running_loop()
        self.health_now = Health(self.log)
        self.health_now.role = "follower"
        became_leader = asyncio.Event()
        self.election = self.elector(loop, became_leader)
        self.health_now.set("leader-election", f"the lease {self.election.where} is not read yet", blocking=False,
                            log=False)
        prefix = self.prefix if self.prefix.endswith("/") else self.prefix + "/"
        switch = Switch(standby_app(prefix, self.health_now, self.election, max_body_bytes=self.max_body_bytes))
        await self.listen(switch)
        self.log.info("tenancy service (%s) listening on http://%s:%s%s; advertised as %s; lease %s/%s",
                      self.identity, self.ip, self.port, self.prefix, self.advertise_url, self.lease_namespace,
                      self.lease_name)
        self.election.start()
        await became_leader.wait()
        self.health_now.starting = True
        self.instance_lock = await asyncio.to_thread(
            InstanceLock(self.db_url).acquire, self.lock_wait_seconds, self.log, elected=True)
        if getattr(self, "watchdog", None) is not None:
            self.watchdog.lock = self.instance_lock
        app, controller = self.make_app()  # the state as the previous leader left it
        controller.health.role, controller.health.leader = "leader", self.identity
        controller.health.starting = True
        self.health_now = controller.health
        switch.app = app
        await self.read_tenants(controller)
        await self.act(controller)

    def release_lease(self) -> None:
        """After the service stopped acting (the event loop is done): let a follower take over at once."""
        election = getattr(self, "election", None)
        if election is not None and election.leading:
            election.stop()
            election.release()

    async def act(self, controller: Controller) -> None:
        """Restore the state and run: the controller, the backend's background work, history, hub watches."""
        backend = controller.backend
        # Before the state is read: a restored row that ends later (in a cycle with its pods) must
        # stay collectable, and what is frozen is never collected.
        freeze_startup()
        await backend.wait_ready()  # the API server answers (retried with backoff; no exit)
        restored = await controller.restore()  # first: adopting what runs is checked against our own pods only
        controller.datasets.start()  # the backend makes what the datasets need; held work waits for it
        controller.health.starting = False
        tasks = [asyncio.ensure_future(backend.run()),
                 asyncio.ensure_future(watch_database(controller.store, controller.health))]
        self.log.info("restored %d active workload(s)", restored)
        if backend.synced is not None:
            # Nothing is admitted before the cluster's other pods, quotas and limits are known.
            try:
                await asyncio.wait_for(backend.synced.wait(), self.sync_timeout_seconds)
            except asyncio.TimeoutError:
                self.log.warning("the cluster's pods, quotas and limits are not read after %.0f s; scheduling anyway",
                                 self.sync_timeout_seconds)
        tasks.append(asyncio.ensure_future(controller.run()))
        tasks.append(asyncio.ensure_future(self.history.run()))  # the pages' history and live figures
        if self.hub.configured:
            tasks.append(asyncio.ensure_future(self.refresh_tenants(controller)))
            tasks.append(asyncio.ensure_future(self.watch_servers(controller)))
        await asyncio.gather(*tasks)

    async def listen(self, app) -> None:
        """Listen on the port; while another process holds it, wait (up to lock_wait_seconds) for it to go."""
        deadline, told = time.monotonic() + self.lock_wait_seconds, False
        while True:
            try:
                server = HTTPServer(app, xheaders=True)
                server.listen(self.port, self.ip)
                return
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    raise ListenError(f"cannot listen on {self.ip}:{self.port} ({err.strerror}): "
                                      "set TenancyService.ip and port (or the service's url in the hub)") from None
                if time.monotonic() >= deadline:
                    raise ListenError(f"port {self.port} on {self.ip} is still in use by another process after "
                                      f"{self.lock_wait_seconds:.0f} s: stop it, or give the service another port") from None
                if not told:
                    self.log.warning("port %s on %s is in use: waiting up to %.0f s for it to be free",
                                     self.port, self.ip, self.lock_wait_seconds)
                    told = True
                await asyncio.sleep(0.25)

    def _hub_address(self):
        hub = getattr(self, "hub", None)
        return (hub.api_url, hub.token) if hub is not None and hub.configured else None

    async def run(self, parent: int | None) -> int:
        """``serve()`` until the watchdog says the service must stop (or, with leader election, SIGTERM);
        the exit status."""
        self.watchdog = watchdog = Watchdog(parent=parent, hub=self._hub_address if self.exit_with_hub else None,
                                            lock=getattr(self, "instance_lock", None),
                                            grace_seconds=self.hub_grace_seconds, log=self.log)
        serving, watching = asyncio.ensure_future(self.serve()), asyncio.ensure_future(watchdog.wait())
        waits = {serving, watching}
        if self.leader_election:  # SIGTERM (a rolling update): stop acting, then let go of the lease (start())
            terminated = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGTERM, lambda: terminated.done() or terminated.set_result(("SIGTERM received", 0)))
            waits.add(terminated)
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            watching.cancel()
            serving.result()  # its error, if it failed
            return 0
        why, status = next(w for w in waits if w.done() and w is not serving).result()
        self.log.warning("%s: the tenancy service exits", why)
        watching.cancel()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        return status

    def start(self):
        # The parent now: once the hub is gone it is some other process.
        parent = os.getppid() if self.exit_with_hub and os.getppid() > 1 else None
        status = 0
        tune(self.gc_thresholds)
        try:
            if not self.leader_election:  # else the leader takes it once elected (serve_elected)
                self.instance_lock = InstanceLock(self.db_url).acquire(self.lock_wait_seconds, self.log)
            try:
                status = asyncio.run(self.run(parent))
            finally:
                self.release_lease()
        except (ValidationError, KubernetesError, StoreError, AlreadyRunning, ListenError) as err:
            print(f"tenancy serve: error: {err}", file=sys.stderr)
            sys.exit(1)
        except SQLAlchemyError as err:  # the database failed while starting (a damaged page, the server gone)
            print(f"tenancy serve: error: {explain(self.db_url, err)}", file=sys.stderr)
            sys.exit(1)
        except KeyboardInterrupt:
            pass
        if status:
            sys.exit(status)


class ListenError(Exception):
    """The service cannot listen where it is told to (one line)."""


def main(argv=None) -> int:
    take_hub_token()  # first: re-executes this process without the hub token in its environment
    TenancyService.launch_instance(argv)
    return 0
