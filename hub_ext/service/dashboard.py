"""A small live page under the service prefix: the quota tree, the queue with reasons, recent evictions.

People reach it through the hub (OAuth login); it shows what the API shows,
refreshed every few seconds, so a demo can be watched without a tool.
"""

from __future__ import annotations

import html
import time

from jupyterhub.services.auth import HubOAuthenticated
from tornado import web

from .handlers import identity_of

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}.bar{background:#e6eef8;position:relative;height:1.1em;min-width:12em}
.bar span{position:absolute;top:0;bottom:0;left:0;background:#4a90d9}.bar i{position:absolute;top:0;bottom:0;border-left:2px solid #d9534f}
.Pending{color:#b36b00}.Running{color:#2b7a2b}.Preempted,.Failed,.Rejected{color:#b52b27}small{color:#666}
"""


def _bar(used: int, low: int, high: int | None) -> str:
    top = max(high or 0, used, low, 1)
    mark = f'<i style="left:{100 * low / top:.1f}%" title="guaranteed"></i>' if low else ""
    return f'<div class="bar"><span style="width:{100 * used / top:.1f}%"></span>{mark}</div>'


class DashboardHandler(HubOAuthenticated, web.RequestHandler):
    @web.authenticated
    async def get(self):
        # Anyone the hub lets through OAuth may look (the page shows only their teams'
        # workloads); who is admin comes from the hub, as for the API.
        user = self.current_user
        c = self.settings["controller"]
        who = await identity_of(c, self.settings["hub"], user)
        mine = who.namespaces()
        rows = []
        for name, values in c.engine.quota.report().items():
            node = c.engine.quota.nodes[name]
            for res in sorted(node.managed):
                used, low, high = values["used"].get(res, 0), node.min.get(res, 0), node.max.get(res)
                fmt = lambda v: "-" if v is None else (f"{v / 1000:g}" if not res.endswith("memory") else f"{v / 1000 / 2**30:g}Gi")  # noqa: E731
                rows.append(f"<tr><td>{'&nbsp;' * 2 * (name.count('.'))}{html.escape(name)}</td><td>{html.escape(res)}</td>"
                            f"<td>{fmt(used)}</td><td>{fmt(low)}</td><td>{fmt(high)}</td><td>{_bar(used, low, high)}</td></tr>")
        workloads = []
        for row in c.store.workloads(user=user.get("name"), namespaces=mine, limit=40):
            view = c.view(row)
            why = view.get("message") or ""
            if view.get("position"):
                why += f" <small>(position {view['position']}, {view['leafPosition']} in its team)</small>"
            workloads.append(f"<tr><td>{html.escape(row.namespace)}</td><td>{html.escape(row.name)}</td><td>{row.kind}</td>"
                             f"<td>{html.escape(view.get('priorityClassName') or '')}</td>"
                             f"<td class=\"{row.state}\">{row.state}</td><td>{why if '<small>' in why else html.escape(why)}</td></tr>")
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(f"""<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="3">
<title>Quotas and queue</title><style>{_STYLE}</style></head><body>
<h1>Quotas and queue</h1><p><small>{html.escape(user.get('name', ''))} · {time.strftime('%H:%M:%S')} ·
<a href="api/v1/openapi.json">API</a> · <a href="metrics">metrics</a></small></p>
{''.join(f'<p><b>warning:</b> {html.escape(w)}</p>' for w in c.engine.warnings)}
<h2>Quota tree</h2><table><tr><th>node</th><th>resource</th><th>used</th><th>guaranteed (min)</th><th>ceiling (max)</th><th></th></tr>
{''.join(rows) or '<tr><td colspan=6>no quota tree: every namespace is its own leaf</td></tr>'}</table>
<h2>Workloads</h2><table><tr><th>namespace</th><th>name</th><th>kind</th><th>priority class</th><th>state</th><th>why</th></tr>
{''.join(workloads) or '<tr><td colspan=6>none yet</td></tr>'}</table></body></html>""")
