"""When the service must stop on its own: its hub is gone, or its database lock is lost.

A managed service (started by the hub) outliving its hub keeps an old token and holds the
port and the database that the hub's next instance of the service needs. Signals, checked
every second (the hub's API every ``check_seconds``):

- the parent process changed: the hub that started us exited (SIGKILL included); this is
  the signal that fires first after ``kill -9`` of the hub (checked every second);
- the hub's API refuses our token (403/401): a new hub with a new token, or a revoked one;
- the hub's API has been unreachable for longer than ``grace_seconds`` (no answer at all:
  refused connections, timeouts; a 5xx is an answer);
- the database lock is lost (the PostgreSQL connection that held it is gone, or the lock
  file was removed): another instance may have it now.
"""

from __future__ import annotations

import asyncio
import os
import time

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest


def hub_parent() -> int | None:
    """The parent's pid when the parent is JupyterHub (its command line names jupyterhub)."""
    ppid = os.getppid()
    if ppid <= 1:
        return None
    try:
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    return ppid if any(os.path.basename(a).startswith("jupyterhub") for a in argv[:3]) else None


class Watchdog:
    def __init__(self, *, parent: int | None, hub=None, lock=None, grace_seconds: float = 30.0,
                 check_seconds: float = 5.0, log=None):
        """``parent``: the pid whose end ends the service (None: not watched); ``hub``: a callable
        returning ``(api_url, token)`` or None while unknown (None: not watched); ``lock``: an
        object with ``alive()``."""
        self.parent, self.hub, self.lock = parent, hub, lock
        self.grace_seconds, self.check_seconds = grace_seconds, check_seconds
        self.log = log
        self._unreachable_since: float | None = None
        self._next_check = 0.0

    async def wait(self) -> tuple[str, int]:
        """Return ``(why, exit status)`` when the service should stop; never returns otherwise."""
        while True:
            if self.parent is not None and os.getppid() != self.parent:
                return f"the hub that started this service (pid {self.parent}) has exited", 0
            if time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + self.check_seconds
                if self.lock is not None and not await asyncio.to_thread(self.lock.alive):
                    return "the database lock is lost (its connection or file is gone); another instance may hold it", 1
                why = None if self.hub is None else await self._check_hub()
                if why is not None:
                    return why, 1
            await asyncio.sleep(1)

    async def _check_hub(self) -> str | None:
        where = self.hub()
        if not where or not where[0] or not where[1]:
            return None
        api_url, token = where
        req = HTTPRequest(api_url.rstrip("/") + "/user", headers={"Authorization": f"token {token}"},
                          request_timeout=min(10.0, max(self.grace_seconds, 1.0)))
        resp, error = None, None
        try:
            resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        except (OSError, HTTPClientError, asyncio.TimeoutError) as err:
            error = err
        if resp is not None and resp.code != 599:
            self._unreachable_since = None
            if resp.code in (401, 403):
                return f"the hub at {api_url} no longer accepts this service's token (HTTP {resp.code}: " \
                       "a new hub made a new one, or it was revoked)"
            return None
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
            if self.log is not None:
                self.log.warning("the hub API at %s does not answer (%s); the service exits if it stays so for %.0f s",
                                 api_url, getattr(resp, "error", None) or error, self.grace_seconds)
        elif now - self._unreachable_since >= self.grace_seconds:
            return f"the hub API at {api_url} has not answered for {now - self._unreachable_since:.0f} s"
        return None
