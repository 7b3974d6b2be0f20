"""A server in a tenancy hub: its routes call the scheduler service (here ``FakeService``) with the
server's own hub token, pass its answers and its refusals on, say a sentence when it fails or is
gone, keep dismissed notices, and stream its events to the page."""

from __future__ import annotations

import asyncio
import json

import pytest
from tornado.httpclient import HTTPClientError

from fake_service import TOKEN, read_events
from waiting import until

DOWN = ("The tenancy scheduler cannot be reached right now, so your team's quota and jobs are not shown. "
        "Your notebook keeps working; this comes back by itself when the scheduler answers again.")
TEAM_A = {"group": "team-a", "namespace": "team-a", "quotaLeaf": "root.a.1", "priorityClasses": ["low-priority-dev"]}
TREE = {"spec": {"root": {"name": "root", "children": [
    {"name": "root.a", "children": [{"name": "root.a.1"}, {"name": "root.a.2"}]}, {"name": "root.b"}]}}}
QUOTA = {"root": {"min": {"cpu": "40"}, "max": {"cpu": "40"}, "used": {"cpu": "25"}},
         "root.a": {"min": {"cpu": "20"}, "max": {"cpu": "40"}, "used": {"cpu": "25"}},
         "root.a.1": {"min": {"cpu": "10"}, "max": {"cpu": "20"}, "used": {"cpu": "15"}}}


@pytest.fixture
def jp_server_config(service, monkeypatch):
    monkeypatch.setenv("TENANCY_API_URL", service.url)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", TOKEN)
    monkeypatch.setenv("TENANCY_WORKLOAD_ID", "00aa")
    monkeypatch.delenv("TENANCY_TENANT", raising=False)
    return {"ServerApp": {"jpserver_extensions": {"hub_ext.labserver": True}}}


@pytest.fixture
def alice(service):
    """The service's answers for alice of team-a: her notebook, a job of hers, one of bob's, a notice."""
    service.me = {"name": "alice", "tenants": [TEAM_A],
                  "workloads": [{"id": "00aa", "user": "alice", "kind": "notebook", "state": "Running"},
                                {"id": "00ab", "user": "alice", "kind": "training", "state": "Pending"},
                                {"id": "00bb", "user": "bob", "kind": "training", "state": "Running"}],
                  "notices": [{"workload": "0099", "message": "Your server was stopped at 10:02 to make room"}]}
    service.tree = {"tree": TREE, "quota": QUOTA}
    return service


async def fetch_json(jp_fetch, *path, **kwargs) -> tuple[int, dict]:
    """(status, JSON body) of a route under ``tenancy/api``, errors included."""
    try:
        r = await jp_fetch("tenancy", "api", *path, **kwargs)
    except HTTPClientError as err:
        r = err.response
    return r.code, json.loads(r.body)


async def test_the_state_is_my_team_its_path_to_the_root_and_my_workloads(jp_fetch, alice):
    status, state = await fetch_json(jp_fetch, "state")
    assert status == 200, state
    assert (state["available"], state["ok"], state["message"], state["user"]) == (True, True, None, "alice")
    assert state["tenant"] == TEAM_A and state["tenants"] == [TEAM_A]
    assert state["server"] == {"name": "", "workloadId": "00aa"}
    assert [w["id"] for w in state["workloads"]] == ["00aa", "00ab"]  # bob's is not mine
    assert state["notices"] == alice.me["notices"]
    assert [n["name"] for n in state["path"]] == ["root.a.1", "root.a", "root"]
    [cpu] = state["path"][0]["resources"]
    assert (cpu["resource"], cpu["used"], cpu["min"], cpu["max"], cpu["borrowed"]) == ("cpu", 15, 10, 20, 5)
    # asked with the server's own token, nothing else
    assert {(method, path, auth) for method, path, auth, _ in alice.asked} == {
        ("GET", "/me", f"token {TOKEN}"), ("GET", "/tree", f"token {TOKEN}")}


