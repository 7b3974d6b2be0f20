"""``TenancyClient``: the API's calls over the standard library, so any kernel and the command line have it."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Iterator

from .calls import Call, Calls, environment, headers
from .errors import TenancyError, refusal, unreachable
from .events import EventParser

#: The service sends a keep-alive every 15 s; a silent minute means the connection is dead.
READ_TIMEOUT = 60


class TenancyClient(Calls):
    """Inside a single-user server the URL and token come from its environment; elsewhere pass them."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30):
        env_url, env_token = environment()
        self.url = (url or env_url).rstrip("/")
        self.token = token or env_token
        self.timeout = timeout
        if not self.url:
            raise TenancyError("TENANCY_API_URL is not set: run this inside a hub notebook, or pass url=")
        if not self.token:
            raise TenancyError("JUPYTERHUB_API_TOKEN is not set: run this inside a hub notebook, or pass token=")

    def _open(self, call: Call, accept: str = "application/json", timeout: float | None = None):
        req = urllib.request.Request(self.url + call.path, data=call.body, method=call.method,
                                     headers=headers(self.token, accept))
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as err:
            raise refusal(err.code, err.read(), err.reason) from None
        except (urllib.error.URLError, OSError) as err:
            raise unreachable(self.url, getattr(err, "reason", err)) from None

    def _send(self, call: Call):
        with self._open(call) as resp:
            try:
                payload = resp.read()
            except OSError as err:
                raise unreachable(self.url, err) from None
        return call.read(payload)

    def events(self) -> Iterator[dict | None]:
        """The service's events as they come, until it ends the stream (ServiceDown when the connection fails).

        None says the stream is alive: once at once when connected, then at each keep-alive.
        """
        resp = self._open(Call("GET", "/events"), accept="text/event-stream", timeout=READ_TIMEOUT)
        with resp:
            yield None
            parser = EventParser()
            try:
                for line in resp:
                    yield from parser.feed(line)
            except OSError as err:
                raise unreachable(self.url, err) from None
