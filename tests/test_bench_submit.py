"""The cluster benchmark's submits reach the service as the hub's proxy sends them: over connections
kept open between requests, not a new one per submit (each cost the service CPU of its own)."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from hub_ext.bench.hubproc import API
from hub_ext.bench.kube import BenchError
from hub_ext.bench.service_load import submit_all, training


class Workloads(web.RequestHandler):
    def post(self):
        seen = self.settings["seen"]
        seen["connections"].add(id(self.request.connection.stream))  # one per TCP connection
        if self.request.headers.get("Authorization") == "token refused":
            raise web.HTTPError(403, "not your namespace")
        body = json.loads(self.request.body)
        seen["bodies"].append((self.request.headers["Authorization"], body))
        self.set_status(201)
        self.finish({"id": f"{len(seen['bodies']):08x}", "state": "Pending"})


@pytest_asyncio.fixture
async def service():
    seen = {"connections": set(), "bodies": []}
    sock, port = bind_unused_port()
    server = HTTPServer(web.Application([(API + "/workloads", Workloads)], seen=seen))
    server.add_sockets([sock])
    yield f"http://127.0.0.1:{port}", seen
    server.stop()
    await server.close_all_connections()


@pytest.mark.asyncio
async def test_each_users_submits_share_their_kept_open_connections(service):
    url, seen = service
    jobs = [(("alice", "bob")[i % 2], f"ns-{i % 2}", training(f"job-{i}", "100m", "64Mi")) for i in range(40)]
    out = await submit_all(url, jobs, per_user=2)
    assert len(out["latencies"]) == len(out["ids"]) == len(set(out["ids"])) == 40
    assert out["states"] == ["Pending"] * 40
    assert len(seen["connections"]) <= 4  # two users, two connections each, for 40 submits
    # every job of each user was sent (two connections each: not in a fixed order), into their namespace
    first = [b["name"] for token, b in seen["bodies"] if token == "token alice"]
    assert sorted(first, key=lambda n: int(n.split("-")[1])) == [f"job-{i}" for i in range(0, 40, 2)]
    assert all(b["namespace"] == "ns-1" for token, b in seen["bodies"] if token == "token bob")


@pytest.mark.asyncio
async def test_a_refused_submit_is_one_line_with_the_services_words(service):
    url, _ = service
    with pytest.raises(BenchError, match=r"^a submit was refused \(403\): "):
        await submit_all(url, [("refused", "ns-0", training("job-0", "100m", "64Mi"))])
