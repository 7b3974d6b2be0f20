"""The service's pages in the hub: cluster, nodes, jobs (and each job), quota, datasets, the tree editor, tenants.

People reach them from the hub's Services menu (OAuth login through the hub).
Each page is a Jinja2 template with autoescape that carries its first data as
JSON (``|tojson``, inert to the browser); the bundled script
(``static/build/pages.js``, built from ``pages/`` with Chart.js) draws the
tables and plots from it and keeps them live from the event stream
(``api/v1/events?samples=true``): no reloads, no timers of its own.

Admins see everything; users see every team's totals, and the names of people and
servers of their own teams only (``history.visible``, ``visibility.py``). The tree editor and the tenants page are for admins.
The datasets page reads ``api/v1/datasets`` itself (a user gets their teams' datasets
there), and admins change them through the same API.
"""

from __future__ import annotations

import json
import os
import time

from jupyterhub.services.auth import HubOAuthenticated
from sqlalchemy import select
from tornado import web

from ..quota.quantity import format_list
from .handlers import identity_of, tenant_view
from .history import since_argument, team_names, visible
from .hub import HubError
from .pages import render
from .provider_groups import unmapped
from .security import PAGE_POLICY, SecureHeaders
from .store import EventRow
from .tree_edit import audit_trail, evictions_log
from .visibility import evictions_seen

PAGES = (  # (path under the prefix, title, admins only)
    ("", "Cluster", False),
    ("nodes", "Nodes", False),
    ("jobs", "Jobs", False),
    ("quota", "Quota", False),
    ("datasets", "Datasets", False),
    ("tree", "Quota tree editor", True),
    ("tenants", "Tenants", True),
)


