"""What every response of the service carries so a browser cannot be turned against its users.

Pages get a Content-Security-Policy that allows only the service's own scripts,
styles and connections (no inline script: a value that slipped past escaping
still cannot run); the API's JSON gets a policy that allows nothing at all.
Neither may be framed (clickjacking) nor sniffed into another type.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
API_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"


class SecureHeaders(web.RequestHandler):
    """Base of every handler: the headers above (``policy`` chooses the page or the API policy)."""

    policy = API_POLICY

    def set_default_headers(self):
        self.set_header("Content-Security-Policy", self.policy)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Referrer-Policy", "same-origin")


class OAuthCallbackHandler(SecureHeaders, HubOAuthCallbackHandler):
    """JupyterHub's OAuth callback (the browser's login to the service), with our headers."""

    policy = PAGE_POLICY


class StaticFiles(SecureHeaders, web.StaticFileHandler):
    """The pages' own CSS and scripts."""

    policy = PAGE_POLICY


def cookie_secret(configured: str, hub_token: str) -> bytes:
    """The key that signs the service's cookies: the configured one; else one derived from the hub API
    token (every replica holds the same token, so a takeover keeps users logged in; an HMAC under a
    label of its own, so the cookie key tells nothing of the token); else, without a token, a random one."""
    if configured:
        return configured.encode()
    if hub_token:
        return hmac.new(hub_token.encode(), b"jupyterhub-tenancy cookie secret", hashlib.sha256).digest()
    return os.urandom(32)
