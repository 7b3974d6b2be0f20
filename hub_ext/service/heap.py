"""The garbage collector's settings for a service that holds thousands of live objects.

CPython's default (a young collection every 700 net allocations, the whole heap every
100 of those) walks every pod, Job and row the service keeps, again and again, while a
burst of submits allocates: measured in the cluster benchmark, a quarter of the
service's CPU and stalls of up to half a second. Young objects are collected less
often, and what exists once the service has started (modules, configuration; not the
restored state, whose rows must stay collectable when their work ends) is moved out of
the collector's sight for good (``gc.freeze``).
Reference counting still frees everything that is not in a cycle, at once.
"""

from __future__ import annotations

import gc


def tune(thresholds: tuple[int, int, int] | list[int]) -> None:
    """Set the collector's generation thresholds (``gc.set_threshold``)."""
    gc.set_threshold(*thresholds)


def freeze_startup() -> None:
    """Collect once, then exempt every object alive now from later collections."""
    gc.collect()
    gc.freeze()
