"""The service's client of the hub API: caching and sharing of user lookups.

The hub here is a small tornado application answering ``/users/<name>`` on 127.0.0.1, so
that requests can be counted and held; the real hub answers the same requests in the hub tier
(tests/hub), where counting them is not possible."""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from hub_ext.service.hub import HubClient
from waiting import until


class _Users(web.RequestHandler):
    def initialize(self, asked, gate):
        self.asked, self.gate = asked, gate

    async def get(self, name):
        self.asked.append(name)
        await self.gate.wait()
        if name == "nobody":
            raise web.HTTPError(404)
        self.finish(json.dumps({"name": name, "groups": ["team-a"]}))


@pytest_asyncio.fixture
async def hub_api():
    asked, gate = [], asyncio.Event()
    app = web.Application([(r"/hub/api/users/([^/]+)", _Users, {"asked": asked, "gate": gate})])
    sockets = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/hub/api", asked, gate
    server.stop()


@pytest.mark.asyncio
async def test_callers_that_miss_the_cache_together_share_one_request(hub_api):
    url, asked, gate = hub_api
    hub = HubClient(url, "secret", cache_seconds=60)
    callers = [asyncio.ensure_future(hub.user("ann")) for _ in range(5)]
    await until(lambda: asked, "the hub to be asked")  # and held there: all five are waiting for it now
    gate.set()
    models = await asyncio.gather(*callers)
    assert asked == ["ann"]
    assert all(m == {"name": "ann", "groups": ["team-a"]} for m in models)
    assert await hub.user("ann") == models[0] and asked == ["ann"]  # cached
    assert await hub.user("ann", fresh=True) == models[0] and asked == ["ann", "ann"]  # asked again


@pytest.mark.asyncio
async def test_a_cancelled_caller_leaves_the_others_their_answer(hub_api):
    url, asked, gate = hub_api
    hub = HubClient(url, "secret", cache_seconds=60)
    first, second = asyncio.ensure_future(hub.user("bob")), asyncio.ensure_future(hub.user("bob"))
    await until(lambda: asked, "the hub to be asked")  # the request in flight, held there
    first.cancel()
    gate.set()
    assert (await second)["name"] == "bob"
    assert asked == ["bob"]


@pytest.mark.asyncio
async def test_an_unknown_user_is_none_and_cached_as_such(hub_api):
    url, asked, gate = hub_api
    gate.set()
    hub = HubClient(url, "secret", cache_seconds=60)
    assert await hub.user("nobody") is None
    assert await hub.user("nobody") is None
    assert asked == ["nobody"]


class _Hub(web.RequestHandler):
    """The hub API the service needs to answer ``/me``: the token's owner (5xx while ``fail`` is
    left), the user, no groups."""

    def initialize(self, seen, fail):
        self.seen, self.fail = seen, fail

    def get(self, what):
        self.seen.append(what)
        if what == "user" and self.fail:
            self.fail.pop()
            raise web.HTTPError(502)
        if what in ("groups", "users"):
            self.finish(json.dumps({"items": [], "_pagination": {"next": None}}))
            return
        self.finish(json.dumps({"kind": "user", "name": "ann", "admin": False, "groups": [],
                                "scopes": ["access:services!service=tenancy", "custom:tenancy:use"]}))


@pytest.mark.asyncio
@pytest.mark.parametrize("failures, status", [(1, 200), (2, 503)])
async def test_a_hub_that_fails_once_to_check_a_token_is_asked_again(tmp_path, failures, status):
    """The real service (a process) in front of a hub that answers 502 to a token check ``failures``
    times: once is asked again after a moment (the user gets their answer), twice is the 503 the
    user may retry. (A small tornado hub: the real one cannot be made to fail once on demand.)"""
    import os
    import sys

    from tornado.httpclient import AsyncHTTPClient

    seen, fail = [], [True] * failures
    app = web.Application([(r"/hub/api/(user|users|groups|users/ann)", _Hub, {"seen": seen, "fail": fail})])
    sockets = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets(sockets)
    hub_port = sockets[0].getsockname()[1]
    port_socket = bind_sockets(0, "127.0.0.1")[0]
    port = port_socket.getsockname()[1]
    port_socket.close()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")},
           "JUPYTERHUB_API_URL": f"http://127.0.0.1:{hub_port}/hub/api", "JUPYTERHUB_API_TOKEN": "s" * 32,
           "JUPYTERHUB_SERVICE_PREFIX": "/services/tenancy/", "JUPYTERHUB_SERVICE_NAME": "tenancy"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hub_ext.cli", "serve", "--port", str(port), "--db", f"sqlite:///{tmp_path}/t.sqlite",
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    client = AsyncHTTPClient()
    url = f"http://127.0.0.1:{port}/services/tenancy/api/v1"
    try:
        async def healthy():
            try:
                return (await client.fetch(url + "/health", raise_error=False)).code == 200
            except OSError:
                return False
        await until(healthy, "the service to answer /health", timeout=60)
        resp = await client.fetch(url + "/me", headers={"Authorization": "token " + "t" * 32}, raise_error=False)
        assert resp.code == status, resp.body
        assert seen.count("user") == 2  # the token check, and once again
        if status == 503:
            assert "the hub cannot confirm who you are" in json.loads(resp.body)["error"]
    finally:
        proc.kill()
        await proc.wait()
        server.stop()
