"""Identity-provider groups become hub groups, and hub groups are tenants.

``TenancyAuthenticatorMixin`` goes in front of any JupyterHub authenticator
(``class MyAuth(TenancyAuthenticatorMixin, GenericOAuthenticator)``; ready-made ones for
Keycloak-like OpenID Connect providers and LDAP are in ``hub_ext.identity``). The
authenticator itself reads the provider's groups (OAuthenticator's ``manage_groups`` with
``auth_state_groups_key``, LDAPAuthenticator's ``allowed_groups``); the mixin only maps
their names to team groups (``group_map``, ``only_mapped_groups``), so membership follows
the provider at every login. Tenant settings live in the groups' properties (see
``tenants``). Each login leaves in the user's ``user_info`` which provider groups came and
which of them gave no team (``user_info["tenancy"]``), for the no-team page and the
admins' Tenants page.

``DemoAuthenticator`` is the laptop demo's: a fixed list of users, each with
their identity-provider groups, and one shared password.
"""

from __future__ import annotations

import hmac
import logging

from jupyterhub.auth import Authenticator
from jupyterhub.utils import maybe_future
from traitlets import Bool, Dict, Float, Unicode, default, validate
from traitlets.config import Configurable

#: A group is a team when its properties set one of these (as ``hub_ext.tenants`` reads them).
TEAM_KEYS = ("tenancy.namespace", "tenancy.quota-leaf")


def provider_group_name(group: str) -> str:
    """An LDAP group's DN (``cn=data-science-alpha,ou=groups,dc=example,dc=org``) by its first
    RDN's value, as people name it; any other name as it is."""
    first = group.split(",", 1)[0]
    attr, eq, value = first.partition("=")
    return value.strip() if eq and "," in group and attr.strip().isalpha() else group


def map_targets(group_map: dict, log: logging.Logger | None = None) -> dict[str, list[str]]:
    """``group_map`` with every target as a list of names; a bad entry is left out with one line."""
    out: dict[str, list[str]] = {}
    for source, target in group_map.items():
        names = [target] if isinstance(target, str) else target
        if not isinstance(source, str) or not source or not isinstance(names, (list, tuple)) or not names \
                or not all(isinstance(n, str) and n.strip() for n in names):
            if log is not None:
                log.error("TenancyAuthenticatorMixin.group_map: %r -> %r is left out: a target is a group name or a "
                          "list of group names", source, target)
            continue
        out[source] = [n.strip() for n in names]
    return out


def is_team(properties) -> bool:
    return isinstance(properties, dict) and any(k in properties for k in TEAM_KEYS)


