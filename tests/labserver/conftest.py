"""The Lab server extension (hub_ext/labserver) in a real jupyter-server started in the test's
process by pytest-jupyter (``jp_serverapp``, ``jp_fetch``): its routes under ``tenancy/api``,
their status codes and bodies, as the lab extension sees them.

pytest-jupyter runs its server on an event loop of its own, and its hooks (imported here, so
they hold for this folder only) run this folder's ``async def`` tests on that loop: they take
no ``pytest.mark.asyncio``.

The scheduler service they call is ``FakeService``: a small tornado application on 127.0.0.1
that answers the service's API (``/me``, ``/tree``, ``/workloads``..., ``/events``) with
answers the test sets, on the same loop. A fake rather than ``tenancy serve``: the real
service needs a hub to check tokens (and the real pair is the hub tier's, tests/hub/test_lab.py),
while here each test says what the service answers, 4xx and 5xx included, sees the token and
the bodies the extension sends, and pushes an event once the extension follows the stream.
"""

from __future__ import annotations

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F401,F403 - the jp_ fixtures and the plugin's hooks

from fake_service import FakeService, serve


@pytest.fixture
def service(jp_asyncio_loop):
    """A ``FakeService`` listening on 127.0.0.1 (on the server's loop), stopped after the test."""
    fake = serve(FakeService())
    yield fake
    jp_asyncio_loop.run_until_complete(fake.stop())
