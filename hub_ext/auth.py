"""Identity-provider groups become hub groups, and hub groups are tenants.

``TenancyAuthenticatorMixin`` goes in front of any JupyterHub authenticator
(``class MyAuth(TenancyAuthenticatorMixin, GitHubOAuthenticator)``): it turns on
``manage_groups`` and maps the identity provider's group names to hub group
names (``group_map``), so membership follows the identity provider at every
login. Tenant settings live in the groups' properties (see ``tenants``).

``DemoAuthenticator`` is the laptop demo's: a fixed list of users, each with
their identity-provider groups, and one shared password.
"""

from __future__ import annotations

import hmac

from jupyterhub.auth import Authenticator
from jupyterhub.utils import maybe_future
from traitlets import Bool, Dict, Unicode, default
from traitlets.config import Configurable


class TenancyAuthenticatorMixin(Configurable):
    group_map = Dict(
        help="""
        Identity-provider group -> hub group (a string or a list of strings). Example::

            c.TenancyAuthenticatorMixin.group_map = {"data-science-alpha": "team-alpha"}

        Groups not in the map keep their name, unless ``only_mapped_groups`` is set.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    only_mapped_groups = Bool(
        False, help="Drop identity-provider groups that are not in ``group_map``.",
    ).tag(config=True)

    @default("manage_groups")
    def _default_manage_groups(self):
        return True

    def map_groups(self, groups) -> list[str]:
        out: list[str] = []
        for group in groups or []:
            target = self.group_map.get(group)
            if target is None:
                if self.only_mapped_groups:
                    continue
                target = group
            for name in [target] if isinstance(target, str) else list(target):
                if name not in out:
                    out.append(name)
        return out

    async def authenticate(self, handler, data):
        model = await maybe_future(super().authenticate(handler, data))
        if model is None:
            return None
        if isinstance(model, str):
            model = {"name": model}
        model["groups"] = self.map_groups(model.get("groups"))
        return model


class FixedUsersAuthenticator(Authenticator):
    """A fixed list of users, each with identity-provider groups, and one shared password."""

    users = Dict(
        help="""
        ``{"alice": {"groups": ["team-a"], "admin": false}, ...}``: who may log in,
        with their identity-provider groups.
        """,
    ).tag(config=True)

    password = Unicode("demo", help="The shared password.").tag(config=True)

    @default("allowed_users")
    def _default_allowed_users(self):
        return set(self.users)

    @default("admin_users")
    def _default_admin_users(self):
        return {name for name, info in self.users.items() if info.get("admin")}

    async def authenticate(self, handler, data):
        name, password = data.get("username", ""), data.get("password", "")
        if name not in self.users or not hmac.compare_digest(password.encode(), self.password.encode()):
            return None
        info = self.users[name]
        return {"name": name, "groups": list(info.get("groups", [])), "admin": bool(info.get("admin", False))}


class DemoAuthenticator(TenancyAuthenticatorMixin, FixedUsersAuthenticator):
    """The one-command demo's authenticator: fixed users, groups mapped to tenants."""
