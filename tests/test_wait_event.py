"""``follow.wait_event``, which every follower of a training pod waits in between the watches' events: set,
timed out, and never swallowing a cancellation (a service told to stop must stop)."""

from __future__ import annotations

import asyncio
import time

import pytest

from hub_ext.backends.kubernetes.follow import wait_event


@pytest.mark.asyncio
async def test_true_once_the_event_is_set_before_the_timeout():
    event = asyncio.Event()
    asyncio.get_running_loop().call_soon(event.set)
    started = time.monotonic()
    assert await wait_event(event, 30.0) is True
    assert time.monotonic() - started < 5.0  # woken by the event, not by the timeout
    assert await wait_event(event, 30.0) is True  # already set: at once


@pytest.mark.asyncio
async def test_false_when_the_timeout_passes_first():
    event = asyncio.Event()
    assert await wait_event(event, 0.05) is False
    assert await wait_event(event, -1.0) is False  # a deadline already past: no wait at all


@pytest.mark.asyncio
@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_cancellation_is_never_swallowed(timeout):
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event(event, timeout))
    await asyncio.sleep(0)  # it waits now
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    # cancelled at the very moment the event is set: the cancellation still wins
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event(event, timeout))
    await asyncio.sleep(0)
    event.set()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


@pytest.mark.asyncio
async def test_a_cancellation_as_the_timeout_expires_is_not_taken_for_the_timeout():
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event(event, 0.0))  # its timer fires at the loop's next turn
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
