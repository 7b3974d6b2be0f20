"""Stop or delete one of one's own servers from where the work is shown (the Jobs page, a job's page).

``DELETE api/v1/servers/{server}`` (``api/v1/servers/`` is the default server; ``?remove=true`` deletes a
named server too) asks the hub's REST API with the caller's own login, the token the page's hub login
gave this service (or the token the caller sent): the hub decides, as it does for its own pages' Stop and
Delete. The service's own token, which may stop anyone's server, is not used for this. The hub gives a
page's login these rights when the service's ``oauth_client_allowed_scopes`` include
``delete:servers!user`` (the demo's and the z2jh values' do).
"""

from __future__ import annotations

import json
from urllib.parse import quote

from tornado import web
from tornado.escape import url_unescape
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from .handlers import APIHandler
from .identity import SERVICE


def _label(server: str) -> str:
    return f"your server {server}" if server else "your default server"


class OwnServerHandler(APIHandler):
    async def delete(self, server: str):
        server = url_unescape(server or "")
        remove = self.get_argument("remove", "").lower() in ("1", "true", "yes")
        if self.identity is SERVICE:
            raise web.HTTPError(403, "the service's own token stops servers as the scheduler, not here")
        if remove and not server:
            raise web.HTTPError(400, "the default server cannot be deleted, only stopped (remove=true is for a "
                                     "named server)")
        token = self.hub_auth.get_token(self)
        me = quote(self.identity.name, safe="")
        path = f"/users/{me}/servers/{quote(server, safe='')}" if server else f"/users/{me}/server"
        code, message = await self._ask_hub(path, token, {"remove": True} if remove else None)
        label = _label(server)
        if code in (202, 204):
            self.send({"user": self.identity.name, "server": server, "removed": remove, "pending": code == 202})
        elif code == 403:
            raise web.HTTPError(403, f"the hub refused to {'delete' if remove else 'stop'} {label} with this "
                                     "page's login, which may not stop servers (the hub gives it that right when "
                                     "the tenancy service's oauth_client_allowed_scopes include "
                                     "delete:servers!user; after such a change, log out of the hub and in again)")
        elif code == 404:
            raise web.HTTPError(404, f"{label} does not exist (any more): it may have been deleted already")
        elif code == 400 and message:
            raise web.HTTPError(400, f"the hub did not {'delete' if remove else 'stop'} {label}: {message}")
        else:
            raise web.HTTPError(503, f"the hub could not {'delete' if remove else 'stop'} {label} now "
                                     f"(it answered {code}); try again in a moment")

    async def _ask_hub(self, path: str, token: str, body) -> tuple[int, str]:
        """The hub's answer to a DELETE with ``token``: its status and its message, if it gave one."""
        req = HTTPRequest(self.hub.api_url + path, method="DELETE", allow_nonstandard_methods=True,
                          headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
                          body=json.dumps(body) if body is not None else None, request_timeout=30)
        try:
            resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        except (OSError, HTTPClientError):
            return 599, ""
        try:
            message = json.loads(resp.body or b"{}").get("message") or ""
        except (ValueError, AttributeError):
            message = ""
        return resp.code, message


def own_server_routes(prefix: str) -> list:
    return [(prefix.rstrip("/") + r"/api/v1/servers/([^/]*)", OwnServerHandler)]
