"""The REST API (``/api/v1/...`` under the service prefix) and server-sent events.

Every request carries a hub token (``Authorization: token ...``) or a hub
OAuth cookie. The token must have ``access:services!service=<name>`` and
``custom:tenancy:use`` (or ``custom:tenancy:admin``). Users act within the
namespaces of their groups; admins (hub admins, members of a tenant with
``tenancy.role=admin``, or ``custom:tenancy:admin``) act anywhere.
"""

from __future__ import annotations

import asyncio
import json

import yaml
from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import web

from ..quota.errors import ValidationError
from ..quota.manifests import load_yaml
from ..quota.quantity import format_list
from ..quota.tree import parse_tree
from ..tenants import tenants_of
from .identity import SERVICE, Forbidden, Identity, TooMany
from .hub import HubError
from .security import SecureHeaders
from .text import check_text
from .tree_edit import audit_trail, tree_changes

#: Deeper than any real submission or tree (a tree is at most a few levels of nodes).
MAX_JSON_DEPTH = 64

USE_SCOPE, ADMIN_SCOPE = "custom:tenancy:use", "custom:tenancy:admin"


def _has(scopes, wanted: str) -> bool:
    return any(s == wanted or s.startswith(wanted + "!") for s in scopes)


async def identity_of(controller, hub, model: dict) -> Identity:
    """Who a hub user/service model is here: their tenants (from the hub's current groups) and admin or not.

    Admin: the unfiltered ``custom:tenancy:admin`` scope ("!group=..." is not admin
    everywhere), a hub admin, or a member of a usable tenant with ``tenancy.role=admin``.
    """
    name, kind = model.get("name", ""), model.get("kind", "user")
    admin = ADMIN_SCOPE in set(model.get("scopes") or [])
    tenants = []
    if kind == "user":
        def tenants_in(user_model):
            groups = set(user_model.get("groups") or [])
            return [t for t in controller.tenants if t.group in groups]

        if isinstance(model.get("groups"), list):
            # The hub's answer about the token names the owner's groups already (JupyterHub's "identify" model,
            # at most token_cache_seconds old): asking /users/<name> too doubled the hub requests of each
            # user's first submit after a pause; ten users at once waited up to 0.4 s for twenty (issue 24).
            hub_model = model
        else:  # the spawner submitting for a user: a name only
            hub_model = await hub.user(name) if hub.configured else None
        if hub_model is not None and not tenants_in(hub_model):
            hub_model = await hub.user(name, fresh=True)  # just logged in: groups may be new
        admin = admin or bool((hub_model or model).get("admin"))
        tenants = tenants_in(hub_model) if hub_model is not None else tenants_of(name, controller.tenants)
    admin = admin or any(t.role == "admin" and t.usable for t in tenants)
    return Identity(name=name, admin=admin, tenants=tenants, kind=kind)


def parse_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH):
    """A request body as JSON: a 400 (``ValidationError``) for anything else, nested too deep or holding
    text that is not UTF-8 included."""
    try:
        data = json.loads(raw or b"null")
    except RecursionError:
        raise ValidationError(f"the body is nested more than {max_depth} levels deep") from None
    except ValueError as err:
        raise ValidationError(f"the body is not JSON: {err}") from None
    stack = [(data, 1)]
    while stack:  # iterative: a deep body must not exhaust our stack either
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise ValidationError(f"the body is nested more than {max_depth} levels deep")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    check_text(data, "request body")  # whatever an API keeps of it can be written out again
    return data


