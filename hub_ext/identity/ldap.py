"""LDAP login with the directory's groups (``groupOfNames`` and the like) mapped to teams."""

from __future__ import annotations

from ldapauthenticator import LDAPAuthenticator

from ..auth import TenancyAuthenticatorMixin


class TenancyLDAPAuthenticator(TenancyAuthenticatorMixin, LDAPAuthenticator):
    """``LDAPAuthenticator`` whose ``allowed_groups`` (group DNs) the user is in become hub groups.

    LDAPAuthenticator looks up only the groups in ``allowed_groups`` and keeps those the user is in
    in ``auth_state["ldap_groups"]``; the mapping takes them from there (``group_map`` keys may be
    the DN or its ``cn``).
    """
