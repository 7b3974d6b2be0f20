"""A small live page under the service prefix: the quota tree and the queue with reasons.

People reach it through the hub (OAuth login); it shows what the API shows,
refreshed every few seconds, so a demo can be watched without a tool. It is a
Jinja2 template with autoescape: names, messages and reasons are data, never markup.
"""

from __future__ import annotations

import os
import time

from jupyterhub.services.auth import HubOAuthenticated
from tornado import web

from ..quota.quantity import format_milli
from .handlers import identity_of
from .pages import render
from .security import PAGE_POLICY, SecureHeaders


def _pct(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def quota_rows(engine) -> list[dict]:
    """One row per tree node and resource it manages: used, min, max, and bar positions."""
    rows = []
    for name, values in engine.quota.report().items():
        node = engine.quota.nodes[name]
        for res in sorted(node.managed):
            used, low, high = values["used"].get(res, 0), node.min.get(res, 0), node.max.get(res)
            top = max(high or 0, used, low, 1)
            rows.append({"node": name, "depth": min(name.count("."), 4), "resource": res,
                         "used": format_milli(res, used), "min": format_milli(res, low),
                         "max": "-" if high is None else format_milli(res, high),
                         "used_pct": _pct(used, top), "min_pct": _pct(low, top) if low else None})
    return rows


class DashboardHandler(HubOAuthenticated, SecureHeaders):
    policy = PAGE_POLICY

    @web.authenticated
    async def get(self):
        # Anyone the hub lets through OAuth may look (the page shows only their teams'
        # workloads); who is admin comes from the hub, as for the API.
        user = self.current_user
        c = self.settings["controller"]
        who = await identity_of(c, self.settings["hub"], user)
        rows, _ = c.store.workloads(user=user.get("name"), namespaces=who.namespaces(), limit=40)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(render(
            "dashboard.html", user=user.get("name", ""), now=time.strftime("%H:%M:%S"),
            hub_home=os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/hub/home",
            warnings=list(c.engine.warnings), quota=quota_rows(c.engine), workloads=c.views(rows),
            static=self.static_url,
        ))
