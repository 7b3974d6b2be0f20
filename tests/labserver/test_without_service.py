"""A server outside a tenancy hub (``TENANCY_API_URL`` unset): every route answers with the
sentence people read, never a traceback, and the page's stream says so and ends."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from fake_service import read_events

NOT_IN_A_HUB = ("This server does not run in a JupyterHub with the tenancy scheduler "
                "(TENANCY_API_URL is not set), so there is no team quota to show.")
DOWN = ("The tenancy scheduler cannot be reached right now, so your team's quota and jobs are not shown. "
        "Your notebook keeps working; this comes back by itself when the scheduler answers again.")


@pytest.fixture
def jp_server_config(monkeypatch):
    for name in ("TENANCY_API_URL", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return {"ServerApp": {"jpserver_extensions": {"hub_ext.labserver": True}}}


async def test_the_state_says_there_is_no_scheduler_here(jp_fetch):
    r = await jp_fetch("tenancy", "api", "state")
    assert r.code == 200
    assert json.loads(r.body) == {"available": False, "ok": False, "message": NOT_IN_A_HUB}


async def test_the_stream_says_so_once_and_ends(jp_fetch):
    events = await read_events(jp_fetch, 2)
    assert events == [("state", {"available": False, "ok": False, "message": NOT_IN_A_HUB})]


@pytest.mark.parametrize("method, path, body", [
    ("POST", ("workloads",), {"command": ["sleep", "1"]}),
    ("POST", ("workloads",), None),
    ("GET", ("workloads", "00ab"), None),
    ("DELETE", ("workloads", "00ab"), None),
    ("GET", ("workloads", "00ab", "logs"), None),
], ids=["submit", "dry run", "a workload", "cancel", "logs"])
async def test_calls_for_the_scheduler_are_answered_with_a_sentence(jp_fetch, method, path, body):
    params = {"dryRun": "true"} if body is None and method == "POST" else None
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("tenancy", "api", *path, method=method, params=params,
                       body=json.dumps(body or {}) if method == "POST" else None, allow_nonstandard_methods=True)
    assert err.value.code == 503, err.value.response.body
    assert json.loads(err.value.response.body)["error"] in (NOT_IN_A_HUB, DOWN)


async def test_a_notice_is_dismissed_without_the_scheduler(jp_fetch):
    r = await jp_fetch("tenancy", "api", "notices", "dismiss", method="POST", body=json.dumps({"workload": "00ab"}))
    assert (r.code, json.loads(r.body)) == (200, {"dismissed": "00ab"})


async def test_without_a_login_nothing(jp_fetch):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("tenancy", "api", "state", headers={"Authorization": ""})
    assert err.value.code == 403