@web.stream_request_body
class APIHandler(HubOAuthenticated, SecureHeaders):
    """Base of the API: hub authentication, a bounded body, JSON errors that never show internals."""

    @property
    def controller(self):
        return self.settings["controller"]

    @property
    def hub(self):
        return self.settings["hub"]

    def set_default_headers(self):
        super().set_default_headers()
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    def get_login_url(self):
        raise web.HTTPError(403, "authentication required: send a hub API token")

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if status_code >= 500 and status_code != 503:
            message = "internal error of the tenancy service; the service's log has the details"
        else:
            message = getattr(exc, "log_message", None) or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"status": status_code, "error": message}))

    def check_xsrf_cookie(self):
        # Token-authenticated API calls need no xsrf; cookie-authenticated ones do.
        if self.request.headers.get("Authorization"):
            return None
        return super().check_xsrf_cookie()

    #: True while the request is answered before its body is read (a refusal in ``prepare``): see ``finish``.
    _unread = False

    async def prepare(self):
        self._body, self._body_size = [], 0
        self._unread = True
        await self.admit()
        self._unread = False

    def finish(self, chunk=None):
        if self._unread:
            # A stream_request_body handler answered before reading the body: tornado then closes the
            # connection without saying so. The hub's proxy keeps its connections to us and sent the next
            # request (anyone's) on this one as it closed: "socket hang up", a 503 for that user. Said, the
            # proxy (and any client) opens a new connection instead (RFC 9112 9.6).
            self.set_header("Connection", "close")
        return super().finish(chunk)

    async def admit(self):
        """Who asks, and may they: the hub's answer about the token, the scopes, the caller's teams, their turn.
        Raises the refusal (or redirects a browser to the hub's login)."""
        if self.controller.health.starting:
            raise web.HTTPError(503, "the tenancy service is starting (restoring its state); try again in a moment")
        model = await self._hub_user()
        if model and model.get("kind") == "service" and model.get("name") == self.settings.get("service_name"):
            self.identity = SERVICE  # our own token: the hub's spawner (only the hub and we hold it)
            return
        try:
            checked = self.check_hub_user(model) if model else None
        except UserNotAllowed:
            checked = None
        if not checked:
            if not model and self._browser_navigation():
                # A person opened an API address in the browser: log them in through the hub
                # (OAuth), as the pages do, then come back here with the session's token.
                self.redirect(HubOAuthenticated.get_login_url(self))
                return
            if model:
                raise web.HTTPError(403, f"the token may not use this service: it needs the scope "
                                         f"access:services!service={self.settings.get('service_name')}")
            if self._stale_page_login():
                raise web.HTTPError(403, "this page's login is out of date (you logged out or in again since it "
                                         "was opened): reload the page and try again")
            raise web.HTTPError(403, "a hub token with access to this service is required")
        scopes = set(checked.get("scopes") or [])
        if not (_has(scopes, USE_SCOPE) or _has(scopes, ADMIN_SCOPE)):
            raise web.HTTPError(403, f"the token lacks the scope {USE_SCOPE}")
        try:
            self.identity = await identity_of(self.controller, self.hub, checked)
        except HubError as err:
            self.controller.log.warning("%s", err)
            raise web.HTTPError(503, "the hub cannot be reached to look up your teams; try again in a moment") from None
        await self._take_turn()

    fair = True  # waits for its user's turn (see fairness.py); a stream that lasts does not

    async def _take_turn(self):
        share = self.settings.get("fairness")
        if self.fair and share is not None and getattr(self, "_turn", None) is None:
            self._turn = self.identity.name
            await share.enter(self._turn)

    def _end_turn(self):
        who, self._turn = getattr(self, "_turn", None), None
        if who is not None:
            self.settings["fairness"].leave(who)

    def on_finish(self):
        self._end_turn()

    def on_connection_close(self):
        super().on_connection_close()
        self._end_turn()

    async def _hub_user(self) -> dict | None:
        """The hub's model of the request's token (None: no token, or one the hub does not know).

        The hub answering 5xx (or not at all) once is asked again after a moment: a hub busy
        writing its database must not bounce a user; twice is a 503 the user may retry."""
        for attempt in (1, 2):
            try:
                return await self.hub_auth.get_user(self, sync=False)
            except web.HTTPError as err:
                if err.status_code < 500:
                    raise
                self.controller.log.warning("checking a token with the hub failed (attempt %d of 2): %s",
                                            attempt, err.log_message)
                if attempt == 1:
                    vars(self).pop("_cached_hub_user", None)  # HubAuth answers once per request unless told
                    await asyncio.sleep(0.5)
        raise web.HTTPError(503, "the hub cannot confirm who you are right now; try again in a moment")

    def _stale_page_login(self) -> bool:
        """The request came from one of our pages with its login cookie, but HubOAuth refused the cookie
        (its XSRF token is not this session's, or the session's token is gone): the page predates a new
        login. Said apart from "no token at all", which told people nothing they could act on (issue 22)."""
        return bool(self.hub_auth._get_token_cookie(self)) and "Authorization" not in self.request.headers

    def _browser_navigation(self) -> bool:
        return (self.request.method == "GET" and "Authorization" not in self.request.headers
                and self.request.headers.get("Sec-Fetch-Mode") == "navigate")

    def data_received(self, chunk: bytes):
        # Beyond the limit the rest is read and dropped, not kept: closing the connection
        # mid-body would reach the user as the proxy's 503 instead of our 413.
        self._body_size += len(chunk)
        if self._body_size <= self.settings.get("max_body_bytes", 1024 * 1024):
            self._body.append(chunk)

    def raw_body(self) -> bytes:
        limit = self.settings.get("max_body_bytes", 1024 * 1024)
        if self._body_size > limit:
            raise web.HTTPError(413, f"the request body is {self._body_size:,} bytes; at most {limit:,} are accepted")
        return b"".join(self._body)

    def body(self):
        try:
            return parse_json(self.raw_body())
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None

    def tree_body(self):
        """([the manifest], the parsed tree) of a body that is one ElasticQuotaTree (JSON or YAML); a 400 with
        ``tenancy validate``'s words otherwise."""
        raw = self.raw_body().decode("utf-8", "replace")
        try:
            docs = load_yaml(raw, "request body")  # JSON is YAML too
            if len(docs) != 1:
                raise ValidationError("request body: send one ElasticQuotaTree")
            check_text(docs[0], "request body")  # YAML's "\ud800" escape too
            return docs, parse_tree(docs[0])
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None

    def send(self, data, status: int = 200):
        self.set_status(status)
        self.finish(json.dumps(data, default=str))

    def workload_or_404(self, wid: str):
        row = self.controller.store.workload(wid)
        if row is None:
            raise web.HTTPError(404, f"no workload {wid}")
        try:
            self.controller.check_access(self.identity, row)
        except Forbidden as err:
            raise web.HTTPError(403, str(err)) from None
        return row


