"""Spawners that put notebooks through the tenancy scheduler: local processes (``tenancy-local``)
and pods in the team's namespace (``tenancy-kube``, ``spawner.kube.TenancyKubeSpawner``, imported
on use so that the local demo does not load KubeSpawner)."""

from .local import TenancyLocalSpawner
from .mixin import TenancySpawnerMixin

__all__ = ["TenancyLocalSpawner", "TenancySpawnerMixin"]
