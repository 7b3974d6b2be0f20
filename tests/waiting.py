"""Waiting in the tests of every tier: a poll of a condition with a deadline, on the test's
thread (``wait_for``) or on its event loop (``until``); calls of a blocking client that
cannot hang a test (``k8s``); and ``quiet_passes``, the one fixed wait, for tests that check
that nothing happens.

The deadline is generous (a minute unless the caller knows better): on two cores shared by a
hub, its proxy, a control plane and a browser, what takes a second alone takes ten. A wait
that runs out raises an AssertionError naming what was awaited and the last value seen (or
what ``show()`` says), so a failure reads as a sentence, not a bare ``timed out``.
"""

from __future__ import annotations

import asyncio
import inspect
import time

#: seconds a wait lasts unless its caller says otherwise
TIMEOUT = 60.0
#: request timeout (seconds) of every API call a test makes itself
CALL_TIMEOUT = 15


def _timed_out(what: str, timeout: float, last) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}; last: {last!r}")


def wait_for(check, what: str, timeout: float = TIMEOUT, interval: float = 0.25, show=None, ignore=()):
    """Call ``check()`` until it returns something true, for at most ``timeout`` seconds; that value.

    An exception of a type in ``ignore`` counts as "not yet" (it is the last value seen).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = check()
        except ignore as err:
            last = err
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, show() if show is not None else last)
        time.sleep(interval)


async def until(check, what: str, timeout: float = TIMEOUT, interval: float = 0.25, show=None, tick=None,
                in_thread: bool = False, times: int = 1):
    """``wait_for`` on the event loop: ``check`` may return an awaitable; with ``in_thread`` it is a
    blocking function run in a thread. ``tick()`` (a controller's pass, say) runs before each try.
    With ``times``, the check must hold that many tries in a row (a state that has settled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    held = 0
    while True:
        if tick is not None:
            tick()
        last = await asyncio.to_thread(check) if in_thread else check()
        if inspect.isawaitable(last):
            last = await last
        held = held + 1 if last else 0
        if held >= times:
            return last
        if loop.time() >= deadline:
            state = show() if show is not None else last
            if inspect.isawaitable(state):
                state = await state
            raise _timed_out(what, timeout, state)
        await asyncio.sleep(interval)


async def k8s(fn, *args, **kwargs):
    """A call of the kubernetes client (blocking) in a thread, with a request timeout."""
    return await asyncio.to_thread(fn, *args, _request_timeout=CALL_TIMEOUT, **kwargs)


async def quiet_passes(tick, passes: int = 3, interval: float = 0.3) -> None:
    """``passes`` passes of a controller (``tick()``), ``interval`` apart, for a test that then checks
    that they changed nothing: a fixed time on purpose, as there is no event to wait for."""
    for _ in range(passes):
        tick()
        await asyncio.sleep(interval)