class HealthHandler(SecureHeaders):
    """``/health``: 200 when the service works, 503 while it starts or something blocks admissions
    (each problem one line, see ``health.py``); ``/health/live`` (the process answers) and
    ``/health/ready`` (the API answers) are 200 whatever the checks say,
    for Kubernetes probes: a replica blocked by the cluster must stay reachable to say why."""

    def get(self, probe=None):
        health = self.settings["controller"].health
        report = health.report()
        if probe == "live":
            ok = True
        elif probe == "ready":
            ok = not health.starting
        else:
            ok = report["status"] in ("ok", "degraded")
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.set_status(200 if ok else 503)
        self.finish(report)


def _leaf_quota(controller, tenant) -> dict | None:
    node = controller.engine.quota.nodes.get(tenant.leaf) if tenant.leaf else None
    if node is None:
        return None
    borrowed = {r: max(0, u - node.min.get(r, 0)) for r, u in node.used.items() if r in node.managed}
    return {"node": node.name, "min": format_list(node.min), "max": format_list(node.max),
            "used": format_list({r: v for r, v in node.used.items() if v}),
            "borrowed": format_list({r: v for r, v in borrowed.items() if v})}


def tenant_view(controller, tenant) -> dict:
    return {**tenant.to_dict(), "quota": _leaf_quota(controller, tenant)}


