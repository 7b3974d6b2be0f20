"""``POST /api/v1/tenants/{group}/check``: would these properties of a hub group make a good team?

The hub asks before it stores what an admin saved in its admin panel (``hub_ext.group_properties``),
so that a typo is refused where it is made instead of found later in a banner. The body is
``{"properties": {...}, "profiles": ["small", ...]}`` (``profiles``: the hub's notebook profiles,
which the service does not know; left out, they are not checked). The answer is
``{"group", "valid", "errors", "fixes", "message"}``, ``message`` the one line the admin reads.
Admins only (the hub asks with the service's own token); nothing is stored.
"""

from __future__ import annotations

from tornado import web

from ..tenants import check_properties, refusal
from .handlers import APIHandler

#: More than any hub's profile list; a longer one is not a profile list.
MAX_PROFILES = 500


class GroupCheckHandler(APIHandler):
    async def post(self, group: str):
        if not self.identity.admin:
            raise web.HTTPError(403, "only admins may check a group's properties")
        body = self.body()
        properties = body.get("properties") if isinstance(body, dict) else None
        profiles = body.get("profiles", []) if isinstance(body, dict) else None
        if not isinstance(properties, dict):
            raise web.HTTPError(400, 'the body is {"properties": {...}, "profiles": [...]}: properties must be an object')
        if not isinstance(profiles, list) or len(profiles) > MAX_PROFILES \
                or not all(isinstance(p, str) and p for p in profiles):
            raise web.HTTPError(400, f"profiles must be a list of at most {MAX_PROFILES} profile slugs")
        c = self.controller
        problems = check_properties(group, properties, c.tenants, c.base_tree, c.engine.classes.by_name, profiles)
        self.send({"group": group, "valid": not problems, "errors": [e for e, _ in problems],
                   "fixes": [f for _, f in problems], "message": refusal(group, problems) if problems else ""})


def group_check_routes(api: str) -> list:
    return [(api + "/tenants/([^/]+)/check", GroupCheckHandler)]
