"""jupyterhub-tenancy: a fair, orderly multi-tenant ML platform for JupyterHub."""

__version__ = "0.1.0"
