"""Issue 9's examples through the local backend of the real demo hub: real processes are
started, SIGTERMed and queued again as the engine decides (the demo tree: root 40 CPUs,
root.a and root.b guarantee 20, leaves guarantee 10 and may use 20)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from demo_hub import API, leaf_used, svc, token
from waiting import wait_for


#: the demo's idle culler stops a notebook idle this long (seconds); no other test here starts one
IDLE_TIMEOUT = 15


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("v2-hub", env={"TENANCY_IDLE_TIMEOUT_SECONDS": str(IDLE_TIMEOUT)}) as h:
        yield h


def submit(hub, user, cpu, **extra):
    status, wl = svc(hub, user, "POST", "/workloads", {"command": ["sleep", "600"],
                                                      "resources": {"requests": {"cpu": str(cpu)}}, **extra})
    assert status == 201, wl
    return wl["id"]


def get(hub, user, wid):
    return svc(hub, user, "GET", f"/workloads/{wid}")[1]


def running(hub, user, wid):
    return [p for p in get(hub, user, wid)["pods"] if p["phase"] == "Running"]


def cancel(hub, user, *ids):
    for wid in ids:
        svc(hub, user, "DELETE", f"/workloads/{wid}")


def test_a_large_borrower_gives_the_lenders_guarantee_back(hub):
    fill = [submit(hub, "carol", 10), submit(hub, "dave", 10)]  # root.b within its guarantee
    big = submit(hub, "bob", 15)  # root.a.2 borrows 5 above its 10
    first = submit(hub, "alice", 5)
    wait_for(lambda: all(get(hub, u, w)["state"] == "Running" for u, w in
                         (("carol", fill[0]), ("dave", fill[1]), ("bob", big), ("alice", first))), "the root to fill")
    second = submit(hub, "alice", 5)  # root.a.1 would be at 10: within its guarantee; the root is full
    wait_for(lambda: get(hub, "alice", second)["state"] == "Running", "alice's second job to start", timeout=60)
    bob = get(hub, "bob", big)
    assert bob["state"] == "Pending" and not running(hub, "bob", big)
    assert any(e["type"] == "reclaimed" for e in bob["events"]), bob["events"]
    assert leaf_used(hub, "root.a.1") == "10" and leaf_used(hub, "root.a.2") == "0"
    cancel(hub, "alice", first, second)
    cancel(hub, "bob", big)
    cancel(hub, "carol", fill[0])
    cancel(hub, "dave", fill[1])


def test_a_gang_waits_whole_and_starts_whole(hub):
    blocker = submit(hub, "alice", 10)
    gang = submit(hub, "alice", 4, replicas=4)  # 16 more: over root.a.1's max of 20 until the blocker goes
    wl = get(hub, "alice", gang)
    assert wl["gang"] and wl["state"] == "Pending" and not running(hub, "alice", gang)
    assert "needs 4 pods of cpu=4" in wl["message"] and wl["position"] == wl["pods"][0]["position"]
    assert all(p["position"] == wl["position"] for p in wl["pods"])  # one place in the queue for the gang
    cancel(hub, "alice", blocker)
    wait_for(lambda: len(running(hub, "alice", gang)) == 4, "the gang to start, all four")
    cancel(hub, "alice", gang)


def test_no_gang_from_the_command_line_starts_what_fits(hub):
    blocker = submit(hub, "alice", 10)
    env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, "alice")}
    out = subprocess.run([sys.executable, "-m", "hub_ext.cli", "submit", "--cpu", "4", "--replicas", "4", "--no-gang", "--", "sleep", "600"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    wid = out.stdout.split("(")[1].split(")")[0]
    wait_for(lambda: len(running(hub, "alice", wid)) == 2, "two of the four to start")
    assert not get(hub, "alice", wid)["gang"]
    cancel(hub, "alice", blocker, wid)


def test_an_idle_notebook_is_culled_and_its_room_goes_to_the_queue_at_once(hub):
    """The demo runs jupyterhub-idle-culler: alice's idle Large notebook is stopped after the
    timeout, and her job waiting for that room (her leaf at its max, no preemption among equals)
    starts right after, not at some later check."""
    wait_for(lambda: leaf_used(hub, "root.a.1") == "0", "root.a.1 to be empty")
    low = {"priorityClassName": "low-priority-dev"}
    first = submit(hub, "alice", 10, **low)
    wait_for(lambda: get(hub, "alice", first)["state"] == "Running", "alice's first job to run")
    status, body = hub.start_server("alice", "idle", {"profile": "large"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", "idle")
    queued = submit(hub, "alice", 5, **low)  # root.a.1 is at its max of 20 with the notebook
    wl = wait_for(lambda: (w := get(hub, "alice", queued))["state"] == "Pending" and w.get("message") and w,
                  "alice's second job to wait")
    assert "root.a.1" in wl["message"], wl
    assert hub.server_model("alice", "idle"), "the notebook was culled before the job queued; raise IDLE_TIMEOUT"

    wait_for(lambda: hub.server_model("alice", "idle") is None, "the idle culler to stop alice's notebook",
             timeout=IDLE_TIMEOUT * 4)
    wl = wait_for(lambda: (w := get(hub, "alice", queued))["state"] == "Running" and w,
                  "alice's waiting job to start", timeout=10)
    status, body = svc(hub, "alice", "GET", "/workloads?kind=notebook&mine=true")
    assert status == 200, body
    notebook = next(w for w in body["workloads"] if w["serverName"] == "idle")
    started = next(e["time"] for e in wl["events"] if e["type"] == "started")
    # at once: when the stop released the notebook's room (the spawner tells the service), not when
    # the service's own check of the hub's servers would notice (servers_grace_seconds: 10 s at least)
    assert notebook["finished"] and 0 <= started - notebook["finished"] < 5, (notebook, wl["events"])
    cancel(hub, "alice", first, queued)