class PageHandler(HubOAuthenticated, SecureHeaders):
    """Base of the pages: the hub login, who is looking, the page's frame and its first data."""

    policy = PAGE_POLICY
    page = ""
    admin_only = False

    @property
    def controller(self):
        return self.settings["controller"]

    async def prepare(self):
        # Ask the hub about the token here, without blocking: tornado's get_current_user is not a
        # coroutine, and HubAuth's blocking answer there held the event loop for the hub's reply.
        # HubAuth keeps the answer for the rest of the request.
        await self.hub_auth.get_user(self, sync=False)

    async def who(self):
        return await identity_of(self.controller, self.settings["hub"], self.current_user)

    def show(self, template: str, who, data: dict, **extra) -> None:
        prefix = self.settings.get("page_prefix", "/services/tenancy/")
        base = os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/")
        nav = [{"href": prefix + path, "title": title, "current": path == self.page}
               for path, title, admin in PAGES if who.admin or not admin]
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(render(
            template, user=who.name, admin=who.admin, nav=nav, prefix=prefix, page=self.page or "cluster",
            hub_home=base + "/hub/home", hub_admin=base + "/hub/admin" if who.admin else None,
            teams=[t.group for t in who.tenants if t.usable], static=self.static_url,
            # The hub's XSRF token of this session: the scripts' own requests (fetch, the event stream) send
            # it back, or the hub's OAuth cookie is not accepted for them (only for page navigations).
            data={"prefix": prefix, "user": who.name, "admin": who.admin, "now": time.time(),
                  "xsrf": _text(self.xsrf_token), **data}, **extra,
        ))

    def history(self, who) -> list[dict]:
        since = since_argument(self.get_argument("hours", None), self.controller.clock())
        return [visible(s, who) for s in self.settings["history"].samples(since)]

    async def live(self, who) -> dict:
        return visible(await self.settings["history"].current(), who)

    async def forbid_unless_admin(self, who) -> None:
        if not who.admin:
            raise web.HTTPError(403, "this page is for admins")

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) if status_code < 500 else None
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(render("error.html", status=status_code, static=self.static_url,
                           message=message or "Something went wrong in the tenancy service; its log has the details.",
                           hub_home=os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/hub/home"))


def _text(value) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


class ClusterPage(PageHandler):
    page = ""

    @web.authenticated
    async def get(self):
        who = await self.who()
        self.show("cluster.html", who, {"snapshot": await self.live(who), "history": self.history(who),
                                        "warnings": list(self.controller.engine.warnings)})


class NodesPage(PageHandler):
    page = "nodes"

    @web.authenticated
    async def get(self):
        who = await self.who()
        self.show("nodes.html", who, {"snapshot": await self.live(who), "history": self.history(who)})


class JobsPage(PageHandler):
    page = "jobs"

    @web.authenticated
    async def get(self):
        who = await self.who()
        c = self.controller
        rows, _ = c.store.workloads(user=None if who.admin else who.name, namespaces=who.namespaces(), limit=300)
        self.show("jobs.html", who, {"workloads": await c.viewer.views_async(list(rows)), "snapshot": await self.live(who),
                                     "history": self.history(who)})


class JobPage(PageHandler):
    page = "jobs"

    @web.authenticated
    async def get(self, wid):
        who = await self.who()
        c = self.controller
        row = c.store.workload(wid)
        if row is None:
            raise web.HTTPError(404, f"There is no workload {wid}: it may have been removed. Go back to the jobs list.")
        try:
            c.check_access(who, row)
        except Exception:  # noqa: BLE001 - Forbidden: the same words for every page
            raise web.HTTPError(403, f"Workload {wid} belongs to a team you are not in.") from None
        self.show("job.html", who, {"workload": c.view(row, events=True)}, title=f"{row.name} ({row.id})")


class QuotaPage(PageHandler):
    page = "quota"

    @web.authenticated
    async def get(self):
        who = await self.who()
        c = self.controller
        self.show("quota.html", who, {"snapshot": await self.live(who), "history": self.history(who),
                                      "evictions": evictions_seen(evictions_log(c.store, who.namespaces()), who,
                                                                  team_names(c)),
                                      "warnings": list(c.engine.warnings)})


class DatasetsPage(PageHandler):
    """The datasets, drawn by the page's script from ``api/v1/datasets`` (what the caller may see),
    kept live by the event stream; for admins the editor and the audit trail of dataset changes."""

    page = "datasets"

    @web.authenticated
    async def get(self):
        who = await self.who()
        audit = dataset_audit(self.controller.store) if who.admin else []
        if self.get_argument("audit", None) is not None:  # the page's own refresh after a change
            await self.forbid_unless_admin(who)
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            return self.finish(json.dumps({"audit": audit}))
        self.show("datasets.html", who, {"namespaces": sorted(who.namespaces() or []), "audit": audit})


def dataset_audit(store, limit: int = 50) -> list[dict]:
    """The latest dataset changes, newest first (``dataset`` events, or tree-trail events naming a
    dataset): when, who, what."""
    store.flush_events()
    q = (select(EventRow).where(EventRow.type.in_(("dataset", "datasets", "tree")))
         .order_by(EventRow.id.desc()).limit(limit * 4))
    out = []
    for e in store.session.scalars(q):
        details = e.details or {}
        if e.type == "tree" and not details.get("dataset"):
            continue
        out.append({"time": e.time, "message": e.message, "by": details.get("by"),
                    "changes": details.get("changes") or []})
    return out[:limit]


class TreePage(PageHandler):
    page = "tree"

    @web.authenticated
    async def get(self):
        who = await self.who()
        await self.forbid_unless_admin(who)
        c = self.controller
        self.show("tree.html", who, {
            "tree": c.store.setting("tree") or c.tree_manifest,
            "quota": {name: {k: format_list(v[k]) for k in ("min", "max", "used")}
                      for name, v in c.engine.quota.report().items()},
            "tenants": [{"group": t.group, "namespace": t.namespace, "leaf": t.leaf, "usable": t.usable}
                        for t in c.tenants],
            "audit": audit_trail(c.store),
        })


class TenantsPage(PageHandler):
    page = "tenants"

    @web.authenticated
    async def get(self):
        who = await self.who()
        await self.forbid_unless_admin(who)
        c = self.controller
        tenants = [tenant_view(c, t) for t in c.tenants]
        try:
            provider = unmapped(await self.settings["hub"].users())
        except HubError as err:  # the page still shows the teams
            provider = {"groups": [], "claimMissing": [], "unread": f"The hub's users could not be read: {err}"}
        self.show("tenants.html", who, {"tenants": tenants}, tenants=tenants, provider=provider)


def page_routes(prefix: str) -> list:
    p = prefix if prefix.endswith("/") else prefix + "/"
    return [
        (p, ClusterPage),
        (p + "nodes", NodesPage),
        (p + "jobs", JobsPage),
        (p + r"jobs/([0-9a-f]+)", JobPage),
        (p + "quota", QuotaPage),
        (p + "datasets", DatasetsPage),
        (p + "tree", TreePage),
        (p + "tenants", TenantsPage),
    ]
