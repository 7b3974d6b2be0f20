"""Fixtures for tests against a real JupyterHub, a real configurable-http-proxy and real
single-user servers (see harness.py).

CHP is installed once per session by ``scripts/install-chp`` (needs node >= 20 + npm).
Set ``TENANCY_SKIP_HUB=1`` to skip this tier; otherwise a failed install is an error,
not a skip.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from demo_hub import ROOT, demo_hub, wait_serving  # noqa: E402
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


@pytest.fixture(scope="session")
def hub_factory(chp_path, tmp_path_factory) -> Callable[..., ContextManager[RealHub]]:
    """``with hub_factory(name, ...) as hub:`` a running hub in a fresh work dir, stopped when the
    block ends: a module-scoped fixture's hub lives for its module, a test's for its test.

    ``hub_factory(name, *, extra_config="", env=None, work=None, root=ROOT, **kwargs)`` is the
    demo's hub (``root``/demo/jupyterhub_config.py; the demo's users, password ``demo``), its
    tenancy service answering, its state in the work dir, notebooks warned 2 s before they are
    stopped; ``env`` adds to that environment (``{"TENANCY_HISTORY_SECONDS": "1"}``),
    ``extra_config`` to its configuration; ``work`` is a work dir of the caller's; a ``root``
    other than this checkout runs that tree's demo and code. ``hub.tokens`` keeps the users' tokens.

    ``hub_factory(name, config_text=SIMPLE_CONFIG)`` is a hub of that configuration instead.
    ``kwargs`` go to ``RealHub`` (``admin_token``, ...).
    """

    @contextlib.contextmanager
    def run(name: str, *, config_text: str | None = None, extra_config: str = "",
            env: dict[str, str] | None = None, work: Path | None = None, root: Path = ROOT,
            **kwargs: Any) -> Iterator[RealHub]:
        work = Path(work) if work is not None else tmp_path_factory.mktemp(name)
        if config_text is not None:
            config = work / "jupyterhub_config.py"
            config.write_text(config_text)
            hub = RealHub(config, work, chp_path=chp_path, env=dict(env or {}), extra_config=extra_config, **kwargs)
        else:
            hub = demo_hub(chp_path, work, env=env, root=root, extra_config=extra_config, **kwargs)
        try:
            try:
                hub.start()
            except HubError as e:
                pytest.fail(f"hub did not start: {e}", pytrace=False)
            if config_text is None:
                wait_serving(hub)
            yield hub
        finally:
            hub.stop()

    return run


@pytest.fixture(scope="module")
def simple_hub(hub_factory) -> Iterator[RealHub]:
    """A running hub shared by a test module: DummyAuthenticator (password ``pw``),
    SimpleLocalProcessSpawner (homes under the work dir), named servers allowed."""
    with hub_factory("simple-hub", config_text=SIMPLE_CONFIG) as hub:
        yield hub


@pytest.fixture(scope="session")
def datasets_hub(hub_factory) -> Iterator[RealHub]:
    """The demo's hub for the datasets modules (test_datasets_*.py, test_lab_datasets_browser.py), one
    for the three of them: the hub tier is CI's long pole. Its work dir is one other accounts may
    cross (``/tmp/tenancy-datasets-*``, 0711, as ``/srv`` would be): the demo's dataset folder lives
    there. Users' servers run this checkout's built Lab extension (``JUPYTER_PATH`` is searched
    before the virtualenv's copy, which an editable install made at install time)."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="tenancy-datasets-", dir="/tmp"))
    os.chmod(work, 0o711)
    share = work / "share"
    (share / "labextensions").mkdir(parents=True)
    (share / "labextensions" / "jupyterhub-tenancy").symlink_to(ROOT / "hub_ext" / "labserver" / "labextension")
    os.chmod(share, 0o755)
    os.chmod(share / "labextensions", 0o755)
    extra = f"c.Spawner.environment = {{**c.Spawner.environment, 'JUPYTER_PATH': {str(share)!r}}}\n"
    try:
        with hub_factory("datasets-hub", work=work, extra_config=extra) as hub:
            hub.state = work / "state"
            yield hub
    finally:
        shutil.rmtree(work, ignore_errors=True)
