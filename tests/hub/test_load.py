"""A bounded load on the real demo hub: one user floods the scheduler service while another
reads their ``/me``. The full run (tools/load/me_latency.py) gives the benchmark figures;
here a small one checks that every request is answered, none with a 5xx. (A module of its
own: Playwright's browser in test_trust.py holds an event loop this async test cannot share.)"""

from __future__ import annotations

import json
import sys

import pytest

from demo_hub import ROOT, svc, token


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("load-hub") as h:
        yield h


@pytest.mark.asyncio
async def test_a_flood_is_answered_and_a_quiet_user_still_served(hub):
    """A small run of tools/load/me_latency.py (its full run gives the benchmark figures)."""
    sys.path.insert(0, str(ROOT / "tools" / "load"))
    from me_latency import measure

    figures = await measure(hub.url("").rstrip("/"), token(hub, "alice"), token(hub, "bob"), requests=600, concurrency=8)
    print(json.dumps(figures))
    assert set(figures["statuses"]) <= {"flood 200", "flood 201", "flood 429", "quiet 200"}, figures["statuses"]
    assert figures["statuses"]["flood 429"] > 0 and figures["quiet_samples"] > 10
    status, body = svc(hub, "bob", "GET", "/workloads?state=Pending&mine=true&limit=500")
    for wl in body["workloads"]:
        svc(hub, "bob", "DELETE", f"/workloads/{wl['id']}")
