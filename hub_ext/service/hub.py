"""The service's calls to the JupyterHub REST API, with its own token (a managed service's)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest


class HubError(Exception):
    pass


# -- the service's own token ----------------------------------------------------------
# The hub hands a managed service its token in JUPYTERHUB_API_TOKEN. Removing it from
# os.environ leaves it in /proc/<pid>/environ, which every process of the same account can
# read, so the service re-executes itself at start without it, and takes the token from
# a pipe it inherits instead (``take_hub_token``).
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
TOKEN_FD_ENV = "TENANCY_HUB_TOKEN_FD"
_token: str | None = None


def take_hub_token() -> None:
    """Make the hub token this process's own, out of its environment; call first thing at start.

    With ``JUPYTERHUB_API_TOKEN`` in the environment: re-execute this same command line
    without it (and without the legacy ``JPY_API_TOKEN``), the token written to a pipe
    whose read end the new image inherits (named by ``TENANCY_HUB_TOKEN_FD``). In the new
    image (or when the token came that way): read it and close the pipe. Without a token
    (no hub): nothing to do.
    """
    global _token
    fd = os.environ.pop(TOKEN_FD_ENV, None)
    if fd is not None:
        with os.fdopen(int(fd), "rb") as pipe:
            _token = pipe.read().decode()
        return
    token = os.environ.get(TOKEN_ENV) or os.environ.get("JPY_API_TOKEN")
    if not token:
        return
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, "JPY_API_TOKEN")}
    read, write = os.pipe()
    os.write(write, token.encode())  # far below a pipe's capacity: never blocks
    os.close(write)
    os.set_inheritable(read, True)
    env[TOKEN_FD_ENV] = str(read)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, env)
    except OSError as err:  # carry on; the token stays readable in /proc/<pid>/environ
        os.close(read)
        print(f"tenancy serve: could not restart without the hub token in the environment: {err}", file=sys.stderr)
        _token = token
        os.environ.pop(TOKEN_ENV, None)


def hub_token() -> str:
    """The service's hub token: taken in by ``take_hub_token``, else from the environment (in-process use)."""
    return _token if _token is not None else os.environ.get(TOKEN_ENV, "")


class HubClient:
    """Groups (with properties and members), users, and stopping a user's server."""

    def __init__(self, api_url: str | None = None, token: str | None = None, *, cache_seconds: float = 5.0):
        self.api_url = (api_url or os.environ.get("JUPYTERHUB_API_URL", "")).rstrip("/")
        self.token = token or hub_token()
        self.cache_seconds = cache_seconds
        self._groups: tuple[float, list] | None = None
        self._users: dict[str, tuple[float, dict]] = {}
        self._asking: dict[str, asyncio.Future] = {}  # name -> the request for it in flight

    @property
    def configured(self) -> bool:
        return bool(self.api_url and self.token)

    async def request(self, method: str, path: str, body=None, *, ok=(200, 201, 202, 204)) -> object:
        req = HTTPRequest(
            self.api_url + path, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json",
                     "Accept": "application/jupyterhub-pagination+json"},
            body=None if body is None else json.dumps(body), allow_nonstandard_methods=True,
            request_timeout=30,
        )
        try:
            resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        except (OSError, HTTPClientError) as err:
            raise HubError(f"the hub API at {self.api_url} is unreachable: {err}") from None
        if resp.code not in ok:
            raise HubError(f"hub API {method} {path} answered {resp.code}: {resp.body[:200]!r}")
        return json.loads(resp.body) if resp.body else None

    async def _paginated(self, path: str) -> list:
        items, offset = [], 0
        while True:
            sep = "&" if "?" in path else "?"
            page = await self.request("GET", f"{path}{sep}offset={offset}&limit=200")
            if isinstance(page, list):  # a hub that does not paginate
                return page
            items.extend(page["items"])
            nxt = (page.get("_pagination") or {}).get("next")
            if not nxt:
                return items
            offset = nxt["offset"]

    async def groups(self, *, fresh: bool = False) -> list[dict]:
        now = time.monotonic()
        if fresh or self._groups is None or now - self._groups[0] > self.cache_seconds:
            self._groups = (now, await self._paginated("/groups"))
        return self._groups[1]

    async def user(self, name: str, *, fresh: bool = False) -> dict | None:
        """The hub's model of ``name`` (None: unknown, or the hub did not answer), at most
        ``cache_seconds`` old (``fresh``: asked now). Callers that miss the cache together share one
        request: a burst of one user's submits asks the hub once, not once per connection."""
        cached = self._users.get(name)
        if not fresh and cached is not None and time.monotonic() - cached[0] <= self.cache_seconds:
            return cached[1]
        pending = None if fresh else self._asking.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._ask_user(name))
            if not fresh:
                self._asking[name] = pending
                pending.add_done_callback(lambda done, name=name: self._asking.pop(name, None)
                                          if self._asking.get(name) is done else None)
        return await asyncio.shield(pending)  # one caller's cancellation leaves the others their answer

    async def _ask_user(self, name: str) -> dict | None:
        now = time.monotonic()
        try:
            model = await self.request("GET", f"/users/{quote(name)}")
        except HubError:
            model = None
        self._users[name] = (now, model)
        return model

    async def users(self) -> list[dict]:
        """Every user's model (with ``user_info``: needs list:users and read:users:name)."""
        return await self._paginated("/users")

    async def stop_server(self, user: str, server: str = "") -> None:
        path = f"/users/{quote(user)}/servers/{quote(server)}" if server else f"/users/{quote(user)}/server"
        await self.request("DELETE", path, ok=(202, 204, 400, 404))

    async def active_servers(self) -> set[tuple[str, str]]:
        """``(user, server name)`` of every server the hub runs or is starting (needs list:users, read:servers)."""
        active = set()
        for model in await self._paginated("/users?state=active"):
            for name, spawner in (model.get("servers") or {}).items():
                if spawner.get("ready") or spawner.get("pending"):
                    active.add((model["name"], name or ""))
        return active

    async def server_running(self, user: str, server: str = "") -> bool:
        model = await self.user(user, fresh=True)
        if not model:
            return False
        spawner = (model.get("servers") or {}).get(server)
        return bool(spawner and (spawner.get("ready") or spawner.get("pending")))