async def test_my_teams_datasets_come_with_where_they_are_in_this_server(jp_fetch, alice, jp_root_dir, monkeypatch):
    (jp_root_dir / "datasets").mkdir()  # the local backend's way: a link in the home to the dataset's folder
    (jp_root_dir / "datasets" / "fashion-mnist").symlink_to(jp_root_dir.parent, target_is_directory=True)
    monkeypatch.setenv("TENANCY_DATASETS", json.dumps({"fashion-mnist": str(jp_root_dir / "datasets" / "fashion-mnist"),
                                                       "scratch": "/datasets/scratch"}))
    alice.me["datasets"] = [  # once per namespace of hers that may use it; this server is team-a's
        {"name": "fashion-mnist", "description": "Fashion-MNIST", "mountPath": "/datasets/fashion-mnist",
         "readOnly": True, "state": "Bound", "message": None, "namespace": "team-a"},
        {"name": "fashion-mnist", "description": "Fashion-MNIST", "mountPath": "/datasets/fashion-mnist",
         "readOnly": True, "state": "Refused", "message": "no claims in team-b", "namespace": "team-b"},
        {"name": "scratch", "description": "", "mountPath": "/datasets/scratch", "readOnly": False, "state": "Bound",
         "message": None, "namespace": "team-a"},
        {"name": "imagenet", "description": "", "mountPath": "/datasets/imagenet", "readOnly": True,
         "state": "Pending", "message": "waiting for the volume to bind", "namespace": "team-a"}]
    status, state = await fetch_json(jp_fetch, "state")
    assert status == 200, state
    assert [(d["name"], d["path"], d["browse"]) for d in state["datasets"]] == [
        ("fashion-mnist", str(jp_root_dir / "datasets" / "fashion-mnist"), "datasets/fashion-mnist"),
        ("scratch", "/datasets/scratch", None),  # mounted outside the file browser's root
        ("imagenet", "/datasets/imagenet", None)]  # not mounted here (it was not ready when the server started)
    assert state["datasets"][0]["readOnly"] is True and state["datasets"][0]["state"] == "Bound"
    assert state["datasets"][2]["message"] == "waiting for the volume to bind"


async def test_a_dismissed_notice_is_not_shown_again(jp_fetch, alice):
    status, body = await fetch_json(jp_fetch, "notices", "dismiss", method="POST", body=json.dumps({"workload": "0099"}))
    assert (status, body) == (200, {"dismissed": "0099"})
    status, state = await fetch_json(jp_fetch, "state")
    assert status == 200 and state["notices"] == []


@pytest.mark.parametrize("body", [{}, {"workload": 7}, {"workload": "../etc"}, ["0099"]])
async def test_a_dismissal_that_names_no_notice_is_a_400_saying_what_to_send(jp_fetch, alice, body):
    status, answer = await fetch_json(jp_fetch, "notices", "dismiss", method="POST", body=json.dumps(body))
    assert status == 400
    assert answer["message"] == 'Say which notice to dismiss: {"workload": "<id>"}.'


async def test_workloads_are_submitted_read_cancelled_and_their_logs_read(jp_fetch, alice):
    spec = {"command": ["sleep", "60"], "name": "streamed", "resources": {"requests": {"cpu": "1"}}}
    status, dry = await fetch_json(jp_fetch, "workloads", method="POST", params={"dryRun": "true"},
                                   body=json.dumps(spec))
    assert (status, dry) == (200, {"dryRun": True, "state": "Pending", "evictions": []})
    assert not alice.workloads  # a dry run stores nothing
    status, wl = await fetch_json(jp_fetch, "workloads", method="POST", body=json.dumps(spec))
    assert status == 201 and wl["name"] == "streamed" and wl["state"] == "Running", wl
    assert [(m, p, body) for m, p, _, body in alice.asked if m == "POST"] == [
        ("POST", "/workloads?dryRun=true", json.dumps(spec).encode()), ("POST", "/workloads", json.dumps(spec).encode())]
    assert await fetch_json(jp_fetch, "workloads", wl["id"]) == (200, wl)
    alice.logs[wl["id"]] = "epoch 1 loss 0.9\n"
    r = await jp_fetch("tenancy", "api", "workloads", wl["id"], "logs")
    assert (r.code, r.headers["Content-Type"], r.body) == (200, "text/plain; charset=utf-8", b"epoch 1 loss 0.9\n")
    status, cancelled = await fetch_json(jp_fetch, "workloads", wl["id"], method="DELETE")
    assert status == 200 and cancelled["state"] == "Cancelled"


