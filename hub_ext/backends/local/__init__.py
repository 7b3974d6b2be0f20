"""The embedded backend: a declared virtual capacity, workloads as local processes."""

__all__ = ["LocalBackend"]


def __getattr__(name: str):
    # LocalBackend is imported when it is asked for, not with the package: each training pod's runner
    # (``python -m hub_ext.backends.local.runner``, standard library only), the hub's configuration and
    # its spawner (``cgroups``, ``accounts``) import modules of this package, and the backend would bring
    # the quota model and the Kubernetes client with it: about a CPU second for every pod and every start.
    if name == "LocalBackend":
        from .backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
