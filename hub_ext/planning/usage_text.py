"""What ``tenancy usage`` prints: a table, JSON lines, or CSV of the service's usage report."""

from __future__ import annotations

import csv
import io
import json

from .table import duration, percent, resource_hours
from .usage import csv_rows


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(f"{str(c):<{w}}" for c, w in zip(r, widths)).rstrip() for r in rows)


def render(report: dict, how: str = "table") -> str:
    if how == "json":
        lines = [json.dumps({"scope": "team", "by": report["by"], **t}) for t in report["teams"]]
        return "\n".join([*lines, json.dumps({"scope": "cluster", **report["cluster"]})])
    if how == "csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(csv_rows(report))
        return out.getvalue().rstrip("\n")
    rows = [[report["by"].upper(), "USED", "BORROWED", "LENT", "BELOW MIN", "WAIT P50", "WAIT P95", "EVICTED",
             "CAUSED", "NEVER STARTED"]]
    for t in report["teams"]:
        rows.append([t["name"], resource_hours(t["used_hours"]), resource_hours(t["borrowed_hours"]),
                     resource_hours(t["lent_hours"]), duration(t["below_guarantee_s"]), duration(t["wait_p50_s"]),
                     duration(t["wait_p95_s"]), t["evictions_suffered"], t["evictions_caused"], t["never_started"]])
    cluster = report["cluster"]
    util = percent(cluster["utilisation"])
    return _table(rows) + f"\n\ncluster: utilisation {util}; idle {resource_hours(cluster['idle_hours'])}"
