"""The engine's queue of waiting pods: sorted, and counting its changes.

``version`` goes up with every change of the queue (a pod added or taken out), so
that what is worked out from the whole queue (the positions every answer shows)
is worked out once per change, not once per request: with 10,000 pods waiting,
once per request held the service's event loop for tens of milliseconds each time.
"""

from __future__ import annotations

from sortedcontainers import SortedKeyList


class Queue(SortedKeyList):
    def __init__(self, iterable=None, key=None):
        self.version = 0
        super().__init__(iterable, key=key)

    def changed(self) -> None:
        """Something the order of the queue does not show changed (a pod became inadmissible, its leaf)."""
        self.version += 1

    def add(self, value):
        self.version += 1
        super().add(value)

    def update(self, iterable):
        self.version += 1
        super().update(iterable)

    def discard(self, value):
        self.version += 1
        super().discard(value)

    def remove(self, value):
        self.version += 1
        super().remove(value)

    def pop(self, index=-1):
        self.version += 1
        return super().pop(index)

    def clear(self):
        self.version += 1
        super().clear()

    def __delitem__(self, index):
        self.version += 1
        super().__delitem__(index)
