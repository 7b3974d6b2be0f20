"""The quota widget's HTML: the team's quota path with bars, and my jobs. Pure (tested without a kernel).

Everything a user or an admin typed (names, messages) is escaped.
"""

from __future__ import annotations

import html
import time

from ..apiclient import FINAL
from ..quota_view import current_tenant, quota_path
from ..vocabulary import bar_text, duration, position, state_word, when


def _bar(bar: dict) -> str:
    scale = max(bar["max"] or 0, bar["used"], bar["min"]) or 1

    def pct(v):
        return f"{min(100.0, v / scale * 100):.1f}%"

    within = min(bar["used"], bar["min"])
    borrowed = (f'<div style="position:absolute;left:{pct(bar["min"])};width:{pct(bar["borrowed"])};top:0;bottom:0;'
                'background:repeating-linear-gradient(45deg,#f57c00,#f57c00 4px,#ffb74d 4px,#ffb74d 8px)"></div>'
                if bar["borrowed"] > 0 else "")
    return (f'<div class="tenancy-bar" data-resource="{html.escape(bar["resource"])}" style="margin:2px 0 4px 8px">'
            f'<div style="font-size:90%">{html.escape(bar_text(bar))}</div>'
            '<div style="position:relative;height:10px;background:#e0e0e0;border-radius:2px;max-width:420px">'
            f'<div style="position:absolute;left:0;width:{pct(within)};top:0;bottom:0;background:#1976d2"></div>'
            f'{borrowed}<div style="position:absolute;left:{pct(bar["min"])};width:2px;top:-3px;bottom:-3px;'
            'background:#000" title="guarantee"></div></div></div>')


def _job_row(w: dict, now: float) -> str:
    starts = [p["startedAt"] for p in w.get("pods") or [] if p.get("startedAt")]
    start = min(starts) if starts else None
    if start is None:
        started = f"waiting {duration(now - w['created'])}" if w["state"] == "Pending" else ""
    else:
        end = (w.get("finished") or now) if w["state"] in FINAL else now
        started = f"{when(start, now)}, {duration(end - start)}"
    why = w.get("message") or "" if w["state"] not in ("Running", "Succeeded") else ""
    if position(w):
        why += f" ({position(w)})"
    cells = [w["name"], w["kind"], state_word(w["state"], w.get("reason")), why, started]
    return "<tr>" + "".join(f'<td style="padding:2px 8px 2px 0;text-align:left">{html.escape(str(c))}</td>'
                            for c in cells) + "</tr>"


def quota_html(me: dict | None, tree: dict | None, *, error: str = "", now: float | None = None,
               team: str | None = None) -> str:
    """The widget's whole content; ``error`` (a sentence) when the service cannot be reached."""
    now = time.time() if now is None else now
    if error and me is None:
        return f'<div class="tenancy-quota"><p style="color:#b71c1c">{html.escape(error)}</p></div>'
    tenant = current_tenant((me or {}).get("tenants") or [], team)
    parts = ['<div class="tenancy-quota" style="font-family:var(--jp-ui-font-family,sans-serif)">']
    if error:
        parts.append(f'<p style="color:#b71c1c">{html.escape(error)}</p>')
    if tenant is None:
        parts.append("<p>You are in no team yet: ask an admin to add you to one.</p></div>")
        return "".join(parts)
    parts.append(f'<b>Team {html.escape(tenant["group"])}</b> (namespace {html.escape(tenant["namespace"])})')
    for i, node in enumerate(quota_path((tree or {}).get("tree"), (tree or {}).get("quota") or {}, tenant.get("quotaLeaf"))):
        label = f"{node['name']} (your team)" if i == 0 else node["name"]
        parts.append(f'<div class="tenancy-node" style="margin-top:6px"><b>{html.escape(label)}</b>'
                     + "".join(_bar(b) for b in node["resources"]) + "</div>")
    mine = [w for w in (me or {}).get("workloads") or [] if w.get("user") == (me or {}).get("name")]
    active = [w for w in mine if w["state"] not in FINAL]
    recent = [w for w in mine if w["state"] in FINAL][:5]
    parts.append('<div style="margin-top:8px"><b>My notebooks and jobs</b></div>')
    if active or recent:
        parts.append('<table class="tenancy-jobs" style="border-collapse:collapse">'
                     + "".join(_job_row(w, now) for w in active + recent) + "</table>")
    else:
        parts.append("<p>Nothing yet.</p>")
    parts.append("</div>")
    return "".join(parts)
