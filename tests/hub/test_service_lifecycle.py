"""The tenancy service's life with a real hub: it goes when its hub goes, exactly one runs after
a hub restart, and a bad row does not stop it. Each test has a hub of its own (the demo's
configuration on random ports: JupyterHub, configurable-http-proxy, the managed service).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from demo_hub import service_answers, svc
from harness import proc_alive
from waiting import wait_for

ROOT = Path(os.environ.get("TENANCY_TEST_ROOT", Path(__file__).resolve().parents[2]))


@pytest.fixture
def hub(hub_factory):
    with hub_factory("lifecycle-hub", root=ROOT) as h:  # TENANCY_TEST_ROOT: an older tree's demo and code
        yield h


def service_pids(hub) -> list[int]:
    """Every live tenancy service process of this hub (old or new)."""
    return sorted(pid for pid, cmd in hub.process_cmdlines().items()
                  if "serve" in cmd and any(part.endswith("tenancy_config.py") for part in cmd))


def kill_hub(hub) -> None:
    """``kill -9`` of the hub process alone: its proxy and its managed service live on."""
    os.kill(hub.proc.pid, signal.SIGKILL)
    hub.proc.wait(10)


def test_the_service_exits_soon_after_its_hub_is_killed(hub):
    [pid] = service_pids(hub)
    kill_hub(hub)
    started = time.monotonic()
    wait_for(lambda: not proc_alive(pid), "the orphaned service to exit", timeout=30)
    assert time.monotonic() - started < 10  # the parent watch checks every second
    assert "has exited: the tenancy service exits" in hub.log_path.read_text(errors="replace")


def test_a_hub_killed_and_started_again_runs_exactly_one_service_that_answers(hub):
    assert svc(hub, "alice", "GET", "/me")[0] == 200
    [old] = service_pids(hub)
    kill_hub(hub)
    hub.start()  # same ports, database and state: the new hub starts its own service
    wait_for(lambda: service_answers(hub), "the service after the hub restart", timeout=90)
    assert not proc_alive(old)
    [new] = service_pids(hub)
    assert new != old
    hub.tokens.clear()  # alice's token still works, but log in afresh as a user would
    status, me = svc(hub, "alice", "GET", "/me")
    assert status == 200 and me["name"] == "alice"
    time.sleep(5)  # no crash loop behind it: 5 s in which nothing may change, fixed on purpose
    assert service_pids(hub) == [new] and service_answers(hub)


def test_a_bad_row_is_quarantined_and_the_service_serves_the_others(hub):
    # jobs that wait for good (more GPUs than any node has: inadmissible), so that nothing runs behind the test's back
    body = {"command": ["sleep", "1"], "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "16"}}}
    good, bad = (svc(hub, "alice", "POST", "/workloads", {**body, "name": name})[1] for name in ("good", "bad"))
    assert good["state"] == bad["state"] == "Pending" and good["reason"] == "inadmissible", (good, bad)
    db = Path(hub.extra_env["TENANCY_DEMO_STATE"]) / "tenancy.sqlite"
    with sqlite3.connect(db) as conn:  # the row damaged behind the service's back
        conn.execute("UPDATE workloads SET spec = '{\"kind\": \"training\", oops' WHERE id = ?", (bad["id"],))
    [pid] = service_pids(hub)
    os.kill(pid, signal.SIGKILL)  # the hub starts it again; it reads the database at start
    wait_for(lambda: service_pids(hub) not in ([], [pid]) and service_answers(hub), "the service to come back", timeout=90)
    status, got = svc(hub, "alice", "GET", f"/workloads/{good['id']}")
    assert status == 200 and (got["state"], got["reason"], got["message"]) == ("Pending", "inadmissible", good["message"])
    assert svc(hub, "alice", "GET", f"/workloads/{bad['id']}")[0] == 404
    listed = [w["id"] for w in svc(hub, "alice", "GET", "/workloads")[1]["workloads"]]
    assert good["id"] in listed and bad["id"] not in listed
    log = hub.log_path.read_text(errors="replace")
    [line] = [line for line in log.splitlines() if f"workload {bad['id']} moved aside" in line]
    assert "not valid JSON" in line and "table quarantine" in line
    with sqlite3.connect(db) as conn:
        kept = conn.execute("SELECT row_id, data FROM quarantine").fetchall()
    assert [r[0] for r in kept] == [bad["id"]] and "oops" in kept[0][1]
    svc(hub, "alice", "DELETE", f"/workloads/{good['id']}")
