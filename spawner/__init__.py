"""Spawners that put notebooks through the tenancy scheduler: local processes (``tenancy-local``)
and pods in the team's namespace (``tenancy-kube``, ``spawner.kube.TenancyKubeSpawner``, imported
on use so that the local demo does not load KubeSpawner)."""

from pathlib import Path

from .local import TenancyLocalSpawner
from .mixin import TenancySpawnerMixin

#: Hub page templates to put first in ``c.JupyterHub.template_paths`` (the waiting page's Stop
#: button stops the server that waits, named or not).
TEMPLATES = str(Path(__file__).with_name("templates"))

__all__ = ["TEMPLATES", "TenancyLocalSpawner", "TenancySpawnerMixin"]