class MeHandler(APIHandler):
    async def get(self):
        who, c = self.identity, self.controller
        rows, _ = c.store.workloads(user=who.name, namespaces=[t.namespace for t in who.tenants if t.usable], limit=50)
        self.send({
            "name": who.name, "kind": who.kind, "admin": who.admin,
            "tenants": [tenant_view(c, t) for t in who.tenants],
            "workloads": await c.viewer.views_async(rows),
            "notices": c.notices(who.name),
            "datasets": c.datasets.listing([t.namespace for t in who.tenants if t.usable]),
        })


class TenantsHandler(APIHandler):
    async def get(self):
        c = self.controller
        tenants = c.tenants if self.identity.admin else self.identity.tenants
        self.send({"tenants": [tenant_view(c, t) for t in tenants]})


class TreeHandler(APIHandler):
    async def get(self):
        c = self.controller
        self.send({"tree": c.store.setting("tree") or c.tree_manifest, "quota": c.quota_view(),
                   "warnings": list(c.engine.warnings)})

    async def put(self):
        if not self.identity.admin:
            raise web.HTTPError(403, "only admins may change the quota tree")
        docs, tree = self.tree_body()
        dry_run = self.get_argument("dryRun", "false").lower() in ("1", "true", "yes")
        c = self.controller
        preview = c.preview_tree(tree)
        if dry_run:
            self.send({"dryRun": True, "valid": True, **preview})
            return
        before = c.store.setting("tree") or c.tree_manifest
        changes = tree_changes(before, docs[0])
        c.store.set_setting("tree", docs[0])
        c.set_tree(tree)
        c.tree_manifest = docs[0]
        c.store.record(c.clock(), "tree", f"{self.identity.name} changed the quota tree: "
                       + ("; ".join(changes) if changes else "no change"),
                       details={"by": self.identity.name, "changes": changes, "before": before, "manifest": docs[0]})
        c.store.commit()
        self.send({"dryRun": False, "valid": True, **preview, "audit": audit_trail(c.store, 20)})


class WorkloadsHandler(APIHandler):
    async def get(self):
        """Newest first, a page at a time: ``?limit=`` (1-500, default 100) and ``?continue=`` (the
        token of the previous page); ``?state=``, ``?kind=`` (repeatable) and ``?mine=true`` filter
        before the page is cut."""
        c, who = self.controller, self.identity
        namespace = self.get_argument("namespace", None)
        allowed = who.namespaces()
        if namespace is not None and allowed is not None and namespace not in allowed:
            raise web.HTTPError(403, f"{who.name} may not read namespace {namespace}")
        if self.get_argument("mine", "false").lower() in ("1", "true", "yes"):
            user, namespaces = who.name, []
        else:
            user, namespaces = (None if who.admin or namespace else who.name), ([namespace] if namespace else allowed)
        try:
            limit = int(self.get_argument("limit", "100"))
        except ValueError:
            raise web.HTTPError(400, "limit must be a whole number from 1 to 500") from None
        if not 1 <= limit <= 500:
            raise web.HTTPError(400, "limit must be a whole number from 1 to 500")
        try:
            rows, after = c.store.workloads(
                user=user, namespaces=namespaces, state=self.get_arguments("state") or None,
                kind=self.get_arguments("kind") or None, limit=limit, after=self.get_argument("continue", None))
        except ValueError as err:
            raise web.HTTPError(400, str(err)) from None
        self.send({"workloads": await c.viewer.views_async(list(rows)), "continue": after})

    async def post(self):
        dry_run = self.get_argument("dryRun", "false").lower() in ("1", "true", "yes")
        body = self.body()
        who = await self._submitter(body)
        try:
            if dry_run:  # what it would do now (start, wait, evict whom); nothing is stored
                self.send(self.controller.preview_submit(who, body))
                return
            # answered once the next scheduling pass decided on it and committed it (with the others it took)
            row = await self.controller.submit_and_decide(who, body)
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None
        except Forbidden as err:
            raise web.HTTPError(403, str(err)) from None
        except TooMany as err:
            raise web.HTTPError(429, str(err)) from None
        self.send(self.controller.view(row, positions=self.controller.queue_positions), 201)

    async def _submitter(self, body) -> Identity:
        """Who submits ``body``: the caller; or, for the hub's spawner (the service's own token), the user
        it names in ``user`` (taken out of ``body``), as the spawner, which alone may queue a notebook."""
        if not isinstance(body, dict) or "user" not in body:
            if self.identity is SERVICE and isinstance(body, dict) and body.get("kind") == "notebook":
                raise web.HTTPError(400, "workload: a notebook from the hub's spawner names its user (the field user)")
            return self.identity
        name = body.pop("user")
        if not self.identity.spawner:
            raise web.HTTPError(403, "only the hub's spawner may submit for a user (the field user); "
                                     "leave it out to submit as yourself")
        if not isinstance(name, str) or not name or len(name) > 255:
            raise web.HTTPError(400, "workload: user must be the name of a hub user")
        try:
            who = await identity_of(self.controller, self.hub, {"name": name, "kind": "user"})
        except HubError as err:
            self.controller.log.warning("%s", err)
            raise web.HTTPError(503, f"the hub cannot be reached to look up {name}'s teams; try again in a moment") from None
        return who.as_spawner()


