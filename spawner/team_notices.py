"""What the hub's home page tells admins about the teams (spawner/templates/home.html): a group whose new
properties the service refused (it keeps the team on its last good ones) or that cannot be used at all,
with the property and the fix, as the service's ``/tenants`` says.

The hub renders its pages synchronously while the service is asked over HTTP: the banner shows the
service's last answer, and a view that finds the answer older than ``max_age`` seconds asks again in the
background (the next view shows it). The spawn form's own ask (``_team_status``) refreshes it too.
"""

from __future__ import annotations

import asyncio
import time

from hub_ext.vocabulary import sentence


class TeamNotices:
    def __init__(self, max_age: float = 5.0):
        self.max_age = max_age
        self.tenants: list[dict] = []
        self.time = 0.0
        self._asking: asyncio.Future | None = None

    def update(self, tenants: list[dict]) -> None:
        self.tenants, self.time = list(tenants), time.monotonic()

    def lines(self, ask) -> list[dict]:
        """The banner's lines from the last answer; ``ask`` (a coroutine function returning the tenants or
        None) is started when that answer is stale and no ask is under way."""
        if time.monotonic() - self.time > self.max_age and (self._asking is None or self._asking.done()):
            try:
                self._asking = asyncio.ensure_future(self._ask(ask))
            except RuntimeError:  # no loop (a template rendered outside the hub): the last answer only
                self._asking = None
        return notice_lines(self.tenants)

    async def _ask(self, ask) -> None:
        tenants = await ask()
        if tenants is not None:
            self.update(tenants)


def notice_lines(tenants: list[dict]) -> list[dict]:
    """One line per wrong property: the group, whether its members keep working, the error and its fix."""
    out = []
    for t in tenants:
        if t.get("keptLastGood"):
            for error, fix in zip(t.get("rejected") or [], t.get("rejectedFixes") or []):
                out.append({"group": t["group"], "kept": True,
                            "title": f"Group {t['group']}: its new properties were refused.",
                            "text": f"{sentence(error)} Its members keep its last good properties until this is "
                                    f"fixed. {fix}"})
        else:
            for error, fix in zip(t.get("errors") or [], t.get("fixes") or []):
                out.append({"group": t["group"], "kept": False,
                            "title": f"Group {t['group']} cannot be used as a team.",
                            "text": f"{sentence(error)} Its members cannot start servers in it. {fix}"})
    return out


#: The hub's one service answer, shared by every spawner of the hub process.
NOTICES = TeamNotices()
