"""Readable tables for ``tenancy simulate`` without ``--json``."""

from __future__ import annotations

from collections import Counter

PHASES = ("Running", "Pending", "Terminating", "Rejected", "Evicted", "Succeeded")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip()] + [fmt.format(*map(str, r)).rstrip() for r in rows]


def _resources(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "-"


def render_step(report: dict) -> str:
    title = f"step {report['step']}: {report['action']}" + (f"  ({report['name']})" if report.get("name") else "")
    lines = [title, f"  t={report['time']:g}s"]
    counts = Counter((p["namespace"], p["phase"]) for p in report["pods"])
    namespaces = sorted({ns for ns, _ in counts})
    shown = [ph for ph in PHASES if any(counts[(ns, ph)] for ns in namespaces)] or ["Running", "Pending"]
    if namespaces:
        rows = [[ns] + [counts[(ns, ph)] for ph in shown] for ns in namespaces]
        lines += ["  " + line for line in _table(["NAMESPACE", *[p.upper() for p in shown]], rows)]
    if report["quota"]:
        rows = [[n, _resources(q["used"]), _resources(q["min"]), _resources(q["max"])] for n, q in report["quota"].items()]
        lines += [""] + ["  " + line for line in _table(["QUOTA NODE", "USED", "MIN", "MAX"], rows)]
    if report.get("datasets"):
        states = [f"{name} ({', '.join(f'{ns} {state}' for ns, state in by_ns.items()) or 'no namespace'})"
                  for name, by_ns in report["datasets"].items()]
        lines.append("  datasets: " + "; ".join(states))
    for ev in report["evictions"]:
        lines.append(f"  evicted {ev['namespace']}/{ev['name']}: {ev['message']}")
    waiting = Counter((p["namespace"], p["phase"], p["message"]) for p in report["pods"]
                      if p["phase"] in ("Pending", "Rejected") and p["message"])
    for (ns, phase, message), n in sorted(waiting.items()):
        lines.append(f"  {n} {phase.lower()} in {ns}: {message}")
    for warning in report["warnings"]:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)