class TenancyAuthenticatorMixin(Configurable):
    group_map = Dict(
        help="""
        Identity-provider group -> hub group (a string or a list of strings). Example::

            c.TenancyAuthenticatorMixin.group_map = {"data-science-alpha": "team-alpha"}

        LDAP groups may be named by their DN or by its first value (``data-science-alpha`` for
        ``cn=data-science-alpha,ou=groups,dc=example,dc=org``). Groups not in the map keep their
        name, unless ``only_mapped_groups`` is set. A target that is not a team (a hub group
        with ``tenancy.namespace`` or ``tenancy.quota-leaf``) is named in one log line at hub
        start and at each login that reaches it, never an error at login.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    only_mapped_groups = Bool(
        False, help="Drop identity-provider groups that are not in ``group_map`` (they are still recorded "
                    "in the user's ``user_info`` as groups that gave no team).",
    ).tag(config=True)

    tenancy_service_name = Unicode(
        "tenancy", help="The scheduler service's name in the hub: at login, a user's waiting work in a team "
                        "they left is cancelled through it.",
    ).tag(config=True)

    refuse_wrong_group_properties = Bool(
        True,
        help="""
        Check a group's properties with the tenancy service when they are saved (the admin panel's
        Apply, ``PUT /hub/api/groups/{name}/properties``) and refuse wrong ones with a 400 whose one
        line names the group, the property and the fix. When the service cannot be asked, the save
        goes through (one line in the log) and the service keeps the team on its last good
        properties. ``?force=true`` on the request stores them unchecked. Example::

            c.TenancyAuthenticatorMixin.refuse_wrong_group_properties = False  # store anything, as JupyterHub does

        .. versionadded:: 0.7
        """,
    ).tag(config=True)

    group_check_timeout = Float(
        10.0, help="Seconds a save of a group's properties waits for the tenancy service's check before it "
                   "goes through unchecked.",
    ).tag(config=True)

    @default("manage_groups")
    def _default_manage_groups(self):
        return True

    @validate("group_map")
    def _valid_group_map(self, proposal):
        value = proposal["value"]
        bad = {k: v for k, v in value.items() if k not in map_targets({k: v})}
        if bad:
            map_targets(bad, self.log)  # one line each; the rest of the map works
        return {k: v for k, v in value.items() if k not in bad}

    # -- the mapping ------------------------------------------------------------------
    def map_groups(self, groups) -> list[str]:
        return self._mapping(groups)[0]

    def _mapping(self, groups) -> tuple[list[str], dict[str, list[str] | None]]:
        """(hub groups, provider group -> the hub groups group_map gives it, None when it has no entry)."""
        targets = map_targets(self.group_map)
        out: list[str] = []
        gave: dict[str, list[str] | None] = {}
        for group in groups or []:
            name = provider_group_name(group)
            names = targets.get(group) or targets.get(name)
            gave[name] = names
            if names is None:
                names = [] if self.only_mapped_groups else [name]
            out.extend(n for n in names if n not in out)
        return out, gave

    def provider_groups(self, model: dict) -> list[str] | None:
        """The provider's groups in an auth model: ``groups`` (OAuthenticator with ``manage_groups``,
        the demo's), else LDAPAuthenticator's ``auth_state["ldap_groups"]``; None when neither."""
        if model.get("groups") is not None:
            return list(model["groups"])
        state = model.get("auth_state") or {}
        if isinstance(state.get("ldap_groups"), list):
            return list(state["ldap_groups"])
        return None

    def _claim_missing(self, model: dict) -> str | None:
        """OAuthenticator's groups claim path when the provider's answer lacks it (it then gives no
        groups, and logs its own line)."""
        key = getattr(self, "auth_state_groups_key", None)
        here = model.get("auth_state")
        if not isinstance(key, str) or not key or not isinstance(here, dict):
            return None
        for part in key.split("."):
            if not isinstance(here, dict) or part not in here:
                return key
            here = here[part]
        return None

    def apply_mapping(self, model: dict, db=None) -> dict:
        """Map the provider's groups in ``model`` to hub groups, and record in ``user_info["tenancy"]``
        which came and which gave no team (``db``: the hub's database, to tell teams from other groups)."""
        groups = self.provider_groups(model)
        if groups is None:
            return model
        hub_groups, gave = self._mapping(groups)
        model["groups"] = hub_groups
        no_team: dict[str, str] = {}
        for group, names in gave.items():
            if names is None and (self.only_mapped_groups or (db is not None and not self._is_team(db, group))):
                no_team[group] = "not in group_map"
            elif names is not None and db is not None and not any(self._is_team(db, n) for n in names):
                no_team[group] = f"its group_map target {', '.join(names)} is not a team"
                self.log.warning("%s: provider group %s maps to %s, which is not a team: give it a tenancy.namespace "
                                 "or tenancy.quota-leaf property (admin panel, Groups)", model.get("name"), group,
                                 ", ".join(names))
        record = {"providerGroups": sorted(gave), "noTeam": no_team}
        claim = self._claim_missing(model)
        if claim:
            record["groupsClaimMissing"] = claim
        model["user_info"] = {**(model.get("user_info") or {}), "tenancy": record}
        return model

    def _is_team(self, db, name: str) -> bool:
        return is_team(self._group_properties(db, name))

    @staticmethod
    def _group_properties(db, name: str):
        from jupyterhub import orm

        group = orm.Group.find(db, name)
        return None if group is None else (group.properties or {})

    # -- where JupyterHub calls in ---------------------------------------------------------
    def get_handlers(self, app):
        """The authenticator's own, and the group-properties save that checks with the service first
        (``hub_ext.group_properties``: served before JupyterHub's own handler of that route)."""
        from .group_properties import ROUTE, CheckedGroupPropertiesHandler

        return [*super().get_handlers(app), (ROUTE, CheckedGroupPropertiesHandler)]

    async def run_post_auth_hook(self, handler, auth_model):
        """After the authenticator's own checks (``allowed_groups``, ``admin_groups`` see the provider's
        names): map the groups, and cancel the user's waiting work in teams they left."""
        auth_model = await maybe_future(super().run_post_auth_hook(handler, auth_model))
        db = getattr(handler, "db", None)
        auth_model = self.apply_mapping(auth_model, db)
        if db is not None and self.manage_groups and auth_model.get("groups") is not None:
            await self._leave_teams(handler, auth_model)
        return auth_model

    async def refresh_user(self, user, handler=None, **kwargs):
        """OAuthenticator's refresh brings the provider's groups again: mapped as at login."""
        model = await maybe_future(super().refresh_user(user, handler, **kwargs))
        if isinstance(model, dict):
            model = self.apply_mapping(model, getattr(handler, "db", None))
        return model

    async def _leave_teams(self, handler, model: dict) -> None:
        from .identity.moves import cancel_waiting_work, teams_left

        user = handler.find_user(model["name"])
        left = teams_left(user, model["groups"]) if user is not None else []
        if left:
            service = (handler.settings.get("services") or {}).get(self.tenancy_service_name)
            await cancel_waiting_work(service, user.name, left, self.log)

    def check_allow_config(self):
        """At hub start: one line for each group_map target that is not (yet) a team."""
        super().check_allow_config()
        db = getattr(self.parent, "db", None)
        if db is None:
            return
        for source, names in map_targets(self.group_map).items():
            for name in names:
                if not self._is_team(db, name):
                    self.log.warning("group_map maps %s to %s, which is not a team yet: in the admin panel create "
                                     "group %s with a tenancy.namespace or tenancy.quota-leaf property", source, name,
                                     name)


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
