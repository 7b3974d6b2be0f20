"""Issue 23: teams from a real Keycloak (its distribution from Maven Central, tools/keycloak), in
headless Chromium: alice logs in on Keycloak's own login page, lands on her team's spawn page and
starts work; an admin moves her to the other group through Keycloak's admin REST API; at her next
login she acts in the new team only, her waiting work in the old team is cancelled and her running
notebook goes on (README, "Identity"). carol, whose only group maps to no team, sees a page that says
so and whom to ask. One Keycloak for the session (it is the slow part: its boot is printed).
Screenshots: docs/screenshots/identity-*.png."""

from __future__ import annotations

import sys

import pytest

from browser import browser, shot  # noqa: F401 - the fixture
from demo_hub import ROOT
from identity import (COMMON, GROUP_MAP, after_the_move, hub_groups, make_teams, running_notebook, user_info, wait_teams,
                      waiting_job)

sys.path.insert(0, str(ROOT / "tools" / "keycloak"))
from keycloak import CLIENT_ID, CLIENT_SECRET, Keycloak, KeycloakError  # noqa: E402

#: What a platform sets for Keycloak (README, "Identity"), with the test server's addresses.
OIDC_CONFIG = """
c.JupyterHub.authenticator_class = "hub_ext.identity.oauth.TenancyOAuthenticator"
c.TenancyOAuthenticator.client_id = {client_id!r}
c.TenancyOAuthenticator.client_secret = {client_secret!r}
c.TenancyOAuthenticator.oauth_callback_url = f"http://127.0.0.1:{{c.JupyterHub.port}}/hub/oauth_callback"
c.TenancyOAuthenticator.authorize_url = "{issuer}/protocol/openid-connect/auth"
c.TenancyOAuthenticator.token_url = "{issuer}/protocol/openid-connect/token"
c.TenancyOAuthenticator.userdata_url = "{issuer}/protocol/openid-connect/userinfo"
c.TenancyOAuthenticator.scope = ["openid", "profile", "email"]
c.TenancyOAuthenticator.username_claim = "preferred_username"
c.TenancyOAuthenticator.allow_all = True
c.TenancyOAuthenticator.group_map = {group_map!r}
c.TenancyOAuthenticator.only_mapped_groups = True
c.Authenticator.auto_login = True
"""


@pytest.fixture(scope="session")
def keycloak(tmp_path_factory):
    try:
        with Keycloak(tmp_path_factory.mktemp("keycloak")) as kc:
            print(f"\nKeycloak answered OIDC discovery {kc.boot_seconds:.1f} s after kc.sh start-dev")
            yield kc
    except KeycloakError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="module")
def hub(hub_factory, keycloak):
    config = COMMON + OIDC_CONFIG.format(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, issuer=keycloak.issuer,
                                         group_map=GROUP_MAP)
    with hub_factory("keycloak-hub", extra_config=config) as h:
        make_teams(h)
        yield h


def keycloak_login(browser, hub, user: str, password: str, next_url: str, screenshot: str | None = None):
    """A new browser (no Keycloak session yet) logged in through Keycloak's own page; the page at ``next_url``."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(hub.url(f"/hub/login?next={next_url}"))
    page.wait_for_selector("#kc-login")  # auto_login: straight to Keycloak
    assert page.url.startswith("http://127.0.0.1:") and "/realms/tenancy/" in page.url
    page.fill("#username", user)
    page.fill("#password", password)
    if screenshot:
        shot(page, screenshot)
    with page.expect_navigation(url=lambda u: u.startswith(hub.public_url)):
        page.click("#kc-login")
    page.wait_for_load_state()
    return page


def test_login_through_keycloak_lands_on_the_team_spawn_page_and_a_move_changes_the_team(browser, hub, keycloak):
    page = keycloak_login(browser, hub, "alice", "alice-pw", "/hub/spawn", screenshot="identity-keycloak-login")
    page.wait_for_selector("#tenancy-profiles")
    assert "Team: team-alpha" in page.inner_text(".tenancy-options")
    shot(page, "identity-spawn")
    assert hub_groups(hub, "alice") == ["team-alpha"]
    tok = hub.token_for("alice")
    wait_teams(hub, tok, ["team-alpha"])
    page.check("input[name=profile][value=small]")
    page.click("#spawn_form button[type=submit]")
    hub.wait_server_ready("alice", timeout=90)
    nb_id = running_notebook(hub, tok)
    job = waiting_job(hub, tok, "team-alpha")
    page.context.close()

    keycloak.move("alice", "data-science-alpha", "data-science-beta")
    page = keycloak_login(browser, hub, "alice", "alice-pw", "/hub/spawn/alice/second")
    page.wait_for_selector("#tenancy-profiles")
    form = page.inner_text(".tenancy-options")
    assert "Team: team-beta" in form and "team-alpha" not in form
    assert hub_groups(hub, "alice") == ["team-beta"]
    after_the_move(hub, "alice", tok, job, nb_id)
    assert user_info(hub, "alice") == {"providerGroups": ["data-science-beta"], "noTeam": {}}
    page.context.close()
    hub.stop_server("alice")


def test_someone_in_no_team_sees_why_and_whom_to_ask(browser, hub):
    page = keycloak_login(browser, hub, "carol", "carol-pw", "/hub/spawn")
    page.wait_for_selector("#tenancy-no-team")
    text = page.inner_text("#tenancy-no-team")
    assert "You are not in a team yet" in text
    assert "Your groups at your identity provider: marketing." in text
    assert "Ask the platform team (platform@example.org) to add you to a team's group" in text
    assert page.locator("#spawn_form").count() == 0  # no Start button that could only fail
    assert hub.server_model("carol") is None  # and nothing was started
    shot(page, "identity-no-team")
    assert user_info(hub, "carol") == {"providerGroups": ["marketing"], "noTeam": {"marketing": "not in group_map"}}
    page.context.close()
