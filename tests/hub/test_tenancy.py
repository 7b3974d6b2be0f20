"""The demo hub, for real: JupyterHub + configurable-http-proxy + the tenancy service + real
single-user servers and training processes. Nothing is mocked.

One hub (the demo's configuration, on random ports) serves the whole module; the
tests run in order and build on each other like the demo's story: teams log in,
spawn, wait, get refused, submit training from a notebook that preempts a
borrowing team's notebook, and survive a restart of the service and of the hub.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo_hub import API, service_pid, svc, token
from kernel import run_code
from waiting import wait_for


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("tenancy-hub") as h:
        yield h


def read_sse(hub, path: str, tok: str, until, timeout: float = 30) -> list[dict]:
    """Read a server-sent event stream until ``until(event)`` holds; returns the events read."""
    import http.client
    from urllib.parse import urlparse

    url = urlparse(hub.url(path))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    conn.request("GET", url.path, headers={"Authorization": f"token {tok}", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()[:300]
    events, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            line = resp.readline().decode()
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if until(events[-1]):
                    return events
            elif not line:
                break
    finally:
        conn.close()
    raise AssertionError(f"the stream ended or timed out first: {events}")


def workloads(hub, user: str, **query) -> list[dict]:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    status, body = svc(hub, user, "GET", "/workloads" + (f"?{qs}" if qs else ""))
    assert status == 200, f"HTTP {status}: {body}; the hub's log (the service's with it):\n{hub.log_tail(80)}"
    return body["workloads"]


def notebook(hub, user: str, server: str = "") -> dict:
    return next(w for w in workloads(hub, user, kind="notebook") if (w["serverName"] or "") == server and w["user"] == user)


def spawn(hub, user: str, server: str = "", **options):
    status, body = hub.start_server(user, server, options, token=token(hub, user), check=False)
    assert status in (201, 202), body
    return status


def test_login_maps_identity_groups_to_tenants(hub):
    for user in ("alice", "bob", "carol", "dave", "erin", "admin"):
        token(hub, user)
    status, groups = hub.api("GET", "/groups")
    by_name = {g["name"]: g for g in (groups["items"] if isinstance(groups, dict) else groups)}
    assert by_name["team-a"]["users"] == ["alice", "erin"] or sorted(by_name["team-a"]["users"]) == ["alice", "erin"]
    assert by_name["team-a"]["properties"]["tenancy.quota-leaf"] == "root.a.1"
    assert "ds-alpha" not in by_name  # identity-provider names were mapped
    status, me = svc(hub, "erin", "GET", "/me")
    assert status == 200 and sorted(t["group"] for t in me["tenants"]) == ["team-a", "team-b"]
    [team_a] = [t for t in svc(hub, "alice", "GET", "/me")[1]["tenants"]]
    assert team_a["quota"]["min"] == {"cpu": "10", "memory": "10Gi", "nvidia.com/gpu": "1"}
    assert team_a["quota"]["max"]["cpu"] == "20"


def test_bad_group_properties_are_shown_to_admins_not_crashing(hub):
    status, _ = hub.api("POST", "/groups/team-x")
    assert status in (201, 409)
    # force=true: stored unchecked, as properties from load_groups or saved while the service was away are
    status, _ = hub.api("PUT", "/groups/team-x/properties?force=true",
                        {"tenancy.namespace": "team-b", "tenancy.quota-leaf": "root.zzz"})
    assert status == 200
    def broken():
        tenants = svc(hub, "admin", "GET", "/tenants")[1]["tenants"]
        return next((t for t in tenants if t["group"] == "team-x" and t["errors"]), None)
    bad = wait_for(broken, "team-x to be listed with its errors")
    assert "'root.zzz' is not a node of the quota tree" in bad["errors"][0]
    assert svc(hub, "alice", "GET", "/me")[0] == 200  # the service carries on
    hub.api("DELETE", "/groups/team-x")


def test_two_teams_spawn_real_servers(hub):
    assert spawn(hub, "alice", profile="large") in (201, 202)
    assert spawn(hub, "bob", profile="large") in (201, 202)
    for user in ("alice", "bob"):
        hub.wait_server_ready(user, timeout=90)
        r = hub.request("GET", hub.server_url(user) + "api/status", token=token(hub, user))
        assert r.status_code == 200, r.text
    assert notebook(hub, "alice")["state"] == "Running" and notebook(hub, "alice")["namespace"] == "team-a"
    assert notebook(hub, "bob")["priorityClassName"] == "low-priority-dev"


def test_a_user_in_two_teams_picks_one_at_spawn_time(hub):
    assert spawn(hub, "erin", profile="large", tenant="team-a") in (201, 202)
    hub.wait_server_ready("erin", timeout=90)
    nb = notebook(hub, "erin")
    assert (nb["tenant"], nb["namespace"]) == ("team-a", "team-a")  # root.a.1 now borrows 10 CPUs
    status, body = hub.start_server("erin", "other", {"tenant": "team-c"}, token=token(hub, "erin"), check=False)
    assert status >= 400 or "not a member" in str(body)


def test_a_notebook_waits_with_its_reason_and_position(hub):
    # team-a: alice 10 + erin 10 = its max of 20; a third server must wait for root.a.1.
    status = spawn(hub, "alice", "more", profile="small")
    assert status == 202
    wl = wait_for(lambda: next((w for w in workloads(hub, "alice", kind="notebook") if w["serverName"] == "more"), None),
                  "the queued notebook")
    assert wl["state"] == "Pending" and wl["reason"] == "quota-max"
    assert wl["message"] == "quota root.a.1 is at its max for cpu: needs 5, uses 20 of 20"
    assert wl["position"] == 1 and wl["leafPosition"] == 1
    model = hub.server_model("alice", "more")
    assert model["pending"] == "spawn" and not model["ready"]
    # the spawn page's progress stream (the spawner's progress()) says why, and where in the queue
    events = read_sse(hub, "/hub/api/users/alice/servers/more/progress", token(hub, "alice"),
                      until=lambda e: "Waiting for the scheduler" in e.get("message", ""))
    waiting = events[-1]["message"]
    assert waiting == ("Waiting for the scheduler: quota root.a.1 is at its max for cpu: needs 5, uses 20 of 20 "
                       "(position 1 in the queue, 1 in your team)"), events
    assert 0 < events[-1]["progress"] < 90
    hub.stop_server("alice", "more", timeout=30)
    assert wait_for(lambda: next(w for w in workloads(hub, "alice", kind="notebook") if w["serverName"] == "more")["state"] == "Stopped",
                    "the queued notebook to be removed")


def test_resource_quota_rejection_is_a_clear_spawn_error(hub):
    # team-d's ResourceQuota allows 15 CPUs; a 10-CPU job counts, so a 10-CPU notebook is refused.
    status, job = svc(hub, "dave", "POST", "/workloads", {"kind": "training", "command": ["sleep", "300"],
                                                         "resources": {"requests": {"cpu": "10"}}, "name": "d-job"})
    assert status == 201 and job["state"] in ("Running", "Pending")
    status, body = hub.start_server("dave", "", {"profile": "large"}, token=token(hub, "dave"), check=False)
    def failed():
        model = hub.server_model("dave")
        return model is None or not (model.get("pending") or model.get("ready"))
    wait_for(failed, "dave's spawn to fail")
    log = hub.log_tail(200)
    assert "Large: 10 CPU, 8 GiB does not fit in team team-d's namespace quota dev-quota" in log
    assert "exceeded quota: dev-quota, requested: requests.cpu=10, used: requests.cpu=10, limited: requests.cpu=15" in log
    assert "The Small: 5 CPU, 4 GiB profile would fit: choose it on the spawn page." in log  # 5 of 15 CPUs left
    assert "ask an admin to raise the quota" in log
    svc(hub, "dave", "DELETE", f"/workloads/{job['id']}")


def test_training_from_a_notebook_preempts_a_borrowing_notebook_only(hub):
    # carol's notebook (team-c, within its guarantee) fills the root: 10 + 10 + 10 + 10 = 40.
    spawn(hub, "carol", profile="large")
    hub.wait_server_ready("carol", timeout=90)
    out = run_code(hub, "carol", token(hub, "carol"), (
        "import os\n"
        "from hub_ext.client import submit_training, TenancyError\n"
        "try:\n    submit_training(['sleep', '300'], cpu=5, name='carol-train')\n"
        "except TenancyError as err:\n    print(err)\n"
        "job = submit_training(['sleep', '300'], cpu=5, name='carol-train', yes=True)\n"
        "print(job.id, job.data['priorityClassName'], os.environ['TENANCY_NAMESPACE'])\n"))
    asked, answer = out.strip().splitlines()
    # Told first whose work it would stop (another team's user's), and that at low priority it would wait.
    assert asked.startswith("This job would stop erin's notebook"), asked
    assert "--wait-instead (wait_instead=True) to submit it at low-priority-dev, where it stops nobody and it " \
           "would wait" in asked, asked
    job_id, pc, ns = answer.split()
    assert (pc, ns) == ("high-priority-research", "team-c")
    # team-c is beyond its guarantee with the job, so it may only take from teams that borrow
    # and run lower-priority work: erin's notebook in team-a (root.a.1 borrows 10), the most
    # recently admitted there. alice (team-a) and bob (team-b, within its guarantee) keep theirs.
    job = wait_for(lambda: (lambda w: w if w["state"] == "Running" else None)(svc(hub, "carol", "GET", f"/workloads/{job_id}")[1]),
                   "carol's training job to run", timeout=60)
    assert job["pods"][0]["phase"] == "Running"
    victim = notebook(hub, "erin")
    assert victim["state"] == "Preempted"
    status, detail = svc(hub, "erin", "GET", f"/workloads/{victim['id']}")
    kinds = [e["type"] for e in detail["events"]]
    assert "warning" in kinds and "preempted" in kinds
    preempted = next(e for e in detail["events"] if e["type"] == "preempted")
    assert "Preempted by team-c/carol-train" in preempted["message"]
    wait_for(lambda: hub.server_model("erin") is None, "erin's server to be stopped by the hub")
    for user in ("alice", "bob", "carol"):
        assert hub.server_model(user)["ready"], f"{user}'s server was touched"
    status, logs = svc(hub, "carol", "GET", f"/workloads/{job_id}/logs")
    assert status == 200


def test_the_preempted_user_is_told_who_and_when(hub):
    [notice] = svc(hub, "erin", "GET", "/me")[1]["notices"]
    assert notice["message"].startswith("Preempted by team-c/carol-train") and notice["preemptor"] == "team-c/carol-train-0"
    assert abs(notice["time"] - time.time()) < 300
    # the next spawn says it first (on the spawn page; here, in the hub's log of the spawn)
    spawn(hub, "erin", profile="small", tenant="team-a")
    hub.wait_server_ready("erin", timeout=60)
    assert "erin: Your previous server was stopped at" in hub.log_tail(400)
    hub.stop_server("erin", timeout=30)


def test_cell_magic_and_terminal_commands(hub):
    out = run_code(hub, "carol", token(hub, "carol"), (
        "%load_ext hub_ext.client\n"
        # a cell magic must open its cell; this is what `%%train ...` runs
        "get_ipython().run_cell_magic('train', '--cpu 1 --name magic-job --wait', \"print('hello from the magic')\")\n"
        # the magic's one output is its live status line (a display); the job is kept in train_job
        "print(train_job.name, train_job.state)\n"))
    assert out.split() == ["magic-job", "Succeeded"], out
    env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, "carol")}
    tenancy = [sys.executable, "-m", "hub_ext.cli"]
    jobs = subprocess.run(tenancy + ["jobs"], env=env, capture_output=True, text=True, timeout=60)
    assert jobs.returncode == 0 and "magic-job" in jobs.stdout and "carol-train" in jobs.stdout, jobs
    magic = next(line.split()[0] for line in jobs.stdout.splitlines() if "magic-job" in line)
    logs = subprocess.run(tenancy + ["logs", magic], env=env, capture_output=True, text=True, timeout=60)
    assert logs.stdout.strip() == "hello from the magic", logs
    sub = subprocess.run(tenancy + ["submit", "--cpu", "1", "--name", "term-job", "--", "sleep", "300"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0 and "term-job" in sub.stdout, sub
    term = sub.stdout.split("(")[1].split(")")[0]
    cancel = subprocess.run(tenancy + ["cancel", term], env=env, capture_output=True, text=True, timeout=60)
    assert cancel.returncode == 0 and ": cancelled" in cancel.stdout, cancel
    bad = subprocess.run(tenancy + ["submit", "--tenant", "team-a", "--", "true"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.strip() == "tenancy: error: carol is not a member of tenant team-a (HTTP 403)"


def test_users_act_only_in_their_teams_namespaces(hub):
    carol_job = next(w for w in workloads(hub, "carol", kind="training"))
    status, body = svc(hub, "alice", "GET", f"/workloads/{carol_job['id']}")
    assert status == 403 and "may not act on workloads in namespace team-c" in body["error"]
    status, body = svc(hub, "alice", "GET", "/workloads?namespace=team-c")
    assert status == 403
    status, body = svc(hub, "alice", "POST", "/workloads", {"command": ["true"], "tenant": "team-c"})
    assert status == 403 and body["error"] == "alice is not a member of tenant team-c"
    status, body = svc(hub, "alice", "DELETE", f"/workloads/{carol_job['id']}")
    assert status == 403
    status, body = svc(hub, "alice", "POST", "/workloads", {"command": ["true"], "priorityClassName": "critical-prod"})
    assert status == 403 and "may not use priority class critical-prod" in body["error"]
    weak = hub.token_for("alice", scopes=["access:services!service=tenancy"])
    status, body = svc(hub, "alice", "GET", "/me", tok=weak)
    assert status == 403 and "custom:tenancy:use" in body["error"]
    status, body = svc(hub, "alice", "POST", "/workloads", {"command": "not a list"})
    assert status == 400 and "command must be a non-empty list of strings" in body["error"]
    assert hub.request("GET", f"{API}/me").status_code == 403  # no token at all
    assert len(workloads(hub, "admin")) >= len(workloads(hub, "alice"))  # admins see everything


def test_admins_edit_the_tree_with_a_dry_run(hub):
    status, current = svc(hub, "admin", "GET", "/tree")
    assert status == 200 and current["quota"]["root"]["max"]["cpu"] == "40"
    tree = current["tree"]
    smaller = json.loads(json.dumps(tree))
    smaller["spec"]["root"]["children"][1]["children"][0]["max"]["cpu"] = 10  # root.b.1: 20 -> 10
    status, preview = svc(hub, "admin", "PUT", "/tree?dryRun=true", smaller)
    assert status == 200 and preview["dryRun"] is True
    assert preview["quota"]["root.b.1"]["max"]["cpu"] == "10"
    assert svc(hub, "admin", "GET", "/tree")[1]["quota"]["root.b.1"]["max"]["cpu"] == "20"  # nothing applied
    bad = json.loads(json.dumps(tree))
    bad["spec"]["root"]["children"][0]["min"]["cpu"] = 50
    status, body = svc(hub, "admin", "PUT", "/tree?dryRun=true", bad)
    assert status == 400 and body["error"] == "root.a: min cpu 50 exceeds max 40"
    status, body = svc(hub, "alice", "PUT", "/tree?dryRun=true", tree)
    assert status == 403 and "only admins" in body["error"]
    r = hub.request("PUT", f"{API}/tree", token=token(hub, "admin"), data="kind: [", headers={"Content-Type": "application/yaml"})
    assert r.status_code == 400 and "invalid YAML" in r.json()["error"]


def test_events_stream_workload_changes(hub):
    import threading

    submitted = {}
    threading.Timer(1.0, lambda: submitted.update(svc(hub, "carol", "POST", "/workloads", {
        "command": ["true"], "name": "evented", "resources": {"requests": {"cpu": "1"}}})[1])).start()
    events = read_sse(hub, f"{API}/events", token(hub, "carol"),
                      until=lambda e: bool(submitted) and e["workload"]["id"] == submitted["id"])
    assert events[-1]["workload"]["namespace"] == "team-c"
    assert all(e["workload"]["namespace"] == "team-c" or e["workload"]["user"] == "carol" for e in events)


def test_the_service_restarted_mid_queue_loses_nothing(hub):
    # The root has 5 CPUs left (alice 10, bob 10, carol 10 + 5): b0 runs, three queue behind it
    # (at low priority, so they do not preempt bob's own notebook).
    tok = token(hub, "bob")
    ids = []
    for i, cpu in enumerate(("5", "5", "5", "5")):
        status, job = svc(hub, "bob", "POST", "/workloads", {"command": ["sleep", "300"], "name": f"b{i}",
                                                             "priorityClassName": "low-priority-dev",
                                                             "resources": {"requests": {"cpu": cpu}}})
        assert status == 201, job
        ids.append(job["id"])
    # admitted on the service's next tick (within a second; longer on a loaded machine)
    before = wait_for(lambda: (lambda d: d if d[ids[0]]["state"] == "Running" and _pid_of(hub, d[ids[0]]) else None)(
        {j: svc(hub, "bob", "GET", f"/workloads/{j}")[1] for j in ids}), "b0 to run")
    assert [before[j]["state"] for j in ids] == ["Running", "Pending", "Pending", "Pending"]
    assert [before[j]["leafPosition"] for j in ids[1:]] == [1, 2, 3]
    running_pid = _pid_of(hub, before[ids[0]])
    assert running_pid is not None  # recorded as soon as the process started
    old = service_pid(hub)
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: _alive_service(hub, old), "the hub to restart the service", timeout=90)
    wait_for(lambda: svc(hub, "bob", "GET", f"/workloads/{ids[0]}", tok=tok)[0] == 200, "the API after restart")
    after = {j: svc(hub, "bob", "GET", f"/workloads/{j}")[1] for j in ids}
    for j in ids:
        assert after[j]["state"] == before[j]["state"]
        assert after[j]["position"] == before[j]["position"] and after[j]["leafPosition"] == before[j]["leafPosition"]
    assert _pid_of(hub, after[ids[0]]) == running_pid  # adopted, not started twice
    assert notebook(hub, "bob")["state"] == "Running"
    # The whole hub restarted. The harness ends every process it started, the training
    # processes too, as a machine restart would: b0 was lost, not failed, so it is queued
    # again in its place (first) and runs again; the others keep their order behind it.
    hub.restart()
    wait_for(lambda: hub.request("GET", f"{API}/health").status_code == 200, "the service after the hub restart", timeout=90)
    wait_for(lambda: (lambda d: d if any(e["type"] == "requeued" for e in d[ids[0]]["events"]) else None)(
        {j: svc(hub, "bob", "GET", f"/workloads/{j}")[1] for j in ids}), "b0 to be queued again")
    b0 = wait_for(lambda: (lambda w: w if w["state"] == "Running" else None)(svc(hub, "bob", "GET", f"/workloads/{ids[0]}")[1]),
                  "b0 to run again")
    assert _pid_of(hub, b0) != running_pid
    # bob's server ended with the hub; the restarted hub stops it, and the scheduler hears of it
    # (with a token borrowed for that: the hub no longer knows the server's own).
    wait_for(lambda: notebook(hub, "bob")["state"] == "Stopped", "bob's notebook workload to be stopped")
    states = [svc(hub, "bob", "GET", f"/workloads/{j}")[1]["state"] for j in ids[1:]]
    # The notebooks' servers ended with the hub, so there may be room for more: whoever
    # runs, runs in queue order; no queued job overtook one submitted before it.
    assert states == sorted(states, key=lambda s: s != "Running"), states
    for j in ids:
        svc(hub, "bob", "DELETE", f"/workloads/{j}")


def test_a_notebook_queued_across_a_hub_restart_is_not_left_behind(hub):
    # team-a at its max (two 10-CPU jobs of alice's): her server "later" waits in the queue
    jobs = [svc(hub, "alice", "POST", "/workloads", {"command": ["sleep", "300"], "name": f"fill{i}",
                                                      "resources": {"requests": {"cpu": "10"}}})[1]["id"] for i in (1, 2)]
    wait_for(lambda: all(svc(hub, "alice", "GET", f"/workloads/{j}")[1]["state"] == "Running" for j in jobs), "the jobs to run")

    def queued():
        return [w for w in workloads(hub, "alice", kind="notebook") if w["serverName"] == "later" and w["state"] == "Pending"]

    spawn(hub, "alice", "later", profile="small")
    [first] = wait_for(queued, "the notebook to queue")
    # The hub restarts meanwhile: it forgets the spawn in progress, the scheduler does not.
    hub.restart()
    wait_for(lambda: hub.request("GET", f"{API}/health").status_code == 200, "the service after the hub restart", timeout=90)
    assert [w["id"] for w in queued()] == [first["id"]]
    # Started again: the leftover leaves the queue, and one notebook waits, not two.
    hub.tokens.pop("alice", None)
    spawn(hub, "alice", "later", profile="small")
    wait_for(lambda: [w["id"] for w in queued()] not in ([], [first["id"]]), "the new start to queue")
    assert len(queued()) == 1
    assert svc(hub, "alice", "GET", f"/workloads/{first['id']}")[1]["state"] == "Stopped"
    hub.stop_server("alice", "later", timeout=30)
    for j in jobs:
        svc(hub, "alice", "DELETE", f"/workloads/{j}")


def _pid_of(hub, job) -> int | None:
    import sqlite3

    db = Path(hub.extra_env["TENANCY_DEMO_STATE"]) / "tenancy.sqlite"
    with sqlite3.connect(db) as conn:
        row = conn.execute("select pid from pods where workload_id=? order by id limit 1", (job["id"],)).fetchone()
    return row[0] if row else None


def _alive_service(hub, old: int) -> bool:
    try:
        return service_pid(hub) != old
    except AssertionError:
        return False


def test_metrics_and_openapi(hub):
    r = hub.request("GET", "/services/tenancy/metrics", token=token(hub, "admin"))
    assert r.status_code == 200
    assert 'tenancy_quota{kind="max",node="root",resource="cpu"} 40.0' in r.text
    assert "tenancy_evictions_total" in r.text and "tenancy_decision_seconds_bucket" in r.text
    # the live page, through the hub's OAuth login: a user sees their own teams only
    session = hub.login("bob", "demo")
    page = session.get(hub.url("/services/tenancy/jobs"), allow_redirects=True, timeout=30)
    assert page.status_code == 200 and "Training jobs" in page.text
    assert "team-b" in page.text and "carol-train" not in page.text
    admin = hub.login("admin", "demo").get(hub.url("/services/tenancy/jobs"), allow_redirects=True, timeout=30)
    assert admin.status_code == 200 and "carol-train" in admin.text
    spec = hub.request("GET", f"{API}/openapi.json").json()
    assert {"/me", "/tenants", "/tree", "/room", "/workloads", "/workloads/{id}", "/workloads/{id}/logs",
            "/events"} <= set(spec["paths"])


def test_a_typo_in_a_teams_properties_keeps_its_last_good_ones_and_admins_are_told(hub):
    good = {"tenancy.namespace": "team-c", "tenancy.quota-leaf": "root.b.1",
            "tenancy.priority-classes": "low-priority-dev,high-priority-research,critical-prod"}
    status, _ = hub.api("PUT", "/groups/team-c/properties?force=true", {**good, "tenancy.priority-classes": "critcal-prod"})
    assert status == 200
    try:
        def kept():
            tenants = svc(hub, "admin", "GET", "/tenants")[1]["tenants"]
            return next((t for t in tenants if t["group"] == "team-c" and t.get("keptLastGood")), None)
        team = wait_for(kept, "team-c to keep its last good properties")
        assert team["errors"] == [] and "critical-prod" in team["priorityClasses"]
        assert team["rejected"] == ["property tenancy.priority-classes: no PriorityClass named critcal-prod"]
        status, health = svc(hub, "admin", "GET", "/health")
        problem = next(p for p in health["problems"] if p["check"] == "group-properties")
        assert problem["message"].startswith(
            "group team-c: property tenancy.priority-classes: no PriorityClass named critcal-prod; its members keep "
            "its last good properties until this is fixed. In the hub's admin panel (Groups, team-c), list only "
            "existing classes in tenancy.priority-classes") and not problem["blocking"]
        # carol keeps working: her team's room answers and a job at a class of the last good list is taken
        status, room = svc(hub, "carol", "POST", "/room", {"tenant": "team-c", "profiles": {"small": {"requests": {"cpu": "5"}}}})
        assert status == 200, room
        status, dry = svc(hub, "carol", "POST", "/workloads?dryRun=true",
                          {"command": ["true"], "priorityClassName": "critical-prod", "resources": {"requests": {"cpu": "1"}}})
        assert status == 200 and dry["tenant"] == "team-c", dry
    finally:
        hub.api("PUT", "/groups/team-c/properties", good)
    wait_for(lambda: "group-properties" not in {p["check"] for p in svc(hub, "admin", "GET", "/health")[1]["problems"]},
             "the problem to clear once the properties are right again")


def test_the_hub_refuses_wrong_group_properties_when_they_are_saved(hub):
    """Issue 22: the admin panel's save (PUT /hub/api/groups/{name}/properties) of a wrong property is refused
    with one line naming the group, the property and the fix, and the group keeps what it had."""
    def stored() -> dict:
        status, group = hub.api("GET", "/groups/team-c")
        assert status == 200, group
        return group["properties"]

    before = stored()
    status, body = hub.api("PUT", "/groups/team-c/properties", {**before, "tenancy.priority-classes": "critcal-prod"})
    assert status == 400, body
    assert body["message"].startswith(
        "The properties of group team-c were not saved. Property tenancy.priority-classes: no PriorityClass named "
        "critcal-prod. List only existing classes in tenancy.priority-classes (critical-prod, "), body
    status, body = hub.api("PUT", "/groups/team-c/properties", {**before, "tenancy.quota-leaf": "root.b.9"})
    assert status == 400, body
    assert body["message"].startswith(
        "The properties of group team-c were not saved. Property tenancy.quota-leaf: 'root.b.9' is not a node of "
        "the quota tree (leaves: root.a.1, root.a.2, root.b.1, root.b.2). Set tenancy.quota-leaf to one of the "
        "leaves"), body
    assert "\n" not in body["message"]
    assert stored() == before
    status, body = hub.api("PUT", "/groups/team-c/properties", {**before, "tenancy.priority-classes": "critcal-prod"},
                           token=token(hub, "carol"))
    assert status == 403 and stored() == before  # JupyterHub's own scope check comes first, as before
    # the service's check the hub asks (admins only; nothing stored)
    assert svc(hub, "carol", "POST", "/tenants/team-c/check", {"properties": before})[0] == 403
    status, check = svc(hub, "admin", "POST", "/tenants/team-c/check",
                        {"properties": {**before, "tenancy.profiles": "smal"}, "profiles": ["small", "large"]})
    assert status == 200 and check["valid"] is False, check
    assert check["errors"] == ["property tenancy.profiles: no notebook profile named smal"], check
    right = {**before, "tenancy.profiles": "small"}
    try:
        status, body = hub.api("PUT", "/groups/team-c/properties", right)
        assert status == 200 and body["properties"] == right, body
        assert stored() == right
    finally:
        hub.api("PUT", "/groups/team-c/properties", before)


def test_admins_export_the_recorded_history_as_a_scenario_that_replays(hub):
    from hub_ext.sim.scenario import parse_scenario
    from hub_ext.sim.simulator import Simulator

    import yaml

    status, job = svc(hub, "carol", "POST", "/workloads", {"command": ["true"], "name": "history-job",
                                                             "resources": {"requests": {"cpu": "1"}}})
    assert status in (200, 201), job
    wait_for(lambda: svc(hub, "carol", "GET", f"/workloads/{job['id']}")[1]["state"] == "Succeeded",
             "the job to end")
    env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, "admin")}
    tenancy = [sys.executable, "-m", "hub_ext.cli", "history", "export"]
    out = subprocess.run(tenancy + ["--since", "1d"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    applied = [o["metadata"]["name"] for s in doc["steps"] for o in s.get("apply", ())]
    assert "history-job" in applied and doc["nodes"]
    reports = list(Simulator(parse_scenario(doc)).run())
    assert any(p["owner"] == "Job/history-job" and p["phase"] == "Succeeded" for p in reports[-1]["pods"])
    status, body = svc(hub, "carol", "GET", "/history/scenario")
    assert status == 403 and "only admins" in body["error"]
    status, body = svc(hub, "admin", "GET", "/history/scenario?since=7x")
    assert status == 400 and body["error"] == "since: '7x' is not a period (write it as 30m, 24h, 7d or 2w)"
    bad = subprocess.run(tenancy + ["--since", "soon"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "--since: 'soon'" in bad.stderr
    usage = [sys.executable, "-m", "hub_ext.cli", "usage", "--since", "1d", "--json"]
    seen = {}
    for user in ("admin", "carol", "bob"):
        env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, user)}
        out = subprocess.run(usage, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        assert lines[-1]["scope"] == "cluster" and "cpu" in lines[-1]["utilisation"]
        seen[user] = {line["name"] for line in lines[:-1]}
    carols = {t["group"] for t in svc(hub, "carol", "GET", "/me")[1]["tenants"]}
    assert "team-c" in seen["admin"] and "team-c" in seen["carol"] <= carols, seen
    assert "team-c" not in seen["bob"], seen  # users see their own teams only


def _stop_everything(hub) -> None:
    """Every server stopped and every job cancelled, until nothing runs or waits."""
    status, users = hub.api("GET", "/users")
    assert status == 200, users
    for user in users:
        for name in (user.get("servers") or {}):
            hub.stop_server(user["name"], name, timeout=60)
    for state in ("Pending", "Running"):  # jobs, and any notebook the hub did not list
        for w in workloads(hub, "admin", state=state):
            svc(hub, "admin", "DELETE", f"/workloads/{w['id']}")
    wait_for(lambda: not workloads(hub, "admin", state="Pending") and not workloads(hub, "admin", state="Running"),
             "nothing to run or wait", timeout=60)


def _same_numbers(ours: dict | None, theirs: dict | None) -> bool:
    """Equal but for the last decimal: both ends of the period are "now", a few seconds apart, and each
    export's advances are rounded to the millisecond."""
    if ours is None or theirs is None:
        return ours is theirs
    for key in set(ours) | set(theirs):
        a, b = ours.get(key), theirs.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys() or any(abs(a[k] - b[k]) > 0.01 for k in a):
                return False
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if abs(a - b) > 0.01:
                return False
        elif a != b:
            return False
    return True


