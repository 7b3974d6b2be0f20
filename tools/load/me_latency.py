"""How fast a quiet user's ``/me`` answers while another user floods the scheduler service.

    .venv/bin/python tools/load/me_latency.py [--requests 3000] [--concurrency 16] [--json]

starts the demo hub (real JupyterHub, configurable-http-proxy and tenancy service, on random
ports on 127.0.0.1), logs the demo users in, and then, all through the proxy as a browser
or a notebook would: ``bob`` floods with ``--requests`` requests from ``--concurrency``
connections (listings, ``/me``, and submissions that the per-user cap turns into 429s),
while ``alice`` asks for her ``/me`` one request at a time. It prints alice's p50/p99
latency, the flood's rate and every status seen. A benchmark, not a test: nothing here
passes or fails on time (tests/hub/test_load.py runs a small one and checks the answers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "tests" / "hub"))
sys.path.insert(0, str(HERE.parents[2] / "tests"))

API = "/services/tenancy/api/v1"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def measure(base_url: str, quiet_token: str, flood_token: str, *, requests: int = 3000,
                  concurrency: int = 16) -> dict:
    """Flood as one user while timing the other's ``/me``; the figures as a dict (milliseconds)."""
    statuses: Counter = Counter()
    quiet: list[float] = []
    flood_headers = {"Authorization": f"token {flood_token}"}
    job = {"command": ["true"], "resources": {"requests": {"cpu": "15", "memory": "30Gi"}}}  # waits: memory over max
    left = iter(range(requests))

    async def flooder(session):
        for i in left:
            kind = i % 10
            if kind < 5:
                req = session.get(f"{base_url}{API}/workloads?limit=100", headers=flood_headers)
            elif kind < 8:
                req = session.get(f"{base_url}{API}/me", headers=flood_headers)
            else:
                req = session.post(f"{base_url}{API}/workloads", headers=flood_headers, json=job)
            async with req as r:
                await r.read()
                statuses[f"flood {r.status}"] += 1

    async def quiet_user():
        headers = {"Authorization": f"token {quiet_token}"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            while not done.is_set():
                started = time.perf_counter()
                async with session.get(f"{base_url}{API}/me", headers=headers) as r:
                    await r.read()
                    statuses[f"quiet {r.status}"] += 1
                quiet.append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(0.01)

    # The quiet user is another person on another machine: her requests and her clock run on a
    # loop of their own, so that reading the flood's answers here does not delay her timings.
    done = threading.Event()
    watcher = threading.Thread(target=asyncio.run, args=(quiet_user(),), name="quiet-user")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        watcher.start()
        started = time.perf_counter()
        await asyncio.gather(*(flooder(session) for _ in range(concurrency)))
        took = time.perf_counter() - started
        done.set()
        await asyncio.to_thread(watcher.join)
    return {"flood_requests": requests, "concurrency": concurrency, "flood_seconds": round(took, 2),
            "flood_rate_per_s": round(requests / took, 1), "quiet_samples": len(quiet),
            "quiet_me_p50_ms": round(_pct(quiet, 0.50), 1), "quiet_me_p99_ms": round(_pct(quiet, 0.99), 1),
            "quiet_me_mean_ms": round(statistics.fmean(quiet), 1) if quiet else None,
            "statuses": dict(sorted(statuses.items()))}


def main(argv=None) -> int:
    from demo_hub import demo_hub, token, wait_serving
    from harness import install_chp

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        hub = demo_hub(install_chp(), Path(work))
        try:
            hub.start()
            wait_serving(hub)
            figures = asyncio.run(measure(hub.url("").rstrip("/"), token(hub, "alice"), token(hub, "bob"),
                                          requests=args.requests, concurrency=args.concurrency))
        finally:
            hub.stop()
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
