"""What a follower serves: its own ``/health``, and every other request forwarded to the leader.

A follower holds no scheduler state (the leader's controller is the only one that
admits, and it keeps its queue in memory as well as in the database), so it does not
answer from the database itself: it forwards the request as it came (method, path,
query, body, the caller's token or cookie, ``Host``) to the leader's advertised URL,
and streams the answer back as it comes (the event stream included). The leader
authenticates the caller as if asked directly. ``X-Real-Ip`` carries the caller's address.

While no replica leads (a takeover), or the leader does not answer, the answer is a 503
with ``Retry-After`` and one line saying so; a forwarded request is never forwarded again
(a follower whose view of the Lease is behind would otherwise bounce it back).

``Switch`` is the HTTP server's delegate: it serves the follower's application and, once
this replica leads and has built the service's own, that one, on the same socket.
"""

from __future__ import annotations

import json

from tornado import httputil, web
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from .handlers import HealthHandler
from .security import SecureHeaders

FORWARDED_HEADER = "X-Tenancy-Forwarded-By"
#: Headers of one connection, not of the request (RFC 9110 §7.6.1), and those tornado sets itself.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length"}
RETRY_AFTER = "2"


class Switch(httputil.HTTPServerConnectionDelegate):
    """An HTTP server delegate that hands each new request to ``app`` (which may be replaced)."""

    def __init__(self, app: web.Application):
        self.app = app

    def start_request(self, server_conn, request_conn):
        return self.app.start_request(server_conn, request_conn)

    def on_close(self, server_conn):
        self.app.on_close(server_conn)


class Standby:
    """What the follower's handlers need of a controller: its ``health``."""

    def __init__(self, health):
        self.health = health


@web.stream_request_body
class ForwardHandler(SecureHeaders):
    """Any method, any path: the same request to the leader, its answer streamed back."""

    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "DELETE", "PATCH", "PUT", "OPTIONS")

    def initialize(self):
        self._chunks: list[bytes] = []
        self._size = 0
        self._gone = False

    def set_default_headers(self):
        pass  # the leader's answer carries its own

    def data_received(self, chunk: bytes):
        self._size += len(chunk)
        if self._size <= self.settings["max_body_bytes"]:
            self._chunks.append(chunk)

    def on_connection_close(self):
        self._gone = True  # the next chunk from the leader ends the forwarded request

    def unavailable(self, message: str):
        self.clear()
        self.set_status(503)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Retry-After", RETRY_AFTER)
        self.finish(json.dumps({"status": 503, "error": message}))

    async def _forward(self, *args):
        election, limit = self.settings["election"], self.settings["max_body_bytes"]
        if self._size > limit:
            raise web.HTTPError(413, f"the request body is {self._size:,} bytes; at most {limit:,} are accepted")
        url = election.leader_url
        if self.request.headers.get(FORWARDED_HEADER):
            return self.unavailable("the leader of the tenancy service is changing; try again in a moment")
        if election.leader is None or not url:
            return self.unavailable("no replica of the tenancy service leads right now (a takeover takes at most "
                                    f"{election.lease_duration + 2 * election.retry_period:.0f} s); try again in a moment")
        if election.leader == election.identity:
            return self.unavailable("the tenancy service is starting (restoring its state); try again in a moment")
        headers = httputil.HTTPHeaders()
        for name, value in self.request.headers.get_all():
            if name.lower() not in HOP_BY_HOP:
                headers.add(name, value)
        headers[FORWARDED_HEADER] = election.identity
        headers["X-Real-Ip"] = self.request.remote_ip
        headers["X-Scheme"] = self.request.protocol
        status: dict = {}

        def on_header(line: str):
            line = line.rstrip("\r\n")
            if line.startswith("HTTP/"):
                start = httputil.parse_response_start_line(line)
                status.update(code=start.code, reason=start.reason, headers=httputil.HTTPHeaders())
            elif line and status:
                status["headers"].parse_line(line)
            elif status and status["code"] >= 200 and not status.get("sent"):  # the end of the final headers
                self.set_status(status["code"], status["reason"])
                got = status["headers"]
                for name in {n for n, _ in got.get_all()}:
                    if name.lower() not in HOP_BY_HOP:
                        first, *more = got.get_list(name)
                        self.set_header(name, first)  # in place of tornado's own (Server, Date, Content-Type)
                        for value in more:
                            self.add_header(name, value)
                status["sent"] = True

        def on_chunk(chunk: bytes):
            if self._gone:
                raise StreamClosedError()  # ends the request to the leader (an event stream would go on)
            self.write(chunk)
            self.flush()

        stream = self.request.path.endswith("/events")
        body = b"".join(self._chunks) if self.request.method in ("POST", "PUT", "PATCH", "DELETE") else None
        req = HTTPRequest(url.rstrip("/") + self.request.uri, method=self.request.method, headers=headers,
                          body=body, allow_nonstandard_methods=True, follow_redirects=False,
                          decompress_response=False, header_callback=on_header, streaming_callback=on_chunk,
                          connect_timeout=5, request_timeout=24 * 3600 if stream else 300)
        try:
            await self.settings["forward_client"].fetch(req, raise_error=False)
        except (OSError, HTTPClientError, StreamClosedError) as err:
            if self._gone:
                return
            if not status.get("sent"):
                return self.unavailable(f"the leader of the tenancy service ({election.leader} at {url}) does not "
                                        f"answer ({err}); another replica takes over if it is gone: try again in a moment")
        if self._gone:
            return
        if not status.get("sent"):
            return self.unavailable(f"the leader of the tenancy service ({election.leader} at {url}) does not "
                                    "answer; another replica takes over if it is gone: try again in a moment")
        self.finish()

    get = head = post = delete = patch = put = options = _forward


def standby_app(prefix: str, health, election, *, max_body_bytes: int) -> web.Application:
    """The follower's application: ``/health`` (``health``: this replica's) and the rest forwarded
    to ``election``'s leader."""
    api = prefix.rstrip("/") + "/api/v1"
    client = SimpleAsyncHTTPClient(force_instance=True, max_clients=1000, max_body_size=1 << 40)
    return web.Application(
        [(api + "/health", HealthHandler), (api + "/health/(live|ready)", HealthHandler), (r"/.*", ForwardHandler)],
        controller=Standby(health), election=election, forward_client=client, max_body_bytes=max_body_bytes)
