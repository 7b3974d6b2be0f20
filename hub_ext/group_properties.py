"""The hub refuses a group's wrong tenancy properties when they are saved, with one line that says why.

JupyterHub's admin panel saves a group's properties with ``PUT /hub/api/groups/{name}/properties``,
which stores anything. ``TenancyAuthenticatorMixin.get_handlers`` puts this module's handler on
that same route: JupyterHub adds an authenticator's handlers before its own API's
(``JupyterHub.init_handlers``), and tornado serves a path with the first route that matches.
The handler keeps JupyterHub's scope check (``groups``, filtered by the group), asks the tenancy
service whether the properties make a good team (``POST /api/v1/tenants/{group}/check``, the
service's own rules, with the hub's notebook profiles) and answers 400 with the service's one
line when they do not. When the service cannot be asked the save goes through, with one line in
the hub's log: the service then keeps the team on its last good properties and tells admins.
``?force=true`` stores the properties unchecked (for a team whose leaf is to be added next).
"""

from __future__ import annotations

from jupyterhub.apihandlers.groups import GroupPropertiesAPIHandler
from jupyterhub.scopes import needs_scope
from tornado import web

from .apiclient import TenancyError
from .apiclient.aio import AsyncTenancyClient

ROUTE = r"/api/groups/([^/]+)/properties"


def configured_profiles(spawner_class, config) -> list[str] | None:
    """The notebook profile slugs the hub's spawner is configured with, as traitlets resolves them (the
    most derived class's section wins); None when the spawner has no profiles."""
    trait = spawner_class.class_traits().get("profiles") if spawner_class is not None else None
    if trait is None:
        return None
    profiles = trait.default()
    for name in spawner_class.section_names():
        if config is not None and name in config and "profiles" in config[name]:
            profiles = config[name]["profiles"]
    return list(profiles) if isinstance(profiles, dict) else None


async def refusal_of(handler, group: str, properties: dict) -> str | None:
    """The service's one line when ``properties`` would make ``group`` a wrong team; None when they are
    right, or when the service cannot say (logged; the save goes through)."""
    auth = handler.authenticator
    service = (handler.settings.get("services") or {}).get(auth.tenancy_service_name)
    client = AsyncTenancyClient.for_hub_service(service, timeout=auth.group_check_timeout)
    if client is None:
        handler.log.warning("The properties of group %s are saved unchecked: the hub has no tenancy service %s to "
                            "check them", group, auth.tenancy_service_name)
        return None
    profiles = configured_profiles(handler.settings.get("spawner_class"), handler.settings.get("config"))
    try:
        answer = await client.check_group(group, properties, profiles)
    except TenancyError as err:
        handler.log.warning("The properties of group %s are saved unchecked: the tenancy service could not check "
                            "them (%s); it keeps the team on its last good properties if they are wrong", group, err)
        return None
    if not isinstance(answer, dict) or answer.get("valid") is not False:
        return None
    return str(answer.get("message") or f"The properties of group {group} were not saved: they do not make a team.")


class CheckedGroupPropertiesHandler(GroupPropertiesAPIHandler):
    """JupyterHub's handler, after the tenancy service has checked the new properties."""

    @needs_scope("groups")
    async def put(self, group_name):
        self.find_group(group_name)  # an unknown group is a 404, as before
        data = self.get_json_body()
        force = self.get_argument("force", "false").lower() in ("1", "true", "yes")
        if isinstance(data, dict) and self.authenticator.refuse_wrong_group_properties:
            if force:
                self.log.warning("%s stores the properties of group %s unchecked (force=true)",
                                 self.current_user.name, group_name)
            else:
                line = await refusal_of(self, group_name, data)
                if line:
                    self.log.info("%s: %s", self.current_user.name, line)
                    raise web.HTTPError(400, line)
        return super().put(group_name)  # its own scope check again, then the stock save
