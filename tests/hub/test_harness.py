"""The harness itself, against a real hub, proxy and single-user servers."""

from __future__ import annotations

import os
import shutil
import signal
from importlib.metadata import version
from pathlib import Path

import pytest

from harness import SIMPLE_CONFIG, HubError, install_chp, proc_alive
from waiting import wait_for


def _alive(pids: dict[int, int]) -> dict[int, int]:
    return {p: i for p, i in pids.items() if proc_alive(p, i)}


def _by_role(hub) -> dict[str, dict[int, int]]:
    """The harness's live processes, sorted into hub / chp / singleuser / other."""
    roles: dict[str, dict[int, int]] = {"hub": {}, "chp": {}, "singleuser": {}, "other": {}}
    procs = hub.processes()
    for pid, argv in hub.process_cmdlines().items():
        text = " ".join(argv)
        role = (
            "chp" if "configurable-http-proxy" in text
            else "singleuser" if "jupyterhub-singleuser" in text
            else "hub" if "jupyterhub" in text
            else "other"
        )  # fmt: skip
        if pid in procs:
            roles[role][pid] = procs[pid]
    return roles


def test_hub_answers_with_its_version(simple_hub):
    status, body = simple_hub.api("GET", "/", token="")
    assert status == 200
    assert body["version"] == version("jupyterhub")
    # the admin token really authenticates, and anonymous requests are refused
    status, body = simple_hub.api("GET", "/user")
    assert (status, body["kind"], body["name"]) == (200, "service", "test-admin")
    status, _ = simple_hub.api("GET", "/users", token="")
    assert status == 403
    assert simple_hub.public_url.startswith("http://127.0.0.1:")
    assert simple_hub.log_path.is_file() and simple_hub.workdir in simple_hub.log_path.parents


def test_login_through_the_form_and_tokens(simple_hub):
    session = simple_hub.login("alice", "pw")
    status, me = simple_hub.api("GET", "/user", session=session)
    assert (status, me["name"], me["kind"]) == (200, "alice", "user")
    # cookie auth also passes the xsrf check on a POST
    status, body = simple_hub.api("POST", "/users/alice/tokens", {"note": "x"}, session=session)
    assert status == 201 and body["token"]

    with pytest.raises(HubError, match="login as 'alice' failed"):
        simple_hub.login("alice", "wrong")

    token = simple_hub.token_for("alice")
    assert simple_hub.api("GET", "/user", token=token)[1]["name"] == "alice"
    assert simple_hub.api("GET", "/users", token=token)[0] == 403  # a plain user
    narrow = simple_hub.token_for("alice", scopes=["read:users:name!user=alice"])
    status, body = simple_hub.api("GET", "/user", token=narrow)
    assert status == 200 and "read:users:name!user=alice" in body["scopes"]
    assert "servers!user=alice" not in body["scopes"]  # the scopes really narrowed it


def test_single_user_server_through_the_proxy(simple_hub):
    user = "sam"
    token = simple_hub.token_for(user)
    status, _ = simple_hub.start_server(user)
    assert status in (201, 202)
    model = simple_hub.wait_server_ready(user)
    assert model["url"] == f"/user/{user}/"
    pid = model["state"]["pid"]  # admin:servers includes admin:server_state

    r = simple_hub.request("GET", f"/user/{user}/api/status", token=token)
    assert r.status_code == 200, r.text
    assert "started" in r.json()
    # the server runs in the home under the work dir (not the machine's $HOME)
    home = simple_hub.workdir / "home" / user
    (home / "hello.txt").write_text("hi")
    r = simple_hub.request("GET", f"/user/{user}/api/contents", token=token)
    assert r.status_code == 200
    assert "hello.txt" in {item["name"] for item in r.json()["content"]}
    # another user's token is not let in
    other = simple_hub.token_for("eve")
    r = simple_hub.request("GET", f"/user/{user}/api/status", token=other)
    assert r.status_code == 403

    simple_hub.stop_server(user)
    assert simple_hub.server_model(user) is None
    wait_for(lambda: not _alive({pid: None}), "the single-user server to end after stop", 10, 0.1)


def test_groups_with_properties(simple_hub):
    group = "team-alpha"
    props = {"namespace": "team-alpha", "quota-leaf": "dept-a/team-alpha"}
    assert simple_hub.api("POST", f"/groups/{group}")[0] == 201
    status, body = simple_hub.api("PUT", f"/groups/{group}/properties", props)
    assert status == 200, body
    simple_hub.ensure_user("gina")
    assert simple_hub.api("POST", f"/groups/{group}/users", {"users": ["gina"]})[0] == 200

    status, body = simple_hub.api("GET", f"/groups/{group}")
    assert status == 200
    assert body["properties"] == props
    assert body["users"] == ["gina"]
    assert group in simple_hub.api("GET", "/users/gina")[1]["groups"]


@pytest.fixture
def hub(hub_factory):
    """A hub of the simple configuration for one test, which may stop, restart or crash it."""
    with hub_factory("harness-hub", config_text=SIMPLE_CONFIG) as h:
        yield h


def test_restart_keeps_users_groups_and_tokens_then_stop_cleans_up(hub):
    hub.ensure_user("carol")
    assert hub.api("POST", "/groups/ml", {"users": ["carol"]})[0] == 201
    assert hub.api("PUT", "/groups/ml/properties", {"namespace": "ml"})[0] == 200
    token = hub.token_for("carol")
    url, old_pid = hub.public_url, hub.proc.pid

    hub.restart()
    assert hub.proc.pid != old_pid and hub.public_url == url
    status, group = hub.api("GET", "/groups/ml")
    assert status == 200
    assert (group["users"], group["properties"]) == (["carol"], {"namespace": "ml"})
    assert hub.api("GET", "/user", token=token)[1]["name"] == "carol"
    assert (hub.workdir / "jupyterhub.sqlite").is_file()

    roles = _by_role(hub)
    assert len(roles["hub"]) == 1 and len(roles["chp"]) == 1, roles
    hub.stop()
    assert not _alive(hub.processes() | roles["hub"] | roles["chp"])
    assert not hub.running


def test_stop_cleans_up_after_a_crashed_hub(hub):
    """The proxy and the single-user servers run in sessions of their own: after the hub
    is SIGKILLed they survive it, and stop() must still find and end them."""
    hub.start_server("dave")
    hub.wait_server_ready("dave")
    roles = _by_role(hub)
    assert len(roles["chp"]) == 1 and len(roles["singleuser"]) == 1, roles
    everything = hub.processes()

    os.kill(hub.proc.pid, signal.SIGKILL)
    hub.proc.wait(10)
    assert _alive(roles["chp"]) and _alive(roles["singleuser"])  # orphans, for now

    hub.stop()
    assert not _alive(everything)
    assert hub.processes() == {}


def test_install_chp_uses_the_environment_named_by_tenancy_venv(chp_path, tmp_path, monkeypatch):
    """scripts/install-chp puts CHP in $TENANCY_VENV/node, as scripts/setup puts the package in
    $TENANCY_VENV: given an environment that already holds this lock file's install (a copy of
    the session's), it is found there, nothing is installed, and the checkout's .venv is not used."""
    prefix = Path(chp_path).parents[2]  # PREFIX/node_modules/.bin/configurable-http-proxy
    venv = tmp_path / "elsewhere"
    shutil.copytree(prefix, venv / "node", symlinks=True)
    monkeypatch.delenv("TENANCY_NODE_PREFIX", raising=False)
    path = install_chp(env={"TENANCY_VENV": str(venv)}, timeout=60)
    assert Path(path) == venv / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