def test_usage_as_a_csv_file_and_the_recorded_history_under_a_proposed_tree(hub):
    """The module's last test: it stops all work first. With nothing running or waiting, the moment a period
    ends changes no team's numbers, so the service's CSV is `tenancy usage --csv`'s and its comparison
    (POST /whatif) is `tenancy whatif` on the history `tenancy history export` writes."""
    import copy
    import csv
    import io

    from hub_ext.planning.usage import CSV_COLUMNS

    _stop_everything(hub)
    admin_env = {**os.environ, "TENANCY_API_URL": hub.url(API), "JUPYTERHUB_API_TOKEN": token(hub, "admin")}
    r = hub.request("GET", f"{API}/usage?since=1d&format=csv", token=token(hub, "admin"))
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv"), r.text[:300]
    assert r.headers["Content-Disposition"] == 'attachment; filename="tenancy-usage-1d-by-team.csv"'
    served = list(csv.reader(io.StringIO(r.text)))
    out = subprocess.run([sys.executable, "-m", "hub_ext.cli", "usage", "--since", "1d", "--csv"], env=admin_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    printed = list(csv.reader(io.StringIO(out.stdout)))
    assert served[0] == printed[0] == CSV_COLUMNS
    assert [row[:11] for row in served if row[0] != "cluster"] == [row[:11] for row in printed if row[0] != "cluster"]
    assert "team-c" in {row[0] for row in served} and served[-1][0] == "cluster"
    r = hub.request("GET", f"{API}/usage?since=1d", token=token(hub, "carol"), headers={"Accept": "text/csv"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv")
    carols = {t["group"] for t in svc(hub, "carol", "GET", "/me")[1]["tenants"]}
    assert {row[0] for row in csv.reader(io.StringIO(r.text))} - {"name", "cluster"} <= carols
    status, body = svc(hub, "admin", "GET", "/usage?format=xml")
    assert status == 400 and body["error"] == "format: 'xml' is not json or csv"

    tree = svc(hub, "admin", "GET", "/tree")[1]["tree"]
    proposed = copy.deepcopy(tree)
    proposed["metadata"]["name"] = "proposed"
    for team in proposed["spec"]["root"]["children"]:  # no team guarantees anything: nobody reclaims
        for leaf in [team, *team.get("children", [])]:
            leaf["min"] = {r: "0" for r in leaf.get("min", {})}
    status, body = svc(hub, "admin", "POST", "/whatif?since=1d", proposed)
    assert status == 200, body
    ours = {row.get("name", "cluster"): row for row in body["rows"]}
    scenario, tree_file = hub.workdir / "history.yaml", hub.workdir / "proposed.json"
    out = subprocess.run([sys.executable, "-m", "hub_ext.cli", "history", "export", "--since", "1d"], env=admin_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    scenario.write_text(out.stdout)
    tree_file.write_text(json.dumps(proposed))
    out = subprocess.run([sys.executable, "-m", "hub_ext.cli", "whatif", str(scenario), "--tree", str(tree_file),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    theirs = {row.get("name", "cluster"): row for row in map(json.loads, out.stdout.splitlines())}
    assert ours.keys() == theirs.keys() and {"root.a.1", "root.b.1"} <= ours.keys(), (ours.keys(), theirs.keys())
    for name, row in ours.items():
        if row["scope"] == "team":
            assert _same_numbers(row["current"], theirs[name]["current"]), (name, row, theirs[name])
            assert _same_numbers(row["proposed"], theirs[name]["proposed"]), (name, row, theirs[name])
    assert ours["root.b.1"]["current"]["waits"] >= 1, ours["root.b.1"]  # carol's history-job at least
    assert ours["cluster"]["current"]["utilisation"].keys() == theirs["cluster"]["current"]["utilisation"].keys()

    status, body = svc(hub, "carol", "POST", "/whatif?since=1d", proposed)
    assert status == 403 and body["error"].startswith("only admins may compare trees"), body
    bad = copy.deepcopy(tree)
    bad["spec"]["root"]["children"][0]["min"]["cpu"] = "500"  # above the root's max
    status, body = svc(hub, "admin", "POST", "/whatif?since=1d", bad)
    assert status == 400 and "\n" not in body["error"] and "min cpu 500" in body["error"], body
    status, body = svc(hub, "admin", "POST", "/whatif?since=1x", proposed)
    assert status == 400 and body["error"] == "since: '1x' is not a period (write it as 30m, 24h, 7d or 2w)"
