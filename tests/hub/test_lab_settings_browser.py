"""The Lab extension's settings in JupyterLab's settings editor, in headless Chromium against the
real demo hub: alice finds "Tenancy: team quota" among the settings, turns the status-bar item
off and sees it go at once (no reload), then on again. Screenshot: docs/screenshots/lab-settings.png."""

from __future__ import annotations

import secrets

import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import token
from waiting import wait_for

PLUGIN = "jupyterhub-tenancy:plugin"
STATUS_ITEM = "Show the team's quota in the status bar"
WORKSPACE = f"test-{secrets.token_hex(3)}"  # the account's home (and its workspaces) outlives runs


@pytest.fixture(scope="module")
def hub(hub_factory):
    with hub_factory("lab-settings-hub") as h:
        yield h


@pytest.fixture(scope="module")
def lab(hub, browser):
    """alice's JupyterLab, with the extension's settings at their defaults (the account's home,
    where JupyterLab keeps them, may outlive earlier runs)."""
    status, body = hub.start_server("alice", "", {"profile": "small"}, token=token(hub, "alice"), check=False)
    assert status in (201, 202), body
    hub.wait_server_ready("alice", timeout=90)
    settings = hub.server_url("alice") + f"lab/api/settings/{PLUGIN}"
    r = hub.request("PUT", settings, token=token(hub, "alice"), json={"raw": "{}"})
    assert r.status_code == 204, r.text
    page = logged_in(browser, hub, "alice", width=1400, height=900)
    page.goto(hub.url(f"/user/alice/lab/workspaces/{WORKSPACE}"))
    page.wait_for_selector(".jp-TenancyStatus", state="visible", timeout=60_000)
    wait_for(lambda: "team-a" in page.inner_text(".jp-TenancyStatus"), "the status bar to show the team")
    page.settings_url = settings
    yield page
    page.context.close()


def saved(hub, lab) -> dict:
    r = hub.request("GET", lab.settings_url, token=token(hub, "alice"))
    assert r.status_code == 200, r.text
    return r.json()["settings"]


def test_the_settings_editor_turns_the_status_item_off_and_on_live(hub, lab):
    lab.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    lab.locator(".lm-Menu-itemLabel", has_text="Settings Editor").click()
    entry = lab.locator(".jp-PluginList-entry", has_text="Tenancy: team quota")
    entry.wait_for(timeout=30_000)
    entry.click()
    box = lab.get_by_label(STATUS_ITEM)
    box.wait_for()
    assert box.is_checked()
    for name in ("Save open documents before a preemption", "Notifications"):
        assert lab.get_by_label(name, exact=True).is_checked(), name  # on by default

    box.uncheck()
    lab.wait_for_selector(".jp-TenancyStatus", state="hidden", timeout=15_000)
    wait_for(lambda: saved(hub, lab).get("showStatusItem") is False, "the setting to be saved")
    lab.wait_for_timeout(500)  # the form settles
    shot(lab, "lab-settings")

    box.check()
    lab.wait_for_selector(".jp-TenancyStatus", state="visible", timeout=15_000)
    assert "team-a" in lab.inner_text(".jp-TenancyStatus")
    wait_for(lambda: saved(hub, lab).get("showStatusItem") is True, "the setting to be saved")
