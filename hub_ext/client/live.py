"""One live status line for a job in a notebook: queued, then running, then done, with a link to its logs.

The line is one display (``display_id``) updated in place from a background thread that
follows the service's event stream, so the cell stays free and nothing is printed twice.
"""

from __future__ import annotations

import html
import os
import threading

from ..apiclient import FINAL
from ..vocabulary import position, state_word
from . import events

COLOURS = {"Pending": "#8a6d00", "Running": "#1b5e20", "Succeeded": "#1b5e20", "Failed": "#b71c1c",
           "Rejected": "#b71c1c", "Cancelled": "#555", "Preempted": "#b71c1c", "Stopped": "#555"}


def logs_url(wid: str) -> str:
    """The job's logs through this server's tenancy extension (same origin as the notebook page)."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    return f"{prefix.rstrip('/')}/tenancy/api/workloads/{wid}/logs"


def status_text(d: dict) -> str:
    """``train-x (ab12): queued - quota root.a.1 is at its max ... [position 1 in the queue, 1 in your team]``

    The notebook's live line, and what ``tenancy submit`` and ``tenancy cancel`` print.
    """
    line = f"{d['name']} ({d['id']}): {state_word(d['state'], d.get('reason'))}"
    if d.get("message") and d["state"] not in ("Succeeded", "Running"):
        line += f" - {d['message']}"
    if position(d):
        line += f" [{position(d)}]"
    return line


def status_html(d: dict) -> str:
    colour = COLOURS.get(d["state"], "#333")
    dot = "&#9679;" if d["state"] not in FINAL else "&#10003;" if d["state"] == "Succeeded" else "&#9632;"
    return (f'<div class="tenancy-job" data-state="{html.escape(d["state"])}" style="font-family: var(--jp-code-font-family, monospace)">'
            f'<span style="color:{colour}">{dot}</span> {html.escape(status_text(d))} '
            f'&middot; <a href="{html.escape(logs_url(d["id"]))}" target="_blank" rel="noopener">logs</a></div>')


class LiveLine:
    """A job's status line, updated in place until the job ends."""

    def __init__(self, job):
        from IPython.display import HTML, display

        self.job, self._HTML = job, HTML
        self._handle = display(HTML(status_html(job.data)), display_id=True)
        self._stop = threading.Event()
        if job.state not in FINAL:
            events.start(self._follow)

    def _show(self, data: dict) -> None:
        self.job.data = {**self.job.data, **data}
        self._handle.update(self._HTML(status_html(self.job.data)))

    def _follow(self) -> None:
        def on_event(message: dict) -> None:
            w = message.get("workload") or {}
            if w.get("id") == self.job.id:
                self._show(w)
                if w.get("state") in FINAL:
                    self._stop.set()

        def on_error(sentence: str) -> None:
            if not sentence:  # (re)connected: catch up on what happened meanwhile
                try:
                    self._show(self.job.client.get(self.job.id))
                except Exception:  # noqa: BLE001 - the stream carries on
                    return
                if self.job.state in FINAL:
                    self._stop.set()

        events.follow(self.job.client, on_event, self._stop, on_error)


def in_a_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def execution_count() -> int | None:
    from IPython import get_ipython

    shell = get_ipython()
    return getattr(shell, "execution_count", None) if shell is not None else None
