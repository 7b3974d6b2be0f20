"""jupyterhub-tenancy: a fair, orderly multi-tenant ML platform for JupyterHub."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One place for the version: labextension/package.json (pyproject.toml's hatch-nodejs-version).
    __version__ = version("jupyterhub-tenancy")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
