"""One user's flood of requests must not slow everyone else's.

The service answers on one event loop, and most handlers run to the end without
yielding: with sixteen requests of one user in line, another user's request waits for
all sixteen. Each caller may have only ``per_user`` requests in progress; the rest wait
(cheaply, without work done) for their own turn, so a quiet user's request waits at most
for the few that are running.
"""

from __future__ import annotations

import asyncio


class FairShare:
    def __init__(self, per_user: int):
        self.per_user = per_user
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._held: dict[str, int] = {}

    async def enter(self, who: str) -> None:
        if self.per_user <= 0:
            return
        slot = self._slots.get(who)
        if slot is None:
            slot = self._slots[who] = asyncio.Semaphore(self.per_user)
        self._held[who] = self._held.get(who, 0) + 1  # counts waiters too: the slot stays while anyone needs it
        await slot.acquire()

    def leave(self, who: str) -> None:
        if self.per_user <= 0 or who not in self._slots:
            return
        self._slots[who].release()
        self._held[who] -= 1
        if not self._held[who]:  # nobody of this user in line: forget the semaphore (users come and go)
            del self._held[who], self._slots[who]
