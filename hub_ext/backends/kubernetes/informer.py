"""Following the cluster: list + watch of one kind, and whether the API server answers at all.

``Informer`` lists the objects of a kind (every namespace, filtered by labels),
hands them over as one ``LIST`` event, then follows a watch from that version,
each change an ``ADDED``/``MODIFIED``/``DELETED`` event, in a daemon thread;
handlers run on the event loop. A watch the server ends is resumed from the
last version seen (bookmarks keep it fresh); a version too old (410) or any
error lists again, after a backoff that doubles up to 30 s.

``ApiMonitor`` decides whether the API server is up: it probes with a real read
(which needs etcd: a stalled etcd shows too) and hears about every failed call.
An outage is logged as one line when it starts and one when it ends (with the
number of calls that failed meanwhile), never once per call; while it lasts the
service's health says so and nothing is admitted.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
import time

from ...threadnames import name_this_thread
from ...vocabulary import time_of_day
from .api import NODE, Api, Kind, KubernetesError

#: backoff of a watch that fails, doubling from the first to the last
BACKOFF = (1.0, 30.0)


def outage_error(err: BaseException) -> bool:
    """Whether an error says the API server is not answering (no answer, a timeout, a 5xx), rather
    than refusing this one call (403, 404, 409, 422, a 429 throttle)."""
    status = getattr(err, "status", None)
    return status is None or status >= 500


class ApiMonitor:
    """Whether the API server answers; one log line when it stops answering, one when it answers again."""

    def __init__(self, api: Api, *, log, health=None, interval: float = 5.0, timeout: float = 3.0, loop=None):
        self.api = api.with_timeout(timeout)
        self.log, self.health = log, health
        self.interval, self.timeout = interval, timeout
        self.loop = loop
        self.server = getattr(getattr(api.api_client, "configuration", None), "host", "") or "the API server"
        self.down_since: float | None = None
        self.failures = 0
        self.ready = threading.Event()  # set while the API server answers
        self._lock = threading.Lock()
        self.checks = 0
        self.problem: str | None = None  # the line on /health while it does not answer

    @property
    def up(self) -> bool:
        return self.down_since is None and self.ready.is_set()

    def failed(self, err: BaseException, where: str = "") -> bool:
        """A call failed (any thread). True when it is an outage (then counted, logged only if it is
        the first); False when the server answered with a refusal, which the caller handles."""
        if not outage_error(err):
            return False
        with self._lock:
            self.failures += 1
            first = self.down_since is None
            if first:
                self.down_since = time.monotonic()
                self.ready.clear()
        if first:
            self._went_down(err, where)
        return True

    def succeeded(self) -> None:
        """The server answered (the probe, or any call)."""
        with self._lock:
            since, failures = self.down_since, self.failures
            self.down_since, self.failures = None, 0
            self.ready.set()
        if since is not None:
            self.log.warning("the API server at %s answers again after %.0f s (%d call(s) failed meanwhile); "
                             "scheduling resumes", self.server, time.monotonic() - since, failures)
            self._health(None)

    def _went_down(self, err, where: str) -> None:
        self.log.warning("the API server at %s does not answer (%s%s); scheduling is paused and calls are "
                         "retried with backoff; one line follows when it answers again",
                         self.server, f"{where}: " if where else "", err)
        self._health(f"the API server at {self.server} does not answer ({err}) since "
                     f"{time_of_day(time.time())}; nothing is admitted until it does")

    def attach(self, health) -> None:
        """Report to ``health`` from now on (and say now if the API server is already away)."""
        self.health = health
        if health is not None and self.problem is not None:
            health.set("kubernetes-api", self.problem, log=False)

    def _health(self, problem: str | None) -> None:
        self.problem = problem
        if self.health is None:
            return
        set_problem = functools.partial(self.health.set, "kubernetes-api", problem, log=False)  # logged here
        if self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(set_problem)
            except RuntimeError:
                pass
            return
        set_problem()

    def probe(self) -> bool:
        """One read that needs etcd (a blocking call, at most ``timeout`` seconds)."""
        self.checks += 1
        try:
            self.api.request("GET", NODE.path(), query={"limit": 1})
        except KubernetesError as err:
            if not self.failed(err, "health check"):
                self.succeeded()  # it answered (a 403 is an answer): RBAC is the checks' business
                return True
            return False
        self.succeeded()
        return True

    async def wait_up(self, *, first_line: str = "") -> None:
        """Until the API server answers, probing with backoff (one line, not one per try)."""
        delay = BACKOFF[0]
        while not await asyncio.to_thread(self.probe):
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF[1] / 3)

    async def run(self) -> None:
        """Probe every ``interval`` seconds (every second while down)."""
        while True:
            await asyncio.to_thread(self.probe)
            await asyncio.sleep(self.interval if self.down_since is None else 1.0)


class Informer:
    """List + watch of ``kind`` (matching ``selector``) in a daemon thread, events handed to ``on_event``
    on ``loop``: ``("LIST", [objects])`` after every (re)list, then ``(type, object)`` per change."""

    def __init__(self, api: Api, kind: Kind, selector: str | None, loop, on_event, *, timeout_seconds: float = 300,
                 monitor: ApiMonitor | None = None, log=None, name: str = ""):
        self.api, self.kind, self.selector, self.loop, self.on_event = api, kind, selector, loop, on_event
        self.timeout_seconds = max(1, int(timeout_seconds))
        self.monitor, self.log = monitor, log
        self.name = name or f"{kind.plural}"
        self.synced = threading.Event()  # the first list is handed over
        self._stop = threading.Event()
        self._kick = threading.Event()  # ends a backoff early (``kick``, ``stop``)
        self._response = None  # the watch's HTTP response while one is open (``stop`` closes it)
        self._thread = threading.Thread(target=self._run, name=f"tenancy-watch-{self.name}", daemon=True)

    def start(self) -> "Informer":
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def kick(self) -> None:
        """List again now if the watch is waiting out a backoff (what failed may pass now: RBAC granted)."""
        self._kick.set()

    def stop(self, timeout: float = 0.0) -> None:
        """End the watch: its thread returns at once, even from a watch that waits for events (its
        connection is shut). ``timeout``: wait that long for the thread."""
        self._stop.set()
        self._kick.set()
        _shut(self._response)
        if timeout and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _backoff(self, delay: float) -> None:
        self._kick.wait(delay)
        self._kick.clear()

    def _hand_over(self, events: list) -> bool:
        """Hand ``events`` to the loop in one callback (waking the loop once per read, not per event)."""
        try:
            self.loop.call_soon_threadsafe(self._deliver, events)
            return True
        except RuntimeError:  # the loop is closed: the service is gone
            return False

    def _deliver(self, events: list) -> None:
        for kind, obj in events:
            try:
                self.on_event(kind, obj)
            except Exception as err:  # noqa: BLE001 - as a callback of its own: one bad event does not drop the rest
                message = f"handling a {kind} event of {self.name} failed"
                if self.log is not None:
                    self.log.exception("%s", message)
                else:
                    self.loop.call_exception_handler({"message": message, "exception": err})

    def _run(self) -> None:
        name_this_thread()
        delay = BACKOFF[0]
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    items, version = self.api.list_with_version(self.kind, self.selector)
                    if self.monitor is not None:
                        self.monitor.succeeded()
                    if not self._hand_over([("LIST", items)]):
                        return
                    self.synced.set()
                if self._stop.is_set():
                    return
                for batch in self.api.watch(self.kind, label_selector=self.selector, resource_version=version,
                                            timeout_seconds=self.timeout_seconds, stop=self._stop.is_set,
                                            on_response=self._opened):
                    version = (batch[-1][1].get("metadata") or {}).get("resourceVersion") or version
                    changes = [(kind, obj) for kind, obj in batch if kind in ("ADDED", "MODIFIED", "DELETED")]
                    if changes and not self._hand_over(changes):
                        return
                delay = BACKOFF[0]  # the server ended the watch: resume from the last version
            except KubernetesError as err:
                if self._stop.is_set():
                    return  # the error is our own doing: stop() shut the connection
                version = None  # list again: a version too old (410), or whatever we missed while away
                if err.status == 410:
                    continue
                outage = self.monitor is not None and self.monitor.failed(err, f"watching {self.name}")
                if not outage and self.log is not None:
                    self.log.warning("watching %s: %s; listing again in %.0f s", self.name, err, delay)
                if outage:  # back as soon as the API server answers again (the monitor probes it) ...
                    started = time.monotonic()
                    self.monitor.ready.wait(delay)
                    # ... but never at once after each failure, should this watch fail while others pass
                    self._backoff(BACKOFF[0] - (time.monotonic() - started))
                else:
                    self._backoff(delay)
                delay = min(delay * 2, BACKOFF[1])
            except Exception as err:  # noqa: BLE001 - a handler bug must not end the watch for good
                if self._stop.is_set():
                    return
                version = None
                if self.log is not None:
                    self.log.error("watching %s failed: %s: %s", self.name, type(err).__name__, err)
                self._backoff(delay)
                delay = min(delay * 2, BACKOFF[1])
            finally:
                self._response = None

    def _opened(self, response) -> None:
        self._response = response
        if self._stop.is_set():  # stopped while it was being opened
            _shut(response)


def _shut(response) -> None:
    """Shut the socket of a streaming HTTP response from another thread (a blocked read returns)."""
    if response is None:
        return
    sock = getattr(getattr(response, "connection", None), "sock", None) or \
        getattr(getattr(response, "_connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
