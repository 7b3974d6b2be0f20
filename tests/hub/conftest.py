"""Fixtures for tests against a real JupyterHub, a real configurable-http-proxy and real
single-user servers (see harness.py).

CHP is installed once per session by ``scripts/install-chp`` (needs node >= 20 + npm).
Set ``TENANCY_SKIP_HUB=1`` to skip this tier; otherwise a failed install is an error,
not a skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import SIMPLE_CONFIG, HubError, RealHub  # noqa: E402

SKIP = os.environ.get("TENANCY_SKIP_HUB") == "1"


def pytest_collection_modifyitems(config, items):
    if not SKIP:
        return
    mark = pytest.mark.skip(reason="TENANCY_SKIP_HUB=1")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(mark)


@pytest.fixture(scope="session")
def chp_path() -> str:
    """Absolute path of the configurable-http-proxy installed by scripts/install-chp."""
    if SKIP:
        pytest.skip(reason="TENANCY_SKIP_HUB=1 asks to skip the real-hub tier")
    try:
        return harness.install_chp()
    except HubError as e:
        pytest.fail(
            f"{e}\nscripts/install-chp needs node >= 20 and npm (and the npm registry "
            "the first time); or set TENANCY_SKIP_HUB=1 to skip the hub tier.",
            pytrace=False,
        )


def _start(hub: RealHub) -> RealHub:
    try:
        return hub.start()
    except HubError as e:
        pytest.fail(f"hub did not start: {e}", pytrace=False)


def _make_hub(
    chp_path: str,
    workdir: Path,
    config: str | os.PathLike[str] | None = None,
    *,
    config_text: str | None = None,
    **kwargs: Any,
) -> RealHub:
    if config_text is not None:
        if config is not None:
            raise ValueError("pass config or config_text, not both")
        config = workdir / "jupyterhub_config.py"
        Path(config).write_text(config_text)
    return RealHub(config, workdir, chp_path=chp_path, **kwargs)


@pytest.fixture
def hub_factory(chp_path, tmp_path_factory) -> Iterator[Callable[..., RealHub]]:
    """``hub_factory(config=None, *, config_text=None, start=True, **RealHub kwargs)``
    (``extra_config``, ``env``, ``admin_token``, ...) → a ``RealHub`` in a fresh work dir,
    started unless ``start=False``; every hub made is stopped at teardown.
    ``config_text`` (e.g. ``harness.SIMPLE_CONFIG``) is written to
    ``WORKDIR/jupyterhub_config.py`` and used as the config file."""
    hubs: list[RealHub] = []

    def make(config=None, *, start: bool = True, **kwargs: Any) -> RealHub:
        hub = _make_hub(chp_path, tmp_path_factory.mktemp("hub"), config, **kwargs)
        hubs.append(hub)
        return _start(hub) if start else hub

    yield make
    for hub in reversed(hubs):
        hub.stop()


@pytest.fixture(scope="module")
def simple_hub(chp_path, tmp_path_factory) -> Iterator[RealHub]:
    """A running hub shared by a test module: DummyAuthenticator (password ``pw``),
    SimpleLocalProcessSpawner (homes under the work dir), named servers allowed."""
    hub = _make_hub(
        chp_path, tmp_path_factory.mktemp("simple-hub"), config_text=SIMPLE_CONFIG
    )
    _start(hub)
    try:
        yield hub
    finally:
        hub.stop()
