"""The service's event stream (``/events``, server-sent events) read from bytes as they arrive."""

from __future__ import annotations

import json


class EventParser:
    """Feed it what the connection gives; it returns each whole event's JSON, and None for a keep-alive.

    An event ends at a blank line and may span several ``data:`` lines; one that is not
    JSON is skipped, as a browser's EventSource would leave it to its listener.
    """

    def __init__(self):
        self._pending = b""

    def feed(self, chunk: bytes) -> list[dict | None]:
        self._pending += chunk
        events = []
        while b"\n\n" in self._pending:
            block, self._pending = self._pending.split(b"\n\n", 1)
            data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
            if not data:
                events.append(None)
                continue
            try:
                events.append(json.loads(b"\n".join(data)))
            except ValueError:
                continue
        return events
