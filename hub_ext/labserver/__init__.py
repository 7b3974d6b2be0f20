"""The single-user server's side of the tenancy lab extension.

A jupyter-server extension, enabled for every server of the environment by
``etc/jupyter/jupyter_server_config.d/jupyterhub-tenancy.json`` (shipped in the wheel).
Under the server's base URL, ``tenancy/api/...`` answers the lab extension: it calls
the tenancy scheduler service with the server's own hub token (``JUPYTERHUB_API_TOKEN``,
scoped to the service by the spawner), so the page needs no login of its own, and it
relays the service's event stream to the page. Outside a tenancy hub
(``TENANCY_API_URL`` unset) it says so and the lab extension stays out of the way.

The built lab extension ships next to it (``labextension/``, made by ``jlpm build``).
"""

from __future__ import annotations

LABEXTENSION = "jupyterhub-tenancy"


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": LABEXTENSION}]


def _jupyter_server_extension_points():
    return [{"module": "hub_ext.labserver"}]


def _load_jupyter_server_extension(serverapp):
    from .handlers import setup_handlers
    from .terminal import keep_path_in_terminals

    setup_handlers(serverapp)
    keep_path_in_terminals(serverapp)


# Older jupyter-server and notebook versions look for this name.
load_jupyter_server_extension = _load_jupyter_server_extension
