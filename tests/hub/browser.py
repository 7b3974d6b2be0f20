"""Headless Chromium (Debian's ``chromium``, driven by Playwright; no browser download) for
the pages people use, and screenshots of them under docs/screenshots/ for the README."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("TENANCY_SCREENSHOTS", ROOT / "docs" / "screenshots"))
CHROMIUM = os.environ.get("TENANCY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# The machine's network is closed: Chromium must not try to reach Google's services.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: scripts/setup installs the test extras", pytrace=False)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no Chromium at {CHROMIUM}: scripts/test installs Debian's chromium package", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def logged_in(browser, hub, user: str, password: str = "demo", *, width: int = 1280, height: int = 800):
    """A new page whose context is logged in to the hub as ``user`` through the real form."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(hub.url("/hub/login?next=%2Fhub%2Fhome"))  # not /hub/spawn: nothing starts by itself
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("input[type=submit], button[type=submit]")
    return page


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
