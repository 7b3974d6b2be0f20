"""Submitting through the service's REST API as its users do (``POST .../api/v1/workloads`` with a
user's hub token), each request timed.

The requests go over kept-alive connections, as they reach the service through the hub's proxy
(configurable-http-proxy keeps its connections to a service open). A new TCP connection per
request (tornado's ``simple_httpclient`` opens one each time) cost a tornado server with a trivial
handler about 0.2 ms of CPU a request more, measured alone; in the cluster benchmark the
difference was within the spread between rounds (issue 24)."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from .hubproc import API
from .kube import BenchError


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def training(name: str, cpu: str, memory: str) -> dict:
    return {"kind": "training", "name": name, "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}


async def submit_all(base_url: str, jobs: list[tuple[str, str, dict]], *, per_user: int = 2) -> dict:
    """``jobs``: (user's token, namespace, body), submitted in order by ``per_user`` connections per user.

    Returns {"latencies": [s, ...], "ids": [...], "states": [the state each answer gave, ...], "started":
    monotonic time of the first request, "moments": {workload id: {"submitted", "answered": wall-clock}}}."""
    by_token: dict[str, list] = {}
    for job in jobs:
        by_token.setdefault(job[0], []).append(job)
    latencies: list[float] = []
    ids: list[str] = []
    states: list[str] = []
    moments: dict[str, dict[str, float]] = {}  # workload id -> its submit's wall-clock moments (stages.py)

    async def worker(session: aiohttp.ClientSession, queue: list) -> None:
        while queue:
            token, namespace, body = queue.pop(0)
            headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
            t, sent = time.perf_counter(), time.time()
            async with session.post(f"{base_url}{API}/workloads", data=json.dumps({**body, "namespace": namespace}),
                                    headers=headers) as resp:
                text = await resp.text(errors="replace")
            if resp.status >= 400:
                raise BenchError(f"a submit was refused ({resp.status}): {text}")
            latencies.append(time.perf_counter() - t)
            answer = json.loads(text)
            ids.append(answer["id"])
            states.append(answer.get("state"))
            moments[answer["id"]] = {"submitted": sent, "answered": time.time()}

    workers = [queue for queue in by_token.values() for _ in range(per_user)]
    # one connection per worker, kept open between its requests (limit=0: no pool-wide cap)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        started = time.monotonic()
        await asyncio.gather(*(worker(session, queue) for queue in workers))
    return {"latencies": latencies, "ids": ids, "states": states, "started": started, "moments": moments}


def latency_figures(latencies: list[float]) -> dict:
    return {"submit_p50_ms": round(pct(latencies, 0.50) * 1e3, 1), "submit_p99_ms": round(pct(latencies, 0.99) * 1e3, 1),
            "submits": len(latencies)}
