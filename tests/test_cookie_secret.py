"""The key that signs the service's cookies: the same on every replica (derived from the hub API
token they share), so that the pages' login made at one leader holds at the next."""

from __future__ import annotations

import pytest
from tornado.web import create_signed_value, decode_signed_value
from traitlets import TraitError

from hub_ext.service.app import TenancyService
from hub_ext.service.security import cookie_secret


def test_replicas_with_one_token_accept_each_others_cookies():
    leader, next_leader = cookie_secret("", "the-hub-token"), cookie_secret("", "the-hub-token")
    cookie = create_signed_value(leader, "service-tenancy-oauth", "a-token")
    assert decode_signed_value(next_leader, "service-tenancy-oauth", cookie) == b"a-token"
    other = cookie_secret("", "another-token")
    assert decode_signed_value(other, "service-tenancy-oauth", cookie) is None
    assert b"the-hub-token" not in leader and len(leader) == 32


def test_a_configured_secret_wins_and_without_a_token_it_is_random():
    assert cookie_secret("x" * 40, "the-hub-token") == b"x" * 40
    assert cookie_secret("", "") != cookie_secret("", "")


def test_a_short_configured_secret_is_refused_in_one_line():
    with pytest.raises(TraitError, match=r"^TenancyService.cookie_secret has 8 characters; at least 32 are needed$"):
        TenancyService(cookie_secret="12345678")
