"""Training from notebooks: ``submit_training``, the ``%%train`` cell magic, and ``tenancy submit|jobs|logs|cancel|datasets``.

Inside a single-user server everything needed is in the environment:
``JUPYTERHUB_API_TOKEN`` (the server's token) and ``TENANCY_API_URL`` (set by the
spawner). ``%load_ext hub_ext.client`` registers the magic; ``QuotaWidget()`` shows the
team's quota and my jobs, live.
"""

from .api import Job, TenancyClient, TenancyError, submit_training


def __getattr__(name):
    # ipywidgets only when the widget is wanted: the command line does not need it.
    if name == "QuotaWidget":
        from .widget import QuotaWidget

        return QuotaWidget
    raise AttributeError(name)


def load_ipython_extension(ipython):
    from .magic import register

    register(ipython)


__all__ = ["Job", "QuotaWidget", "TenancyClient", "TenancyError", "submit_training", "load_ipython_extension"]
