"""``QuotaWidget()``: the team's quota (bars: used, guarantee, borrowed, ceiling) and my jobs, live.

An ipywidget, so it works wherever widgets do (JupyterLab, Notebook 7, VS Code). It
follows the scheduler service's event stream from a background thread and redraws after
each change (and every 30 s, for other teams' use of the shared parents); ``close()``
stops it.
"""

from __future__ import annotations

import os
import threading

import ipywidgets as widgets

from ..apiclient import TenancyClient, TenancyError
from . import events
from .render import quota_html

#: Other teams' work changes the parents' usage without an event the caller may see.
REFRESH_SECONDS = 30
#: A burst of events makes one redraw.
SETTLE_SECONDS = 0.3


class QuotaWidget(widgets.VBox):
    def __init__(self, client: TenancyClient | None = None, *, live: bool = True, **kwargs):
        self._html = widgets.HTML()
        super().__init__([self._html], **kwargs)
        self.add_class("tenancy-quota-widget")
        self.client = client or TenancyClient()
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._me = None
        self.refresh()
        if live:
            events.start(events.follow, self.client, lambda _e: self._dirty.set(), self._stop, self._on_error)
            events.start(self._redraw_loop)

    def refresh(self) -> None:
        """Ask the service again and redraw."""
        try:
            self._me, tree = self.client.me(), self.client.tree()
        except TenancyError as err:
            self._html.value = quota_html(self._me, None, error=_what_to_say(err))
            return
        self._tree = tree
        self._html.value = quota_html(self._me, tree, team=os.environ.get("TENANCY_TENANT"))

    def _on_error(self, sentence: str) -> None:
        if sentence:
            self._html.value = quota_html(self._me, getattr(self, "_tree", None), error=sentence)
        else:
            self._dirty.set()  # (re)connected: catch up

    def _redraw_loop(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(REFRESH_SECONDS)
            if self._stop.is_set():
                return
            self._stop.wait(SETTLE_SECONDS)
            self._dirty.clear()
            self.refresh()

    def close(self) -> None:
        self._stop.set()
        self._dirty.set()
        super().close()


def _what_to_say(err: TenancyError) -> str:
    if err.status is None:  # nothing answered: say what the widget does about it, not the socket's error
        return "The tenancy scheduler cannot be reached right now; the quota shows again when it answers."
    return str(err)
