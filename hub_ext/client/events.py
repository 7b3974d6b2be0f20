"""Following the scheduler service's event stream from a kernel, in a thread, reconnecting as a browser would."""

from __future__ import annotations

import threading
from typing import Callable

from ..apiclient import TenancyError

#: What a live line or widget says while the stream is down.
DOWN = "The tenancy scheduler cannot be reached right now; this updates again when it answers."


def follow(client, on_event: Callable[[dict], None], stop: threading.Event, on_error: Callable[[str], None] | None = None,
           retry_seconds: float = 5) -> None:
    """Call ``on_event`` with each workload event the caller may see until ``stop`` is set.

    Reconnects after a failure (``on_error`` gets a sentence), as a browser's EventSource
    would; ``on_error("")`` says it is connected (again), so the caller can catch up.
    """
    while not stop.is_set():
        connected = False
        try:
            for event in client.events():
                if stop.is_set():
                    return
                if event is None:
                    if on_error is not None and not connected:
                        on_error("")
                    connected = True
                    continue
                on_event(event)
        except (TenancyError, OSError, ValueError):
            if on_error is not None:
                on_error(DOWN)
        stop.wait(retry_seconds)


def start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name="tenancy-follow")
    thread.start()
    return thread
