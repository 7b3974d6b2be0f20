"""``FakeService``: what the Lab server extension's tests put in the tenancy service's place (a
small tornado application on 127.0.0.1 answering the service's API as each test says; see
conftest.py for why a fake), and ``read_events``, the page's side of the event stream."""

from __future__ import annotations

import asyncio
import json

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

#: the token the single-user server has from the hub (``JUPYTERHUB_API_TOKEN``)
TOKEN = "server-token-of-alice"
PREFIX = "/services/tenancy/api/v1"


class FakeService:
    """What the tenancy service answers, settable per test; what it was asked, and by whom."""

    def __init__(self):
        self.me = {"name": "alice", "tenants": [], "workloads": [], "notices": []}
        self.tree = {"tree": None, "quota": {}}
        self.workloads: dict[str, dict] = {}
        self.logs: dict[str, str] = {}
        self.refusal: tuple[int, str] | None = None  # (status, sentence) for every workload call
        self.failing = False  # 500 on every call
        self.asked: list[tuple[str, str, str, bytes]] = []  # (method, path with query, Authorization, body)
        self.listeners: set[asyncio.Queue] = set()
        self.url, self.server = "", None  # set by serve()

    async def stop(self) -> None:
        """Stop listening and drop every connection: a service that is gone."""
        self.server.stop()
        await self.server.close_all_connections()

    def push(self, event: dict) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(event)


def serve(fake: FakeService) -> FakeService:
    """``fake`` listening on 127.0.0.1 (on the current loop), its ``url`` set."""
    routes = [("/me", _Me), ("/tree", _Tree), ("/workloads", _Workloads), ("/workloads/([0-9a-f]+)", _Workload),
              ("/workloads/([0-9a-f]+)/logs", _Logs), ("/events", _Events)]
    app = web.Application([(PREFIX + path, handler, {"service": fake}) for path, handler in routes])
    sockets = bind_sockets(0, "127.0.0.1")
    fake.server = HTTPServer(app)
    fake.server.add_sockets(sockets)
    fake.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}{PREFIX}"
    return fake


class _Handler(web.RequestHandler):
    def initialize(self, service: FakeService):
        self.service = service

    def prepare(self):
        s = self.service
        s.asked.append((self.request.method, self.request.uri.removeprefix(PREFIX),
                        self.request.headers.get("Authorization", ""), self.request.body))
        if s.failing:
            raise web.HTTPError(500)

    def answer(self, body, status: int = 200):
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def refused(self) -> bool:
        if self.service.refusal is None:
            return False
        status, sentence = self.service.refusal
        self.answer({"error": sentence}, status)
        return True


class _Me(_Handler):
    def get(self):
        self.answer(self.service.me)


class _Tree(_Handler):
    def get(self):
        self.answer(self.service.tree)


class _Workloads(_Handler):
    def post(self):
        if self.refused():
            return
        spec = json.loads(self.request.body)
        if self.get_argument("dryRun", "") == "true":
            return self.answer({"dryRun": True, "state": "Pending", "evictions": []})
        wl = {"id": f"{len(self.service.workloads) + 1:04x}", "user": "alice", "state": "Running", **spec}
        self.service.workloads[wl["id"]] = wl
        self.answer(wl, 201)


class _Workload(_Handler):
    def get(self, wid):
        if not self.refused():
            self.answer(self.service.workloads[wid])

    def delete(self, wid):
        if not self.refused():
            self.answer({**self.service.workloads[wid], "state": "Cancelled"})


class _Logs(_Handler):
    def get(self, wid):
        if self.refused():
            return
        self.set_header("Content-Type", "text/plain")
        self.finish(self.service.logs[wid])


class _Events(_Handler):
    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        queue: asyncio.Queue = asyncio.Queue()
        self.service.listeners.add(queue)
        try:
            self.write(": connected\n\n")
            await self.flush()
            while True:
                self.write(f"data: {json.dumps(await queue.get())}\n\n")
                await self.flush()
        except Exception:  # noqa: BLE001 - the extension went away, or the test ended
            pass
        finally:
            self.service.listeners.discard(queue)


class _Enough(Exception):
    """Raised in a stream's callback once the test has the events it reads."""


async def read_events(jp_fetch, count: int, *, then=None, timeout: float = 60) -> list[tuple[str, dict]]:
    """The first ``count`` (event, data) pairs of ``tenancy/api/events``, or all of them if the
    stream ends first; ``then(events)`` is called after each event (it may act on what it saw)."""
    events: list[tuple[str, dict]] = []
    pending = b""

    def on_chunk(chunk: bytes) -> None:
        nonlocal pending
        pending += chunk
        while b"\n\n" in pending:
            block, pending = pending.split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.decode().splitlines() if ": " in line)
            if "data" in fields:
                events.append((fields.get("event", "message"), json.loads(fields["data"])))
                if then is not None:
                    then(events)
        if len(events) >= count:
            raise _Enough()

    try:
        await jp_fetch("tenancy", "api", "events", streaming_callback=on_chunk, request_timeout=timeout)
    except Exception as err:  # noqa: BLE001 - the callback's _Enough, behind what the client makes of it
        cause = err
        while cause is not None and not isinstance(cause, _Enough):
            cause = cause.__context__
        if cause is None:
            raise
    return events
