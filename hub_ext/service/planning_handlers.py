"""The capacity-planning API (issue 25): the recorded history as a scenario (admins), and usage per team."""

from __future__ import annotations

from tornado import web

from ..planning.history import recorded_scenario
from ..planning.period import parse_since
from ..planning.usage import BY, seen_by, usage
from ..quota.errors import ValidationError
from .handlers import APIHandler


class HistoryScenarioHandler(APIHandler):
    async def get(self):
        """``?since=7d`` (default: all that is kept): the scenario ``tenancy simulate`` replays."""
        if not self.identity.admin:
            raise web.HTTPError(403, "only admins may export the recorded history (it names every user's work)")
        since = self.get_argument("since", None)
        try:
            seconds = parse_since(since, "since") if since is not None else None
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None
        c = self.controller
        scenario = recorded_scenario(c, seconds, c.clock())
        if scenario is None:
            raise web.HTTPError(404, f"no work was recorded in the last {since}" if since else "no work was recorded yet")
        self.send(scenario)


class UsageHandler(APIHandler):
    async def get(self):
        """``?since=7d`` (default 7d) ``&by=team|user|leaf``: per group, resource-hours used, borrowed and
        lent, time below guarantee, waits and evictions; admins see every group, users their teams'."""
        since, by = self.get_argument("since", "7d"), self.get_argument("by", "team")
        if by not in BY:
            raise web.HTTPError(400, f"by: {by!r} is not one of {', '.join(BY)}")
        try:
            seconds = parse_since(since, "since")
        except ValidationError as err:
            raise web.HTTPError(400, str(err)) from None
        c = self.controller
        report = usage(c, seconds, c.clock(), by)
        if report is None:
            raise web.HTTPError(404, f"no work was recorded in the last {since}")
        self.send(seen_by(report, self.identity))


def planning_routes(api: str) -> list:
    return [(api + "/history/scenario", HistoryScenarioHandler), (api + "/usage", UsageHandler)]
