"""Calls to the tenancy scheduler service with this server's own hub token."""

from __future__ import annotations

import json
import os
from typing import Callable

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

#: A stream stays open for as long as the page does; keep-alives arrive every 15 s.
STREAM_SECONDS = 24 * 3600


class ServiceDown(Exception):
    """The service could not be reached, or failed; ``str()`` is the detail, for the log."""


class ServiceRefused(Exception):
    """The service answered with an error (a 4xx): its own sentence, and the status to pass on."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


#: What the page says when the service is down (the technical detail goes to the server's log).
DOWN = ("The tenancy scheduler cannot be reached right now, so your team's quota and jobs are not shown. "
        "Your notebook keeps working; this comes back by itself when the scheduler answers again.")


class Upstream:
    def __init__(self, url: str | None = None, token: str | None = None):
        self.url = (url if url is not None else os.environ.get("TENANCY_API_URL", "")).rstrip("/")
        self.token = token if token is not None else (
            os.environ.get("JUPYTERHUB_API_TOKEN") or os.environ.get("JPY_API_TOKEN") or "")

    @property
    def configured(self) -> bool:
        return bool(self.url and self.token)

    def _request(self, method: str, path: str, body: bytes | None = None, *, accept: str = "application/json",
                 **kw) -> HTTPRequest:
        headers = {"Authorization": f"token {self.token}", "Content-Type": "application/json", "Accept": accept}
        return HTTPRequest(self.url + path, method=method, body=body, allow_nonstandard_methods=True,
                           headers=headers, **{"connect_timeout": 5, "request_timeout": 30, **kw})

    async def call(self, method: str, path: str, body: bytes | None = None, *, raw: bool = False):
        """The service's answer (JSON, or text with ``raw``); ServiceRefused for a 4xx, ServiceDown otherwise."""
        try:
            resp = await AsyncHTTPClient().fetch(self._request(method, path, body))
        except HTTPClientError as err:
            if err.response is not None and 400 <= err.code < 500:
                raise ServiceRefused(_error_of(err.response.body) or f"the scheduler refused (HTTP {err.code})",
                                     err.code) from None
            if err.response is not None and err.code == 503:
                raise ServiceDown(_error_of(err.response.body) or "it answered 503") from None
            raise ServiceDown(f"HTTP {err.code}") from None
        except OSError as err:
            raise ServiceDown(err.strerror or str(err)) from None
        text = resp.body.decode("utf-8", "replace")
        return text if raw else json.loads(text or "null")

    async def stream(self, on_event: Callable[[dict | None], None], should_stop: Callable[[], bool]) -> None:
        """Read the service's ``/events`` until it ends (returns) or fails (ServiceDown).

        ``on_event`` gets each JSON event, and None for a keep-alive. Once ``should_stop()``
        is true the stream is dropped at the next thing the service sends (15 s at most).
        """
        pending = b""

        def on_chunk(chunk: bytes) -> None:
            nonlocal pending
            if should_stop():
                raise _Stopped()
            pending += chunk
            while b"\n\n" in pending:
                block, pending = pending.split(b"\n\n", 1)
                data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
                if data:
                    try:
                        on_event(json.loads(b"\n".join(data)))
                    except ValueError:
                        continue
                else:
                    on_event(None)

        request = self._request("GET", "/events", streaming_callback=on_chunk, request_timeout=STREAM_SECONDS,
                                accept="text/event-stream")
        try:
            await AsyncHTTPClient().fetch(request)
        except _Stopped:
            return
        except HTTPClientError as err:
            if isinstance(getattr(err, "__context__", None), _Stopped) or should_stop():
                return
            raise ServiceDown(f"its event stream answered HTTP {err.code}") from None
        except OSError as err:
            raise ServiceDown(err.strerror or str(err)) from None


class _Stopped(Exception):
    """Raised in the stream's callback to drop the connection once the page has gone."""


def _error_of(body: bytes | None) -> str:
    try:
        return (json.loads(body or b"{}") or {}).get("error") or ""
    except (ValueError, AttributeError):
        return ""
