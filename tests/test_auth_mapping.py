"""Issue 23: the group mapping's bad configuration is one log line, never a traceback at login."""

from __future__ import annotations

import logging

import pytest

from hub_ext.auth import DemoAuthenticator
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
