"""Training from notebooks: ``submit_training``, the ``%%train`` cell magic, and ``tenancy submit|jobs|logs|cancel``.

Inside a single-user server everything needed is in the environment:
``JUPYTERHUB_API_TOKEN`` (the server's token) and ``TENANCY_API_URL`` (set by the
spawner). ``%load_ext hub_ext.client`` registers the magic.
"""

from .api import Job, TenancyClient, TenancyError, submit_training


def load_ipython_extension(ipython):
    from .magic import register

    register(ipython)


__all__ = ["Job", "TenancyClient", "TenancyError", "submit_training", "load_ipython_extension"]
