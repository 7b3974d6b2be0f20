"""Submitting through the service's REST API as its users do (``POST .../api/v1/workloads`` with a
user's hub token), each request timed."""

from __future__ import annotations

import asyncio
import json
import time

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

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
    client = AsyncHTTPClient(force_instance=True, max_clients=1000)
    by_token: dict[str, list] = {}
    for job in jobs:
        by_token.setdefault(job[0], []).append(job)
    latencies: list[float] = []
    ids: list[str] = []
    states: list[str] = []
    moments: dict[str, dict[str, float]] = {}  # workload id -> its submit's wall-clock moments (stages.py)

    async def worker(queue: list) -> None:
        while queue:
            token, namespace, body = queue.pop(0)
            req = HTTPRequest(f"{base_url}{API}/workloads", method="POST", body=json.dumps({**body, "namespace": namespace}),
                              headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
                              request_timeout=120)
            t, sent = time.perf_counter(), time.time()
            try:
                resp = await client.fetch(req)
            except HTTPClientError as err:
                detail = err.response.body.decode(errors="replace") if err.response is not None else ""
                raise BenchError(f"a submit was refused ({err.code}): {detail}") from None
            latencies.append(time.perf_counter() - t)
            answer = json.loads(resp.body)
            ids.append(answer["id"])
            states.append(answer.get("state"))
            moments[answer["id"]] = {"submitted": sent, "answered": time.time()}

    started = time.monotonic()
    try:
        await asyncio.gather(*(worker(queue) for queue in by_token.values() for _ in range(per_user)))
    finally:
        client.close()
    return {"latencies": latencies, "ids": ids, "states": states, "started": started, "moments": moments}


def latency_figures(latencies: list[float]) -> dict:
    return {"submit_p50_ms": round(pct(latencies, 0.50) * 1e3, 1), "submit_p99_ms": round(pct(latencies, 0.99) * 1e3, 1),
            "submits": len(latencies)}
