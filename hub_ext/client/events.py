"""Following the scheduler service's event stream (``/events``) from a kernel: standard library only."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Callable

#: The service sends a keep-alive every 15 s; a silent minute means the connection is dead.
READ_TIMEOUT = 60


def follow(client, on_event: Callable[[dict], None], stop: threading.Event, on_error: Callable[[str], None] | None = None,
           retry_seconds: float = 5) -> None:
    """Call ``on_event`` with each workload event the caller may see until ``stop`` is set.

    Reconnects after a failure (``on_error`` gets a sentence), as a browser's EventSource would.
    """
    while not stop.is_set():
        req = urllib.request.Request(client.url + "/events", headers={
            "Authorization": f"token {client.token}", "Accept": "text/event-stream"})
        try:
            with urllib.request.urlopen(req, timeout=READ_TIMEOUT) as resp:
                if on_error is not None:
                    on_error("")
                for raw in resp:
                    if stop.is_set():
                        return
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    if line.startswith("data: "):
                        try:
                            on_event(json.loads(line[6:]))
                        except ValueError:
                            continue
        except (urllib.error.URLError, OSError, ValueError):
            if on_error is not None:
                on_error("The tenancy scheduler cannot be reached right now; this updates again when it answers.")
        stop.wait(retry_seconds)


def start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name="tenancy-follow")
    thread.start()
    return thread
