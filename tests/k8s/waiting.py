"""Waiting in the cluster tests: a poll with a deadline, and client calls that cannot hang a test."""

from __future__ import annotations

import asyncio
import inspect

#: request timeout (seconds) of every API call a test makes itself
CALL_TIMEOUT = 15


async def until(check, what: str, timeout: float = 30.0, interval: float = 0.25, show=None):
    """Poll ``check`` (a function, run on the loop; it may return an awaitable) until it returns something
    true, for at most ``timeout`` seconds; that value. On timeout the assertion names ``what`` and the last
    value (or what ``show()`` says)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if loop.time() >= deadline:
            state = show() if show is not None else last
            if inspect.isawaitable(state):
                state = await state
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {state!r}")
        await asyncio.sleep(interval)


async def k8s(fn, *args, **kwargs):
    """A call of the kubernetes client (blocking) in a thread, with a request timeout."""
    return await asyncio.to_thread(fn, *args, _request_timeout=CALL_TIMEOUT, **kwargs)