class WorkloadHandler(APIHandler):
    async def get(self, wid):
        self.send(self.controller.view(self.workload_or_404(wid), events=True))

    async def delete(self, wid):
        row = self.workload_or_404(wid)
        # ?by=spawner: the notebook's spawner is stopping it (or gave up starting it); the server
        # is its business, the hub is not asked to stop it. Only the spawner's credential may.
        # A notebook is stopped only by its owner, an admin or the spawner (admission.check_stop).
        try:
            self.controller.cancel(self.identity, row, by_spawner=self.get_argument("by", "") == "spawner")
        except Forbidden as err:
            raise web.HTTPError(403, str(err)) from None
        self.send(self.controller.view(row))


class LogsHandler(APIHandler):
    async def get(self, wid):
        row = self.workload_or_404(wid)
        name = self.get_argument("pod", None)
        pods = [p for p in row.pods if name is None or p.name == name]
        if name is not None and not pods:
            raise web.HTTPError(404, f"workload {wid} has no pod {name}")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        parts = []
        for prow in pods:
            # a file read (local) or an API call (Kubernetes): off the event loop either way
            text = await asyncio.to_thread(self.controller.backend.logs, row, prow)
            parts.append(text if len(pods) == 1 else f"==> {prow.name} <==\n{text}")
        self.finish("\n".join(parts))


class OpenAPIHandler(SecureHeaders):
    def get(self):
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(self.settings["openapi"]))


def routes(prefix: str) -> list:
    from .live_handlers import EventsHandler, MetricsHandler  # they build on APIHandler, defined here

    api = prefix.rstrip("/") + "/api/v1"
    return [
        (api + "/health", HealthHandler),
        (api + "/health/(live|ready)", HealthHandler),
        (api + "/openapi.json", OpenAPIHandler),
        (api + "/me", MeHandler),
        (api + "/tenants", TenantsHandler),
        (api + "/tree", TreeHandler),
        (api + "/workloads", WorkloadsHandler),
        (api + r"/workloads/([0-9a-f]+)", WorkloadHandler),
        (api + r"/workloads/([0-9a-f]+)/logs", LogsHandler),
        (api + "/events", EventsHandler),
        (prefix.rstrip("/") + "/metrics", MetricsHandler),
    ]


def load_openapi(path) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)

