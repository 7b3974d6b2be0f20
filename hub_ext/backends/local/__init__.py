"""The embedded backend: a declared virtual capacity, workloads as local processes."""

from .backend import LocalBackend

__all__ = ["LocalBackend"]
