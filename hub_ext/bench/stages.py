"""Where a pod's time goes in the cluster benchmark: the moments each pod reached, per stage
the wait from the stage before, and a per-second timeline with how busy each core was.

Moments are wall-clock seconds (``time.time()``: the client, the service and the watch all run on
this machine), per pod keyed ``namespace/job name``. Where they come from:

- ``submitted``, ``answered``: the client, as it sent a ``POST .../workloads`` and as the reply came;
- ``admitted``: the service, the start of the pass that admitted the pod (the workload's
  ``pods[].startedAt`` read through its API after the run);
- ``create queued``, ``create slot``, ``create sent``, ``Job created``: the service's
  ``KubernetesBackend.stage_log`` (its create task began, got one of ``create_concurrency``
  slots, a worker thread began the call, the API server answered); on the plain side the
  client's own ``create sent`` and ``Job created``;
- ``pod created``, ``pod bound``, ``Running``: when the benchmark's watch of the pods first saw the
  pod, first saw it with a node, first saw it Running (the watch's own delay included: the
  objects' timestamps are whole seconds).
"""

from __future__ import annotations

import math
from collections import Counter

PLAIN = ("create sent", "Job created", "pod created", "pod bound", "Running")
SERVICE = ("submitted", "admitted", "create queued", "create slot", "create sent", "Job created", "pod created",
           "pod bound", "Running")
#: moments shown on the timeline that are not links of the chain (the reply comes after the pass)
SIDE = ("answered",)
_SHORT = {"submitted": "submit", "answered": "answer", "admitted": "admit", "create queued": "queued",
          "create slot": "slot", "create sent": "sent", "Job created": "job", "pod created": "pod",
          "pod bound": "bound", "Running": "run"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def stage_figures(moments: dict[str, dict[str, float]], chain: tuple[str, ...]) -> dict:
    """Per stage of ``chain`` after the first: the wait from the stage before it, over the pods that
    have both moments: ``{"from", "pods", "p50_ms", "p95_ms", "max_ms"}``."""
    out = {}
    for before, stage in zip(chain, chain[1:]):
        waits = [m[stage] - m[before] for m in moments.values() if stage in m and before in m]
        out[stage] = {"from": before, "pods": len(waits)}
        if waits:
            out[stage].update(p50_ms=round(pct(waits, 0.5) * 1e3, 1), p95_ms=round(pct(waits, 0.95) * 1e3, 1),
                              max_ms=round(max(waits) * 1e3, 1))
    return out


def timeline(moments: dict[str, dict[str, float]], stages: tuple[str, ...], start: float,
             cores: list[tuple[float, dict[str, float]]] = ()) -> list[dict]:
    """Per second from ``start``: how many pods reached each of ``stages`` in it, and how busy each core
    was (``cores``: ``CoreSampler`` samples, each the second that ended at its time)."""
    entered: dict[int, Counter] = {}
    for m in moments.values():
        for stage in stages:
            if stage in m:
                entered.setdefault(int(max(0.0, m[stage] - start)), Counter())[stage] += 1
    busy: dict[int, dict[str, float]] = {}
    for end, sample in cores:
        second = math.floor(end - start - 0.5)  # the second its middle falls in
        if second >= 0:
            busy[second] = sample
    last = max([*entered, *busy], default=-1)
    last = min(last, max(entered, default=-1))  # up to the last pod's last moment
    return [{"t": s, "entered": {st: entered.get(s, {}).get(st, 0) for st in stages if entered.get(s, {}).get(st)},
             "cores": busy.get(s, {})} for s in range(last + 1)]


def figures(moments: dict[str, dict[str, float]], chain: tuple[str, ...], start: float, cores=()) -> dict:
    """What a side's result gains: ``stages`` (``stage_figures``) and ``timeline``."""
    shown = chain + tuple(s for s in SIDE if any(s in m for m in moments.values()))
    return {"stages": stage_figures(moments, chain), "timeline": timeline(moments, shown, start, cores)}


def lines(title: str, side: dict) -> list[str]:
    """The stage table and the timeline of one side's result, as text."""
    stages, rows = side.get("stages") or {}, side.get("timeline") or []
    if not stages:
        return []
    out = [f"  {title}: per stage, the wait from the stage before (p50 / p95 / max ms, pods)"]
    for stage, f in stages.items():
        if f["pods"]:
            out.append(f"    {f['from']:>13} -> {stage:<13} {f['p50_ms']:>8} {f['p95_ms']:>8} {f['max_ms']:>8}  ({f['pods']})")
        else:
            out.append(f"    {f['from']:>13} -> {stage:<13} (not recorded)")
    shown = [s for s in _SHORT if any(s in r["entered"] for r in rows)]
    cores = sorted({c for r in rows for c in r["cores"]}, key=lambda c: int(c[3:]) if c[3:].isdigit() else 0)
    out.append("    timeline, s: pods reaching " + " ".join(f"{_SHORT[s]:>6}" for s in shown) +
               ("  | busy % " + " ".join(f"{c:>5}" for c in cores) if cores else ""))
    for r in rows:
        out.append(f"    {r['t']:>11}:               " + " ".join(f"{r['entered'].get(s, 0):>6}" for s in shown) +
                   ("  |        " + " ".join(f"{round(r['cores'][c] * 100) if c in r['cores'] else '':>5}" for c in cores)
                    if cores else ""))
    return out
