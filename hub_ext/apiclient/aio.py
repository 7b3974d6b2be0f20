"""``AsyncTenancyClient``: the API's calls on tornado's loop, for the Lab server extension and the hub's spawner."""

from __future__ import annotations

import logging
from typing import Callable

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httputil import HTTPInputError

from .calls import Call, Calls, environment, headers
from .errors import NotConfigured, TenancyError, refusal, unreachable
from .events import EventParser

#: A stream stays open for as long as its reader wants; keep-alives arrive every 15 s.
STREAM_SECONDS = 24 * 3600


class AsyncTenancyClient(Calls):
    """Each call returns a coroutine of the answer. Without a URL and token, a single-user server's own."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30):
        env_url, env_token = environment() if url is None or token is None else ("", "")
        self.url = (url if url is not None else env_url).rstrip("/")
        self.token = token if token is not None else env_token
        self.timeout = timeout

    @classmethod
    def for_hub_service(cls, service, *, timeout: float = 30) -> "AsyncTenancyClient | None":
        """A client of the hub's tenancy service (JupyterHub's ``Service``) with that service's own token;
        None when the hub knows no such service or not its URL and token."""
        if service is None or not getattr(service, "api_token", None) or not getattr(service, "url", None):
            return None
        from jupyterhub.utils import url_path_join  # only the hub calls this; the client runs without jupyterhub

        return cls(url_path_join(service.url, service.prefix, "api/v1"), service.api_token, timeout=timeout)

    @property
    def configured(self) -> bool:
        return bool(self.url and self.token)

    def _request(self, call: Call, *, accept: str = "application/json", **kw) -> HTTPRequest:
        return HTTPRequest(self.url + call.path, method=call.method, body=call.body,
                           headers=headers(self.token, accept), allow_nonstandard_methods=True,
                           **{"connect_timeout": 5, "request_timeout": self.timeout, **kw})

    def _failure(self, err: HTTPClientError | OSError) -> TenancyError:
        if isinstance(err, HTTPClientError):
            if err.response is None:  # a timeout: nothing answered
                return unreachable(self.url, err.message or err)
            return refusal(err.code, err.response.body, err.response.reason or err.message or "")
        return unreachable(self.url, err.strerror or err)

    async def _send(self, call: Call):
        if not self.configured:  # a relative URL would fail inside tornado with a line nobody can act on
            raise NotConfigured("TENANCY_API_URL or the hub token is not set: there is no tenancy service to ask")
        try:
            response = await AsyncHTTPClient().fetch(self._request(call))
        except (HTTPClientError, OSError) as err:
            raise self._failure(err) from None
        return call.read(response.body)

    async def events(self, on_event: Callable[[dict | None], None], should_stop: Callable[[], bool]) -> None:
        """Read the service's events until it ends the stream (returns) or fails (ServiceDown, ServiceRefused).

        ``on_event`` gets each event, and None for a keep-alive. Once ``should_stop()`` is
        true the stream is dropped at the next thing the service sends (15 s at most).
        """
        parser = EventParser()

        def on_chunk(chunk: bytes) -> None:
            if should_stop():
                raise _Stopped()
            for event in parser.feed(chunk):
                on_event(event)

        request = self._request(Call("GET", "/events"), accept="text/event-stream", streaming_callback=on_chunk,
                                request_timeout=STREAM_SECONDS)
        try:
            await AsyncHTTPClient().fetch(request)
        except _Stopped:
            return
        except (HTTPClientError, OSError) as err:
            if isinstance(err.__context__, _Stopped) or should_stop():
                return
            raise self._failure(err) from None


class _Stopped(HTTPInputError):
    """Raised in the stream's callback to drop the connection once its reader has gone.

    Tornado has no way to abort a fetch: an exception from the streaming callback closes the
    connection. Any other exception is logged as an uncaught error with its traceback (the hub's
    log got one each time a Lab page closed); an ``HTTPInputError`` is one info line, "Malformed
    HTTP message", which ``_not_a_malformed_message`` keeps out of the log as well.
    """


def _not_a_malformed_message(record: logging.LogRecord) -> bool:
    return not any(isinstance(arg, _Stopped) for arg in (record.args if isinstance(record.args, tuple) else ()))


logging.getLogger("tornado.general").addFilter(_not_a_malformed_message)
