"""``tenancy`` in a Lab terminal as in a notebook cell.

jupyter-server starts terminals as login shells when it runs under a spawner, and a
login shell reads ``/etc/profile``, which sets ``PATH`` anew: the server's own (the
environment's ``bin``, where ``tenancy`` and ``jupyter`` are) is lost, so the command
is "not found". The rest of the environment survives (``TENANCY_API_URL`` and the
server's ``JUPYTERHUB_API_TOKEN`` included). Here the terminal is still a login shell,
but once the profile has run the server's ``PATH`` is put back in front.
"""

from __future__ import annotations

import os
import shutil


def terminal_command(shell: str, path: str) -> list[str]:
    """A login ``shell`` that ends as an interactive one with ``path`` first on its PATH.

    ``sh -l -c SCRIPT ARG0 ARG1``: the profile runs (login), then SCRIPT with ``$0`` the
    path to put back and ``$1`` the shell to become, so nothing needs quoting.
    """
    script = 'PATH="$0${PATH:+:$PATH}"; export PATH; exec "$1" -i'
    return [shell, "-l", "-c", script, path, shell]


def keep_path_in_terminals(serverapp) -> None:
    """Unless terminals are configured otherwise, make them keep the server's PATH (inside a tenancy hub only)."""
    if os.name == "nt" or not os.environ.get("TENANCY_API_URL"):
        return
    settings = serverapp.terminado_settings
    if settings.get("shell_command"):
        return  # the admin's choice wins
    shell = os.environ.get("SHELL") or shutil.which("sh") or "/bin/sh"
    serverapp.terminado_settings = {**settings,
                                    "shell_command": terminal_command(shell, os.environ.get("PATH", os.defpath))}
