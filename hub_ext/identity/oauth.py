"""OpenID Connect login (Keycloak and others) with the provider's groups mapped to teams."""

from __future__ import annotations

from oauthenticator.generic import GenericOAuthenticator
from traitlets import default

from ..auth import TenancyAuthenticatorMixin


class TenancyOAuthenticator(TenancyAuthenticatorMixin, GenericOAuthenticator):
    """``GenericOAuthenticator`` managing hub groups from the provider's ``groups`` claim (userinfo)."""

    @default("auth_state_groups_key")
    def _default_groups_key(self):
        # OAuthenticator keeps the userinfo answer under oauth_user; Keycloak's group mapper names
        # the claim "groups".
        return "oauth_user.groups"
