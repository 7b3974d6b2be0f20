"""Spawners that put notebooks through the tenancy scheduler: local processes now, KubeSpawner later."""

from .local import TenancyLocalSpawner
from .mixin import TenancySpawnerMixin

__all__ = ["TenancyLocalSpawner", "TenancySpawnerMixin"]
