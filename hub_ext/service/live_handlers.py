"""The API's two long-lived or scraped answers: the server-sent event stream (``/api/v1/events``),
bounded per user, and Prometheus's ``/metrics``, for admins or the scrape token. Both build on
``handlers.APIHandler``'s login; the rest of the REST API is in ``handlers.py``."""

from __future__ import annotations

import asyncio
import hmac
import json

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from tornado import web

from .handlers import APIHandler
from .history import visible


class EventsHandler(APIHandler):
    """Server-sent events: one ``data:`` line per changed workload the caller may see.

    Each caller holds at most ``max_event_streams_per_user`` streams at once (see ``streams.py``)."""

    fair = False

    async def get(self):
        slots, who = self.settings.get("streams"), self.identity.name
        if slots is not None and not slots.take(who):
            raise web.HTTPError(429, f"{who} has {slots.held(who)} event streams open already, the most one user "
                                     "may hold; close one (a page or JupyterLab tab) and try again")
        self.set_header("Content-Type", "text/event-stream")
        self._queue = queue = asyncio.Queue()
        c, allowed = self.controller, self.identity.namespaces()
        samples = self.get_argument("samples", "false").lower() in ("1", "true", "yes")
        c.listeners.add(queue)
        try:
            self.write(": connected\n\n")
            await self.flush()
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), 15)
                except asyncio.TimeoutError:
                    self.write(": keep-alive\n\n")
                    await self.flush()
                    continue
                if message is None:  # the client went away (on_connection_close)
                    break
                if message.get("type") == "sample":  # the pages' live figures (?samples=true): what this caller may see
                    if not samples:
                        continue
                    message = {"type": "sample", "sample": visible(message["sample"], self.identity)}
                    self.write(f"data: {json.dumps(message, default=str)}\n\n")
                    await self.flush()
                    continue
                wl = message.get("workload") or {}
                if allowed is not None and wl.get("namespace") not in allowed and wl.get("user") != self.identity.name:
                    continue
                self.write(f"data: {json.dumps(message, default=str)}\n\n")
                await self.flush()
        except Exception:  # noqa: BLE001 - the client went away
            pass
        finally:
            c.listeners.discard(queue)
            if slots is not None:
                slots.give_back(who)

    def on_connection_close(self):
        super().on_connection_close()
        queue = getattr(self, "_queue", None)
        if queue is not None:  # its slot is free at once, not at the next keep-alive
            queue.put_nowait(None)


class MetricsHandler(APIHandler):
    """Prometheus's scrape: for admins (their hub token) or Prometheus with the scrape token
    (``TenancyService.metrics_token``, sent as ``Authorization: Bearer ...`` or ``token ...``); open to all only with
    ``authenticate_metrics = False``. A user's token is refused: the figures are every team's and
    every namespace's, which the pages show a user only as totals per team."""

    async def admit(self):
        if not self.settings.get("authenticate_metrics", True) or self._scrape_token():
            return
        await super().admit()
        if self._finished:  # sent to the hub's login
            return
        if not self.identity.admin:
            raise web.HTTPError(403, "the metrics are for admins and for Prometheus with the scrape token "
                                     "(TenancyService.metrics_token); ask an admin, or see your teams on the pages")

    def _scrape_token(self) -> bool:
        wanted = self.settings.get("metrics_token") or ""
        kind, _, sent = self.request.headers.get("Authorization", "").partition(" ")
        # "Bearer" is Prometheus's default scheme; "token" the hub's, as the other clients send it.
        return bool(wanted) and kind.lower() in ("bearer", "token") and hmac.compare_digest(sent.strip().encode(),
                                                                                           wanted.encode())

    async def get(self):
        history = self.settings.get("history")
        if history is not None:
            await history.refresh_metrics()
        self.settings["metrics"].observe_engine(self.controller.engine)
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(generate_latest(self.settings["metrics"].registry))