@pytest.mark.parametrize("status, sentence", [
    (400, "workload: command must be a non-empty list of strings"),
    (403, "You may not act in namespace team-b."),
    (404, "No workload 00ab."),
])
@pytest.mark.parametrize("method, path", [
    ("POST", ("workloads",)), ("GET", ("workloads", "00ab")), ("DELETE", ("workloads", "00ab")),
    ("GET", ("workloads", "00ab", "logs")),
], ids=["submit", "read", "cancel", "logs"])
async def test_the_services_refusals_pass_on_with_its_status_and_sentence(jp_fetch, alice, status, sentence,
                                                                          method, path):
    alice.refusal = (status, sentence)
    body = json.dumps({"command": "not a list"}) if method == "POST" else None
    assert await fetch_json(jp_fetch, *path, method=method, body=body) == (status, {"error": sentence})


@pytest.mark.parametrize("method, path", [
    ("GET", ("state",)), ("POST", ("workloads",)), ("GET", ("workloads", "00ab")),
    ("DELETE", ("workloads", "00ab")), ("GET", ("workloads", "00ab", "logs")),
], ids=["state", "submit", "read", "cancel", "logs"])
async def test_a_failing_service_is_a_503_with_the_sentence_not_a_traceback(jp_fetch, alice, method, path):
    alice.failing = True
    body = json.dumps({"command": ["sleep", "1"]}) if method == "POST" else None
    assert await fetch_json(jp_fetch, *path, method=method, body=body) == (503, {"error": DOWN})


async def test_a_service_gone_is_a_503_with_the_sentence(jp_fetch, alice):
    await alice.stop()
    assert await fetch_json(jp_fetch, "state") == (503, {"error": DOWN})
    assert await fetch_json(jp_fetch, "workloads", "00ab") == (503, {"error": DOWN})


async def test_the_stream_opens_with_a_snapshot_then_relays_the_services_events(jp_fetch, alice):
    change = {"id": "00ab", "user": "alice", "kind": "training", "state": "Running", "evictionDeadline": None}
    pushed = []

    async def push_once_followed():
        await until(lambda: alice.listeners, "the server to follow the service's event stream")
        alice.me["workloads"][1] = change
        alice.push({"type": "workload", "workload": change})

    def then(events):
        if len(events) == 1:  # the page has its first snapshot
            pushed.append(asyncio.ensure_future(push_once_followed()))

    events = await read_events(jp_fetch, 3, then=then)
    await pushed[0]
    (first, snapshot), (second, relayed), (third, after) = events
    assert first == "state" and snapshot["ok"] and snapshot["user"] == "alice"
    assert [w["state"] for w in snapshot["workloads"]] == ["Running", "Pending"]
    assert (second, relayed) == ("workload", change)  # as the service sent it
    assert third == "state" and [w["state"] for w in after["workloads"]] == ["Running", "Running"]
    assert {auth for _, path, auth, _ in alice.asked if path == "/events"} == {f"token {TOKEN}"}


async def test_the_stream_says_once_when_the_service_fails(jp_fetch, alice):
    alice.failing = True
    events = await read_events(jp_fetch, 1)
    assert events == [("status", {"ok": False, "message": DOWN})]
