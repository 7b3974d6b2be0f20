"""The one client of the service's API (hub_ext.apiclient): both transports make the same requests, read the
same answers and fail with the same exceptions.

The service here is a small tornado application on 127.0.0.1 answering as the real one
does (its JSON errors, its event stream); the real service answers the same calls in the
hub tier (tests/hub: the CLI, the notebook, the Lab extension and the spawner)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import pytest_asyncio
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.iostream import StreamClosedError
from tornado.netutil import bind_sockets

from hub_ext.apiclient import ServiceDown, ServiceRefused, TenancyClient, TenancyError
from hub_ext.apiclient.aio import AsyncTenancyClient
from hub_ext.apiclient.events import EventParser

TOKEN = "t" * 32


class _Service(web.RequestHandler):
    """Answers what it was asked: method, path with query, token, body; or an error on cue."""

    def initialize(self, asked):
        self.asked = asked

    def _answer(self, path):
        self.asked.append((self.request.method, self.request.uri.split("/api/v1", 1)[1],
                           self.request.headers.get("Authorization"), self.request.body))
        if path.endswith("refuse"):
            self.set_status(403)
            return self.finish(json.dumps({"error": "alice is not a member of tenant team-c"}))
        if path.endswith("fail"):
            self.set_status(500)
            return self.finish("it broke")
        if path == "workloads" and self.request.method == "GET":
            return self.finish(json.dumps({"workloads": [{"id": "ab12"}]}))
        if path == "datasets":
            return self.finish(json.dumps({"datasets": [{"name": "fashion-mnist"}]}))
        if path.endswith("/logs"):
            return self.finish("step 1\n")
        self.finish(json.dumps({"path": path}))

    get = post = put = delete = _answer


class _Events(web.RequestHandler):
    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        for chunk in ('data: {"type": "workload", ', '"workload": {"id": "ab12"}}\n\n', ": keep-alive\n\n",
                      "data: not json\n\n", 'data: {"type": "tree"}\n\n'):
            self.write(chunk)
            await self.flush()
            await asyncio.sleep(0.05)


@pytest_asyncio.fixture
async def service():
    asked = []
    app = web.Application([(r"/api/v1/events", _Events), (r"/api/v1/(.*)", _Service, {"asked": asked})])
    sockets = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets(sockets)
    yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}/api/v1", asked
    server.stop()


async def both(url, call):
    """``call(client)`` with the synchronous client (in a thread) and with the asynchronous one."""
    sync = await asyncio.to_thread(call, TenancyClient(url, TOKEN))
    return sync, await call(AsyncTenancyClient(url, TOKEN))


@pytest.mark.asyncio
async def test_both_clients_make_the_same_calls_and_read_the_same_answers(service):
    url, asked = service
    assert await both(url, lambda c: c.me()) == ({"path": "me"},) * 2
    assert await both(url, lambda c: c.workloads(kind="notebook", mine="true", limit=100)) == ([{"id": "ab12"}],) * 2
    assert await both(url, lambda c: c.logs("ab12", pod="p-0")) == ("step 1\n",) * 2
    await both(url, lambda c: c.submit(dry_run=True, name="x", tenant=None))
    await both(url, lambda c: c.cancel("ab12", by_spawner=True))
    sync, aio = asked[::2], asked[1::2]
    assert sync == aio
    assert [a[:2] for a in sync] == [("GET", "/me"), ("GET", "/workloads?kind=notebook&mine=true&limit=100"),
                                     ("GET", "/workloads/ab12/logs?pod=p-0"), ("POST", "/workloads?dryRun=true"),
                                     ("DELETE", "/workloads/ab12?by=spawner")]
    assert all(a[2] == f"token {TOKEN}" for a in sync) and json.loads(sync[3][3]) == {"name": "x"}


@pytest.mark.asyncio
async def test_both_clients_read_and_write_datasets_and_submit_naming_them(service):
    url, asked = service
    manifest = {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
                "spec": {"namespaces": ["team-a"], "source": {"path": "/srv/fashion"}}}
    assert await both(url, lambda c: c.datasets()) == ([{"name": "fashion-mnist"}],) * 2
    assert await both(url, lambda c: c.dataset("fashion-mnist")) == ({"path": "datasets/fashion-mnist"},) * 2
    await both(url, lambda c: c.put_dataset(manifest, dry_run=True))
    await both(url, lambda c: c.put_dataset(json.dumps(manifest).encode()))
    await both(url, lambda c: c.delete_dataset("a/b"))  # a name is one segment of the path, whatever it holds
    await both(url, lambda c: c.submit(name="x", datasets=["fashion-mnist:/data", {"name": "b", "mountPath": "/b"}]))
    sync, aio = asked[::2], asked[1::2]
    assert sync == aio
    assert [a[:2] for a in sync] == [("GET", "/datasets"), ("GET", "/datasets/fashion-mnist"),
                                     ("PUT", "/datasets/fashion-mnist?dryRun=true"),
                                     ("PUT", "/datasets/fashion-mnist"), ("DELETE", "/datasets/a%2Fb"),
                                     ("POST", "/workloads")]
    assert json.loads(sync[2][3]) == manifest and json.loads(sync[3][3]) == manifest
    assert json.loads(sync[5][3])["datasets"] == ["fashion-mnist:/data", {"name": "b", "mountPath": "/b"}]


@pytest.mark.asyncio
async def test_submit_training_and_the_train_magic_name_datasets_as_arenas_data_flag(service):
    from hub_ext.client.api import submit_training
    from hub_ext.client.magic import _parser

    url, asked = service
    chosen = _parser().parse_args(["--cpu", "1", "--data", "fashion-mnist", "--data", "scratch:/scratch"]).data
    assert chosen == ["fashion-mnist", "scratch:/scratch"]
    client = TenancyClient(url, TOKEN)
    await asyncio.to_thread(submit_training, ["python", "t.py"], datasets=chosen, client=client, show=False)
    await asyncio.to_thread(submit_training, ["python", "t.py"], client=client, show=False, yes=True)
    dry, real, plain = (json.loads(a[3]) for a in asked if a[0] == "POST")
    assert dry["datasets"] == real["datasets"] == ["fashion-mnist", "scratch:/scratch"]
    assert "datasets" not in plain  # not named: the service mounts every ready dataset of the team
    with pytest.raises(TenancyError, match="dataset 'scratch:scratch': the path 'scratch' must be absolute"):
        submit_training(["true"], datasets=["scratch:scratch"], client=client, show=False)
    assert len(asked) == 3  # refused before anything was sent


@pytest.mark.asyncio
async def test_a_refusal_carries_the_services_sentence_and_an_outage_says_where(service):
    url, _ = service
    for err in await both(url, lambda c: _raised(c.get, "refuse")):
        assert isinstance(err, ServiceRefused) and err.status == 403
        assert err.sentence == "alice is not a member of tenant team-c"
        assert str(err) == "alice is not a member of tenant team-c (HTTP 403)"
    for err in await both(url, lambda c: _raised(c.get, "fail")):
        assert isinstance(err, ServiceDown) and (str(err), err.status, err.sentence) == ("it broke (HTTP 500)", 500, "")
    dead = url.replace(url.split(":")[2].split("/")[0], "1")  # port 1: nothing listens
    for err in await both(dead, lambda c: _raised(c.me)):
        assert isinstance(err, ServiceDown) and err.status is None
        assert str(err).startswith(f"the tenancy service at {dead} is unreachable: ")


def _raised(call, *args):
    """The exception ``call`` raises, for both transports alike (a coroutine's once awaited)."""
    try:
        result = call(*args)
    except TenancyError as err:
        return err
    if asyncio.iscoroutine(result):
        async def awaited():
            try:
                await result
            except TenancyError as err:
                return err
        return awaited()
    raise AssertionError(f"no error: {result!r}")


@pytest.mark.asyncio
async def test_both_clients_read_the_event_stream_alike(service):
    url, _ = service
    sync = await asyncio.to_thread(lambda: list(TenancyClient(url, TOKEN).events()))
    aio = []
    await AsyncTenancyClient(url, TOKEN).events(aio.append, lambda: False)
    expected = [{"type": "workload", "workload": {"id": "ab12"}}, None, {"type": "tree"}]
    assert sync == [None] + expected  # the first None: connected
    assert aio == expected


class _EndlessEvents(web.RequestHandler):
    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        try:
            while True:
                self.write(": keep-alive\n\n")
                await self.flush()
                await asyncio.sleep(0.02)
        except StreamClosedError:
            self.application.settings["closed"].set()


@pytest.mark.asyncio
async def test_a_stream_its_reader_left_is_dropped_without_a_word_in_the_log(caplog):
    """A Lab page closed: the stream is dropped at the next thing the service sends, the service sees
    it closed, and nothing is logged (tornado logged an uncaught exception with its traceback)."""
    closed = asyncio.Event()
    app = web.Application([(r"/api/v1/events", _EndlessEvents)], closed=closed)
    sockets = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets(sockets)
    seen = []
    try:
        with caplog.at_level(logging.DEBUG):
            await asyncio.wait_for(AsyncTenancyClient(f"http://127.0.0.1:{sockets[0].getsockname()[1]}/api/v1", TOKEN)
                                   .events(seen.append, lambda: len(seen) >= 3), 60)
            await asyncio.wait_for(closed.wait(), 60)
    finally:
        server.stop()
    assert seen == [None, None, None]
    client_side = [r for r in caplog.records if r.name.startswith("tornado") and "Uncaught" in r.getMessage()
                   or "Malformed" in r.getMessage() or r.exc_info]
    assert client_side == [], [r.getMessage() for r in client_side]


def test_events_may_arrive_in_any_pieces():
    parser = EventParser()
    assert parser.feed(b'data: {"a":') == [] and parser.feed(b' 1}\n') == []
    assert parser.feed(b"\n: keep-alive\n\ndata: [1,\ndata: 2]\n\n") == [{"a": 1}, None, [1, 2]]
