"""Issue 8's and issue 21's findings, each replayed against the real demo hub as a hostile or
ordinary user would: a stopped server's quota, the spawner-only release, unbounded and
zero-request work, script injection, oversized and deep bodies, queue floods, paging, tokens,
the waiting page of a named server; then (issue 21) the floor every pod is charged, caps that
count running work, notebooks queued by the spawner alone, text that is not UTF-8, and a
teammate's notebook. Nothing is mocked; pages are driven in headless Chromium."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
import sys
import time

import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import API, leaf_used, svc, token
from harness import free_port
from kernel import run_code
from waiting import wait_for

SMALL = {"profile": "small"}  # 5 CPUs
#: The scheduler service's token in this hub, which its spawner uses: the tests call as the spawner does.
SPAWNER = secrets.token_hex(32)


@pytest.fixture(scope="module")
def hub(hub_factory):
    config = f"next(s for s in c.JupyterHub.services if s['name'] == 'tenancy')['api_token'] = {SPAWNER!r}"
    with hub_factory("trust-hub", extra_config=config) as h:
        yield h


def notebook_of(hub, user, server=""):
    status, body = svc(hub, user, "GET", "/workloads?kind=notebook&mine=true")
    assert status == 200, body
    return next(w for w in body["workloads"] if (w["serverName"] or "") == server)


def start(hub, user, server="", **options):
    status, body = hub.start_server(user, server, options or SMALL, token=token(hub, user), check=False)
    assert status in (201, 202), body


def test_stopping_a_server_through_the_hub_gives_its_quota_back(hub):
    start(hub, "alice")
    hub.wait_server_ready("alice")
    assert leaf_used(hub, "root.a.1") == "5"
    hub.stop_server("alice")  # DELETE /hub/api/users/alice/server, as the finding did
    wait_for(lambda: leaf_used(hub, "root.a.1") == "0", "alice's 5 CPUs to be given back", timeout=15)
    wl = notebook_of(hub, "alice")
    assert wl["state"] == "Stopped"
    # Told by the spawner as the server stopped, not found out later by the service's backstop.
    events = svc(hub, "alice", "GET", f"/workloads/{wl['id']}")[1]["events"]
    assert events[-1]["message"] == "alice's server stopped: its room is free again", events[-1]


def test_neither_the_user_nor_the_notebook_can_drop_a_running_servers_quota(hub):
    start(hub, "bob")
    hub.wait_server_ready("bob")
    wl = notebook_of(hub, "bob")
    status, body = svc(hub, "bob", "DELETE", f"/workloads/{wl['id']}?by=spawner")
    assert status == 403 and "only the hub's spawner" in body["error"]
    # The server's own token, from inside the notebook, as a user's code would find it.
    out = run_code(hub, "bob", token(hub, "bob"), (
        "import os, urllib.request\n"
        f"req = urllib.request.Request(os.environ['TENANCY_API_URL'] + '/workloads/{wl['id']}?by=spawner',\n"
        "    method='DELETE', headers={'Authorization': 'token ' + os.environ['JUPYTERHUB_API_TOKEN']})\n"
        "try:\n    urllib.request.urlopen(req)\nexcept urllib.error.HTTPError as e:\n    print(e.code)\n"))
    assert out.strip() == "403"
    assert notebook_of(hub, "bob")["state"] == "Running" and leaf_used(hub, "root.a.2") == "5"
    hub.stop_server("bob")
    wait_for(lambda: leaf_used(hub, "root.a.2") == "0", "bob's quota to be given back", timeout=15)


def test_a_notebook_the_hub_does_not_run_gives_its_room_back(hub):
    # Submitted as the spawner would, but no server of that name exists in the hub (a hub
    # restart that dropped a spawn, a spawner that could not tell us): the service notices.
    status, wl = svc(hub, None, "POST", "/workloads", {"kind": "notebook", "user": "carol", "serverName": "ghost",
                                                        "resources": {"requests": {"cpu": "3"}}}, tok=SPAWNER)
    assert status == 201 and wl["state"] == "Running"
    assert leaf_used(hub, "root.b.1") == "3"
    wait_for(lambda: svc(hub, "carol", "GET", f"/workloads/{wl['id']}")[1]["state"] == "Stopped",
             "the ghost notebook to be released", timeout=30)
    assert leaf_used(hub, "root.b.1") == "0"
    events = svc(hub, "carol", "GET", f"/workloads/{wl['id']}")[1]["events"]
    assert "the hub no longer runs carol's server 'ghost'" in events[-1]["message"]


def test_jobs_without_requests_are_charged_and_replicas_are_capped(hub):
    status, body = svc(hub, "dave", "POST", "/workloads", {"command": ["sleep", "60"], "replicas": 1000})
    assert status == 400 and "replicas 1000 is more than the 64 allowed" in body["error"]
    status, gang = svc(hub, "erin", "POST", "/workloads", {"tenant": "team-b", "command": ["sleep", "60"],
                                                          "replicas": 30})
    assert status == 201 and gang["gang"] and gang["state"] == "Pending"  # 30 CPUs at once: never more than 20
    assert "30 pods" in gang["message"] and float(leaf_used(hub, "root.a.2")) == 0
    assert svc(hub, "erin", "DELETE", f"/workloads/{gang['id']}")[0] == 200
    status, wl = svc(hub, "erin", "POST", "/workloads", {"tenant": "team-b", "command": ["sleep", "60"],
                                                        "replicas": 30, "gang": False})
    assert status == 201, wl
    assert wl["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    def settled():
        w = svc(hub, "erin", "GET", f"/workloads/{wl['id']}")[1]
        running = [p for p in w["pods"] if p["phase"] == "Running"]
        return w if running or w["state"] != "Pending" else None
    wait_for(settled, "erin's job to be decided")
    w = svc(hub, "erin", "GET", f"/workloads/{wl['id']}")[1]
    running = [p for p in w["pods"] if p["phase"] == "Running"]
    assert len(running) <= 20 and float(leaf_used(hub, "root.a.2")) <= 20  # root.a.2's max: 20 CPUs
    assert float(leaf_used(hub, "root.a.2")) == len(running)  # one CPU charged for each
    assert svc(hub, "erin", "DELETE", f"/workloads/{wl['id']}")[0] == 200


def test_a_huge_body_is_refused_before_it_is_stored(hub):
    db = hub.workdir / "state" / "tenancy.sqlite"
    before = db.stat().st_size
    r = hub.request("POST", API + "/workloads", token=token(hub, "alice"),
                    data=json.dumps({"command": ["true"], "env": {"X": "x" * 10_000_000}}),
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "at most 1,048,576 are accepted" in r.json()["error"]
    assert db.stat().st_size < before + 1_000_000
    deep = "[" * 1000 + "]" * 1000
    r = hub.request("POST", API + "/workloads", token=token(hub, "alice"), data=deep)
    assert r.status_code == 400 and "nested more than 64 levels" in r.json()["error"]
    assert svc(hub, "alice", "GET", "/me")[0] == 200


def test_one_user_cannot_push_a_teammate_to_the_back_of_the_queue(hub):
    never = {"command": ["true"], "resources": {"requests": {"cpu": "15", "memory": "30Gi"}}}  # above root.a.1's memory max
    ids = []
    for _ in range(20):
        status, wl = svc(hub, "alice", "POST", "/workloads", never)
        assert status == 201, wl
        ids.append(wl["id"])
    status, body = svc(hub, "alice", "POST", "/workloads", never)
    assert status == 429 and "alice has 20 notebooks and jobs waiting or running already" in body["error"]
    status, wl = svc(hub, "erin", "POST", "/workloads", {"tenant": "team-a", **never})
    # Above root.a.1's max: inadmissible, it holds no place in the queue, nor do alice's twenty.
    assert status == 201 and wl["reason"] == "inadmissible" and wl["leafPosition"] is None
    ids.append(wl["id"])
    # Listings page through everything and filter before the page is cut.
    seen, after = [], None
    while True:
        status, page = svc(hub, "alice", "GET", "/workloads?limit=7" + (f"&continue={after}" if after else ""))
        assert status == 200 and len(page["workloads"]) <= 7
        seen += [w["id"] for w in page["workloads"]]
        after = page["continue"]
        if not after:
            break
    assert set(ids) <= set(seen) and len(seen) == len(set(seen))
    for wid in ids[:5]:
        svc(hub, "alice", "DELETE", f"/workloads/{wid}")
    status, page = svc(hub, "alice", "GET", "/workloads?state=Cancelled&limit=3")
    assert [w["state"] for w in page["workloads"]] == ["Cancelled"] * 3 and page["continue"]
    status, body = svc(hub, "alice", "GET", "/workloads?continue=not-a-token")
    assert status == 400 and "continue" in body["error"]
    for wid in ids[5:]:
        svc(hub, "erin" if wid == ids[-1] else "alice", "DELETE", f"/workloads/{wid}")


def test_tokens_revoked_missing_or_underscoped_are_refused(hub):
    hub.login("alice", "demo")
    status, model = hub.api("POST", "/users/alice/tokens", {"note": "revoke me"})
    tok, token_id = model["token"], model["id"]
    assert svc(hub, None, "GET", "/me", tok=tok)[0] == 200
    assert hub.api("DELETE", f"/users/alice/tokens/{token_id}")[0] == 204
    revoked = time.monotonic()
    wait_for(lambda: svc(hub, None, "GET", "/me", tok=tok)[0] == 403, "the revoked token to be refused", timeout=10,
             interval=0.2)
    assert time.monotonic() - revoked <= 5.5
    no_access = hub.token_for("alice", ["custom:tenancy:use!user"])
    status, body = svc(hub, None, "GET", "/me", tok=no_access)
    assert status == 403 and "access:services!service=tenancy" in body["error"]
    no_use = hub.token_for("alice", ["access:services!service=tenancy"])
    status, body = svc(hub, None, "GET", "/me", tok=no_use)
    assert status == 403 and "custom:tenancy:use" in body["error"]
    assert svc(hub, None, "GET", "/me", tok="not-a-token")[0] == 403


def test_html_is_text_on_the_live_page_and_pages_carry_a_policy(hub, browser):
    # Quota node names are DNS-1123 now: HTML cannot even be stored through the API.
    status, body = svc(hub, "admin", "GET", "/tree")
    tree = body["tree"]
    tree["spec"]["root"]["children"][0]["name"] = 'root.a<img src=x onerror="window.pwned=1">'
    status, body = svc(hub, "admin", "PUT", "/tree?dryRun=true", tree)
    assert status == 400 and "is not a valid name (DNS-1123" in body["error"]
    # Rows an older version may have stored: every field a person reads carries markup.
    evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><small>'
    db = sqlite3.connect(hub.workdir / "state" / "tenancy.sqlite")
    with db:
        db.execute("INSERT INTO workloads (id, kind, name, user, namespace, tenant, spec, state, created, message, "
                   "succeeded) VALUES ('deadbeef', 'training', ?, 'alice', 'team-a', 'team-a', ?, 'Failed', ?, ?, 0)",
                   (evil, json.dumps({"priorityClassName": evil, "resources": {}}), time.time(), evil))
        db.execute("INSERT INTO pods (workload_id, \"index\", name, phase, created, reason) "
                   "VALUES ('deadbeef', 0, ?, 'Failed', ?, ?)",
                   (evil, time.time(), json.dumps({"code": "failed", "message": evil})))
    db.close()
    page = logged_in(browser, hub, "admin")
    response = page.goto(hub.url("/services/tenancy/jobs"))
    assert response.status == 200
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    page.select_option("#kind-filter", "")
    page.wait_for_selector("#jobs tr[data-id=deadbeef]")
    assert page.evaluate("window.pwned") is None
    assert page.locator("td", has_text='<img src=x onerror="window.pwned=1">').count() >= 2  # shown as text
    shot(page, "trust-escaped-dashboard")
    api = page.goto(hub.url(API + "/tenants"))
    assert "default-src 'none'" in api.headers["content-security-policy"]
    page.context.close()


def test_the_browser_session_reads_my_own_me(hub, browser):
    page = logged_in(browser, hub, "carol")
    response = page.goto(hub.url(API + "/me"))
    assert response.status == 200, response.text()
    me = json.loads(page.inner_text("body"))
    assert me["name"] == "carol" and [t["group"] for t in me["tenants"]] == ["team-c"]
    page.context.close()


def test_stop_on_a_named_servers_waiting_page_stops_that_server(hub, browser):
    status, job = svc(hub, "carol", "POST", "/workloads", {"command": ["sleep", "600"],
                                                         "resources": {"requests": {"cpu": "15"}}})
    assert status == 201
    start(hub, "carol")  # 15 + 5 = root.b.1's max of 20
    hub.wait_server_ready("carol")
    start(hub, "carol", "more")
    wait_for(lambda: (hub.server_model("carol", "more") or {}).get("pending") == "spawn", "carol/more to wait")
    page = logged_in(browser, hub, "carol")
    page.goto(hub.url("/hub/spawn-pending/carol/more"))
    page.wait_for_selector("#stop-named-server-btn")
    wait_for(lambda: "quota root.b.1 is at its max" in page.inner_text("#progress-message"), "the reason to show")
    shot(page, "trust-named-server-waiting")
    page.click("#stop-named-server-btn")
    page.click("dialog#tenancy-confirm[open] button.confirm")  # it asks first (issue 22)
    wait_for(lambda: hub.server_model("carol", "more") is None, "carol/more to stop")
    assert hub.server_model("carol", "")["ready"]  # the default server was not touched
    page.context.close()
    hub.stop_server("carol")
    svc(hub, "carol", "DELETE", f"/workloads/{job['id']}")


def test_an_unreachable_hub_is_a_503_not_a_500(tmp_path):
    port, dead = free_port(), free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")},
           "JUPYTERHUB_API_URL": f"http://127.0.0.1:{dead}/hub/api", "JUPYTERHUB_API_TOKEN": "x" * 32,
           "JUPYTERHUB_SERVICE_PREFIX": "/services/tenancy/"}
    proc = subprocess.Popen([sys.executable, "-m", "hub_ext.cli", "serve", "--port", str(port),
                             "--db", f"sqlite:///{tmp_path}/t.sqlite"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        import urllib.request
        url = f"http://127.0.0.1:{port}/services/tenancy/api/v1"
        def answers():
            try:
                return urllib.request.urlopen(url + "/health", timeout=2).status == 200
            except OSError:
                return False
        wait_for(answers, "the service to listen", timeout=30)
        req = urllib.request.Request(url + "/me", headers={"Authorization": "token " + "y" * 32})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 503
        assert "the hub cannot confirm who you are" in json.loads(err.value.read())["error"]
    finally:
        proc.kill()
        proc.wait()



# -- issue 21 ------------------------------------------------------------------------------

def mine(hub, user, **filters) -> list[dict]:
    query = "&".join(f"{k}={v}" for k, v in {"mine": "true", "limit": 500, **filters}.items())
    status, body = svc(hub, user, "GET", f"/workloads?{query}")
    assert status == 200, body
    return body["workloads"]


def test_requests_below_the_floor_are_raised_to_it_and_charged(hub):
    ids = []
    for amount in ("0", "-0", "1e-30", "0.0001"):
        status, wl = svc(hub, "bob", "POST", "/workloads", {
            "command": ["sleep", "600"], "replicas": 5, "gang": False,
            "resources": {"requests": {"cpu": amount, "memory": amount}}})
        assert status == 201, wl
        assert wl["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}, (amount, wl["resources"])
        ids.append(wl["id"])
    # Twenty pods of 100m and 64Mi each: charged as they run, not free.
    wait_for(lambda: leaf_used(hub, "root.a.2") == "2", "bob's twenty pods to be charged 100m each")
    assert leaf_used(hub, "root.a.2", "memory") == "1280Mi"
    events = svc(hub, "bob", "GET", f"/workloads/{ids[2]}")[1]["events"]
    assert "cpu request 1e-30 raised to the least a pod is charged, 100m" in events[0]["message"], events[0]
    for wid in ids:
        assert svc(hub, "bob", "DELETE", f"/workloads/{wid}")[0] == 200
    wait_for(lambda: leaf_used(hub, "root.a.2") == "0", "bob's room to be given back")


def test_running_jobs_count_against_the_users_cap(hub):
    small = {"command": ["sleep", "600"], "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    ids = []
    for _ in range(20):
        status, wl = svc(hub, "alice", "POST", "/workloads", small)
        assert status == 201, wl
        ids.append(wl["id"])
    wait_for(lambda: len(mine(hub, "alice", state="Running")) == 20, "alice's twenty jobs to run")
    status, body = svc(hub, "alice", "POST", "/workloads", small)
    assert status == 429 and "alice has 20 notebooks and jobs waiting or running already" in body["error"], body
    assert "max_workloads_per_user" in body["error"]
    for wid in ids:
        assert svc(hub, "alice", "DELETE", f"/workloads/{wid}")[0] == 200
    wait_for(lambda: leaf_used(hub, "root.a.1") == "0", "alice's room to be given back")


def test_only_the_hubs_spawner_queues_a_notebook(hub):
    ghost = {"kind": "notebook", "serverName": "ghost-2", "resources": {"requests": {"cpu": "3"}}}
    for user in ("carol", "admin"):  # a user's own token (or their server's) is not the spawner's
        status, body = svc(hub, user, "POST", "/workloads", ghost)
        assert status == 403 and "notebooks are started by the hub" in body["error"], (user, body)
    status, body = svc(hub, "carol", "POST", "/workloads", {**ghost, "user": "carol"})
    assert status == 403 and "only the hub's spawner may submit for a user" in body["error"], body
    assert not [w for w in mine(hub, "carol", kind="notebook") if w["serverName"] == "ghost-2"]
    assert leaf_used(hub, "root.b.1") == "0"


@pytest.mark.parametrize("body, field", [
    ({"command": ["echo", "\ud800"]}, "command[1]"),
    ({"command": ["true"], "env": {"NAME": "a\udfffb"}}, "env.NAME"),
    ({"command": ["true"], "serverName": "\ud83d"}, "serverName"),
    ({"command": ["true"], "profile": "x\udc00"}, "profile"),
], ids=["command", "env", "serverName", "profile"])
def test_text_that_is_not_utf8_is_a_400_naming_the_field(hub, body, field):
    before = [w["id"] for w in mine(hub, "dave")]
    status, answer = svc(hub, "dave", "POST", "/workloads", body)  # sent as JSON's \ud800 escapes
    assert status == 400 and answer["error"].startswith(f"request body: {field} is not valid UTF-8 text"), answer
    assert [w["id"] for w in mine(hub, "dave")] == before  # nothing stored


def test_a_teammate_cannot_stop_my_notebook(hub):
    start(hub, "alice")
    hub.wait_server_ready("alice")
    wl = notebook_of(hub, "alice")
    # erin is alice's teammate (team-a): she sees the notebook, and may not stop it.
    assert svc(hub, "erin", "GET", f"/workloads/{wl['id']}")[0] == 200
    status, body = svc(hub, "erin", "DELETE", f"/workloads/{wl['id']}")
    assert status == 403 and "only alice or an admin may stop alice's notebook" in body["error"], body
    assert notebook_of(hub, "alice")["state"] == "Running" and hub.server_model("alice", "")["ready"]
    assert svc(hub, "admin", "DELETE", f"/workloads/{wl['id']}")[0] == 200  # an admin may
    wait_for(lambda: hub.server_model("alice", "") is None, "alice's server to be stopped")
    wait_for(lambda: leaf_used(hub, "root.a.1") == "0", "alice's room to be given back")


# -- issue 21: the local spawner's servers in cgroups of their own ---------------------------------------

def test_a_notebook_server_is_capped_in_its_own_cgroup_and_its_stop_ends_even_a_setsid_child(hub):
    from concurrent.futures import ThreadPoolExecutor

    from harness import proc_alive
    from hub_ext.backends.local import cgroups

    where, why = cgroups.place()  # the hub's, as it runs beside this test
    if where is None:
        pytest.skip(f"no writable cgroup here: {why}")
    start(hub, "dave")  # small: 5 CPUs, 4 GiB
    hub.wait_server_ready("dave")
    code = ("import subprocess\n"
            "child = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            "print(child.pid)\n"
            "print(open('/proc/self/cgroup').read())")
    with ThreadPoolExecutor(1) as pool:  # run_code has a loop of its own; the browser's may be running here
        out = pool.submit(run_code, hub, "dave", token(hub, "dave"), code).result()
    child = int(out.split()[0])
    cpu = next(line.split(":", 2)[2] for line in out.splitlines()[1:] if "cpu" in line.split(":")[1].split(","))
    name = os.path.basename(cpu)
    assert name.startswith(f"nb-{notebook_of(hub, 'dave')['id']}-"), out  # the kernel is in its server's cgroup
    cg = where.named(name)
    assert cg is not None and child in cg.procs()
    if cg.version == 1:
        assert open(os.path.join(cg.dirs["cpu"], "cpu.cfs_quota_us")).read().strip() == "500000"  # 5 CPUs
        assert open(os.path.join(cg.dirs["memory"], "memory.limit_in_bytes")).read().strip() == str(4 * 2**30)
    hub.stop_server("dave")
    wait_for(lambda: not proc_alive(child), "the server's setsid child to be gone", timeout=60)
    wait_for(lambda: where.named(name) is None, "the server's cgroup to be removed", timeout=30)
