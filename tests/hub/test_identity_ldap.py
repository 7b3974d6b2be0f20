"""Issue 23: teams from a real LDAP directory (Debian's slapd, tools/ldap) through
jupyterhub-ldapauthenticator, without a browser: alice logs in and works in her team; a directory
admin moves her to the other team's groupOfNames; at her next login she acts in the new team only,
her waiting work in the old one is cancelled and her running notebook goes on (README, "Identity").
Someone whose groups give no team is recorded, and a group_map target that is not a team is one line
at hub start; the admin, logged in through the directory in headless Chromium, sees those groups on the
Tenants page (screenshot docs/screenshots/ldap-tenants-provider-groups.png)."""

from __future__ import annotations

import re
import sys

import pytest

from browser import browser, logged_in, shot  # noqa: F401 - the fixture
from demo_hub import ROOT
from identity import (COMMON, GROUP_MAP, admin_token, after_the_move, hub_groups, make_teams, running_notebook, user_info, wait_teams,
                      waiting_job)

sys.path.insert(0, str(ROOT / "tools" / "ldap"))
from slapd import Slapd, SlapdError, group_dn  # noqa: E402

#: What a platform sets for LDAP (README, "Identity"), with the test directory's address.
LDAP_CONFIG = """
c.JupyterHub.authenticator_class = "hub_ext.identity.ldap.TenancyLDAPAuthenticator"
c.TenancyLDAPAuthenticator.server_address = "127.0.0.1"
c.TenancyLDAPAuthenticator.server_port = {port}
c.TenancyLDAPAuthenticator.tls_strategy = "insecure"
c.TenancyLDAPAuthenticator.bind_dn_template = ["uid={{username}},ou=people,dc=example,dc=org"]
c.TenancyLDAPAuthenticator.group_search_filter = "(member={{userdn}})"
c.TenancyLDAPAuthenticator.group_attributes = ["member"]
c.TenancyLDAPAuthenticator.allowed_groups = {allowed!r}
c.TenancyLDAPAuthenticator.group_map = {group_map!r}
c.TenancyLDAPAuthenticator.only_mapped_groups = True
"""


@pytest.fixture(scope="module")
def ldap(tmp_path_factory):
    try:
        with Slapd(tmp_path_factory.mktemp("slapd")) as server:
            yield server
    except SlapdError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="module")
def hub(hub_factory, ldap):
    allowed = [group_dn(g) for g in ("data-science-alpha", "data-science-beta", "marketing", "hub-admins")]
    group_map = {**GROUP_MAP, "marketing": "team-gamma"}  # team-gamma is no team: one line at start
    config = COMMON + LDAP_CONFIG.format(port=ldap.port, allowed=allowed, group_map=group_map)
    with hub_factory("ldap-hub", extra_config=config) as h:
        make_teams(h)
        yield h


def test_a_move_in_the_directory_moves_the_team_at_next_login(hub, ldap):
    hub.login("alice", "alice-pw")
    assert hub_groups(hub, "alice") == ["team-alpha"]
    tok = hub.token_for("alice")
    wait_teams(hub, tok, ["team-alpha"])
    hub.start_server("alice", "", {"profile": "small"}, token=tok)
    hub.wait_server_ready("alice", timeout=90)
    nb_id = running_notebook(hub, tok)
    job = waiting_job(hub, tok, "team-alpha")

    ldap.move("alice", "data-science-alpha", "data-science-beta")
    hub.login("alice", "alice-pw")
    assert hub_groups(hub, "alice") == ["team-beta"]
    after_the_move(hub, "alice", tok, job, nb_id)
    assert user_info(hub, "alice") == {"providerGroups": ["data-science-beta"], "noTeam": {}}
    hub.stop_server("alice")


def test_groups_that_give_no_team_are_recorded_and_said_at_start(hub):
    assert "group_map maps marketing to team-gamma, which is not a team yet" in hub.log_path.read_text()
    hub.login("carol", "carol-pw")
    assert hub_groups(hub, "carol") == ["team-gamma"]
    assert user_info(hub, "carol") == {"providerGroups": ["marketing"],
                                       "noTeam": {"marketing": "its group_map target team-gamma is not a team"}}
    with pytest.raises(Exception, match="login as 'carol' failed"):
        hub.login("carol", "wrong")
    # an admin sees on the Tenants page which provider group gave no team, why, and whose it is
    page = hub.request("GET", "/services/tenancy/tenants", token=admin_token(hub))
    assert page.status_code == 200, page.text
    row = re.search(r'<tr data-group="marketing">(.*?)</tr>', page.text, re.S)
    assert row is not None, page.text
    assert re.sub(r"<[^>]+>", "|", row.group(1)).strip("|").split("||") == [
        "marketing", "its group_map target team-gamma is not a team", "carol"]


def test_the_admin_sees_the_providers_groups_that_give_no_team_on_the_tenants_page(hub, browser):
    """Issue 23's page in a browser: the hub's admin logs in through the directory (their group hub-admins
    is allowed and maps to no team), opens the Tenants page and reads which provider groups gave no team,
    why, and whose."""
    hub.login("carol", "carol-pw")  # run alone (-k): carol's marketing is recorded at her login
    page = logged_in(browser, hub, "admin", "hub-admin-pw")
    assert page.url.endswith("/hub/home"), page.url
    page.goto(hub.url("/services/tenancy/tenants"))
    page.wait_for_selector("#unmapped tr[data-group=marketing]")
    cells = lambda group: page.locator(f"#unmapped tr[data-group={group}]").locator("th, td").all_inner_texts()  # noqa: E731
    assert cells("marketing") == ["marketing", "its group_map target team-gamma is not a team", "carol"]
    admins = cells("hub-admins")
    assert admins[0] == "hub-admins" and admins[2] == "admin" and "group_map" in admins[1], admins
    teams = page.locator("#tenants tbody th").all_inner_texts()
    assert teams == ["team-alpha", "team-beta"], teams
    shot(page, "ldap-tenants-provider-groups")
    page.context.close()
