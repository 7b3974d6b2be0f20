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
