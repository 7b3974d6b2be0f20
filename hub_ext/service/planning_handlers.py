"""The capacity-planning API (issue 25): the recorded history as a scenario (admins), usage per team (JSON or
CSV), and the recorded history played under a proposed tree beside the tree in force (admins)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tornado import web

from ..planning.history import recorded_scenario
from ..planning.period import parse_since
from ..planning.usage import BY, seen_by, usage
from ..planning.usage_text import render
from ..quota.errors import ValidationError
from .handlers import APIHandler

# A comparison plays the history twice; a week of 10,000 workloads takes seconds (README, "Benchmark").
# Far beyond that something is wrong: the admin is told, and the processes are ended.
WHATIF_TIMEOUT_SECONDS = 600
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _since(text: str | None) -> float | None:
    try:
        return parse_since(text, "since") if text is not None else None
    except ValidationError as err:
        raise web.HTTPError(400, str(err)) from None


class HistoryScenarioHandler(APIHandler):
    async def get(self):
        """``?since=7d`` (default: all that is kept): the scenario ``tenancy simulate`` replays."""
        if not self.identity.admin:
            raise web.HTTPError(403, "only admins may export the recorded history (it names every user's work)")
        since = self.get_argument("since", None)
        seconds = _since(since)
        c = self.controller
        scenario = recorded_scenario(c, seconds, c.clock())
        if scenario is None:
            raise web.HTTPError(404, f"no work was recorded in the last {since}" if since else "no work was recorded yet")
        self.send(scenario)


class UsageHandler(APIHandler):
    async def get(self):
        """``?since=7d`` (default 7d) ``&by=team|user|leaf``: per group, resource-hours used, borrowed and
        lent, time below guarantee, waits and evictions; admins see every group, users their teams'.
        ``?format=csv`` (or ``Accept: text/csv``): the rows of ``tenancy usage --csv``, as a file to save."""
        since, by = self.get_argument("since", "7d"), self.get_argument("by", "team")
        if by not in BY:
            raise web.HTTPError(400, f"by: {by!r} is not one of {', '.join(BY)}")
        fmt = self.get_argument("format", None)
        if fmt not in (None, "json", "csv"):
            raise web.HTTPError(400, f"format: {fmt!r} is not json or csv")
        as_csv = fmt == "csv" or (fmt is None and "text/csv" in self.request.headers.get("Accept", ""))
        seconds = _since(since)
        c = self.controller
        report = usage(c, seconds, c.clock(), by)
        if report is None:
            raise web.HTTPError(404, f"no work was recorded in the last {since}")
        report = seen_by(report, self.identity)
        if not as_csv:
            self.send(report)
            return
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        name = f"tenancy-usage-{''.join(ch for ch in since if ch.isalnum())}-by-{by}.csv"
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        self.finish(render(report, "csv") + "\n")  # what `tenancy usage --csv` prints


class WhatifHandler(APIHandler):
    """``POST ?since=7d`` with a proposed ElasticQuotaTree as the body (JSON or YAML): the recorded history of
    the period played under the tree in force and under the proposed one (``tenancy whatif --json``'s rows)."""

    _one_at_a_time: asyncio.Lock | None = None

    async def post(self):
        if not self.identity.admin:
            raise web.HTTPError(403, "only admins may compare trees over the recorded history "
                                     "(it replays every team's work)")
        since = self.get_argument("since", "7d")
        seconds = _since(since)
        docs, _ = self.tree_body()
        c = self.controller
        scenario = recorded_scenario(c, seconds, c.clock())
        if scenario is None:
            raise web.HTTPError(404, f"no work was recorded in the last {since}, so there is nothing to compare")
        cls = type(self)
        if cls._one_at_a_time is None:
            cls._one_at_a_time = asyncio.Lock()
        async with cls._one_at_a_time:  # each comparison takes two cores: the next admin's waits its turn
            rows = await self._play(scenario, docs[0])
        self.send({"since": seconds, "rows": rows})

    async def _play(self, scenario: dict, tree: dict) -> list[dict]:
        """The plays in a process of their own (``whatif_child``): the service keeps answering meanwhile."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH"))
                                                           if p)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hub_ext.planning.whatif_child", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        job = json.dumps({"scenario": scenario, "tree": tree}, default=str).encode()
        try:
            out, err = await asyncio.wait_for(proc.communicate(job), WHATIF_TIMEOUT_SECONDS)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise web.HTTPError(503, f"the comparison took more than {WHATIF_TIMEOUT_SECONDS // 60} minutes and was "
                                     "stopped; try a shorter period") from None
        line = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        if proc.returncode == 1:  # the proposed tree cannot stand over this history (a namespace, a class)
            raise web.HTTPError(400, line[0])
        if proc.returncode != 0:
            self.controller.log.error("the what-if comparison failed (exit %s): %s", proc.returncode, line[0])
            raise web.HTTPError(500)
        return json.loads(out)


def planning_routes(api: str) -> list:
    return [(api + "/history/scenario", HistoryScenarioHandler), (api + "/usage", UsageHandler),
            (api + "/whatif", WhatifHandler)]
