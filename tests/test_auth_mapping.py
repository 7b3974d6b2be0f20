"""Issue 23: the group mapping's bad configuration is one log line, never a traceback at login."""

from __future__ import annotations

import logging

import pytest

from hub_ext.auth import DemoAuthenticator
from hub_ext.group_properties import ROUTE, CheckedGroupPropertiesHandler, configured_profiles, refusal_of
from hub_ext.identity.ldap import TenancyLDAPAuthenticator
from hub_ext.identity.oauth import TenancyOAuthenticator


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_bad_group_map_target_is_one_line_and_the_rest_works(caplog):
    auth = TenancyOAuthenticator(group_map={"a": "team-a", "b": 3, "c": [], "d": ["team-d", ""]})
    assert auth.group_map == {"a": "team-a"}
    assert lines(caplog) == [
        f"TenancyAuthenticatorMixin.group_map: {k!r} -> {v!r} is left out: a target is a group name or a list of "
        "group names" for k, v in (("b", 3), ("c", []), ("d", ["team-d", ""]))]
    assert auth.map_groups(["a", "b", "x"]) == ["team-a", "b", "x"]


@pytest.mark.asyncio
async def test_a_missing_groups_claim_is_recorded_not_raised():
    auth = TenancyOAuthenticator(group_map={"data-science-alpha": "team-alpha"}, only_mapped_groups=True)
    model = {"name": "alice", "groups": [], "auth_state": {"oauth_user": {"preferred_username": "alice"}}}
    out = await auth.run_post_auth_hook(None, model)
    assert out["groups"] == []
    assert out["user_info"]["tenancy"] == {"providerGroups": [], "noTeam": {}, "groupsClaimMissing": "oauth_user.groups"}


@pytest.mark.asyncio
async def test_ldap_groups_by_dn_or_cn_and_unmapped_ones_recorded():
    auth = TenancyLDAPAuthenticator(group_map={"data-science-alpha": "team-alpha"}, only_mapped_groups=True)
    model = {"name": "alice", "auth_state": {"ldap_groups": ["cn=data-science-alpha,ou=groups,dc=example,dc=org",
                                                             "cn=marketing,ou=groups,dc=example,dc=org"]}}
    out = await auth.run_post_auth_hook(None, model)
    assert out["groups"] == ["team-alpha"]
    assert out["user_info"]["tenancy"] == {"providerGroups": ["data-science-alpha", "marketing"],
                                           "noTeam": {"marketing": "not in group_map"}}


@pytest.mark.asyncio
async def test_the_demo_maps_after_its_own_login():
    auth = DemoAuthenticator(users={"erin": {"groups": ["idp-a", "idp-b"]}}, group_map={"idp-a": ["team-a", "team-b"]})
    model = await auth.authenticate(None, {"username": "erin", "password": "demo"})
    out = await auth.run_post_auth_hook(None, model)
    assert out["groups"] == ["team-a", "team-b", "idp-b"]


def test_the_authenticator_serves_the_group_properties_save_with_the_check():
    # JupyterHub.init_handlers puts these before its own API's: the same route is served by ours
    assert (ROUTE, CheckedGroupPropertiesHandler) in DemoAuthenticator().get_handlers(None)
    assert ROUTE == r"/api/groups/([^/]+)/properties"  # JupyterHub's own pattern for it, under /hub


def test_the_hubs_profiles_are_read_as_traitlets_reads_them():
    from traitlets.config import Config

    from spawner import TenancyLocalSpawner

    config = Config()
    config.TenancySpawnerMixin.profiles = {"tiny": {}}
    config.TenancyLocalSpawner.profiles = {"small": {}, "large": {}}  # the more derived class wins
    assert configured_profiles(TenancyLocalSpawner, config) == ["small", "large"]
    assert configured_profiles(TenancyLocalSpawner, Config()) == []
    assert configured_profiles(DemoAuthenticator, config) is None  # a class without profiles


@pytest.mark.asyncio
async def test_a_save_goes_through_unchecked_with_one_line_when_the_service_cannot_be_asked(caplog):
    import socket
    from types import SimpleNamespace

    with socket.socket() as s:  # a port nothing listens on: the service is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = SimpleNamespace(url=f"http://127.0.0.1:{port}", prefix="/services/tenancy/", api_token="t")
    handler = SimpleNamespace(authenticator=DemoAuthenticator(), log=logging.getLogger("hub"),
                              settings={"services": {"tenancy": service}})
    assert await refusal_of(handler, "team-c", {"tenancy.priority-classes": "critcal-prod"}) is None
    [line] = lines(caplog)
    assert line.startswith("The properties of group team-c are saved unchecked: the tenancy service could not check "
                           f"them (the tenancy service at http://127.0.0.1:{port}/services/tenancy/api/v1 is unreachable")
