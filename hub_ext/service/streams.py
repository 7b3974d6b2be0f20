"""How many event streams (``GET /api/v1/events``) each caller holds open.

A stream lasts as long as its client wants and every change of a workload is
written to each one, so one user's thousand open streams cost every pass a
thousand writes and the service a thousand sockets. Each caller may hold
``per_user`` at once (0: no cap); the next one is a 429 until one closes.
"""

from __future__ import annotations


class StreamSlots:
    def __init__(self, per_user: int):
        self.per_user = per_user
        self._open: dict[str, int] = {}

    def take(self, who: str) -> bool:
        """Count a new stream of ``who``; False (and nothing counted) when they hold the most already."""
        held = self._open.get(who, 0)
        if self.per_user > 0 and held >= self.per_user:
            return False
        self._open[who] = held + 1
        return True

    def give_back(self, who: str) -> None:
        held = self._open.get(who, 0) - 1
        if held > 0:
            self._open[who] = held
        else:
            self._open.pop(who, None)

    def held(self, who: str) -> int:
        return self._open.get(who, 0)
