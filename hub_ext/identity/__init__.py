"""Authenticators for real identity providers, with the tenancy group mapping in front.

``oauth.TenancyOAuthenticator``: OpenID Connect (Keycloak, Okta, Azure AD, Dex, ...) through
OAuthenticator's ``GenericOAuthenticator``; its ``manage_groups`` and ``auth_state_groups_key``
read the groups claim. ``ldap.TenancyLDAPAuthenticator``: LDAPAuthenticator; its
``allowed_groups`` say which directory groups may log in, and they are the provider's groups.
Each module imports its authenticator's package (``pip install jupyterhub-tenancy[identity]``).
``moves`` is what a login does about the teams a person left.
"""
