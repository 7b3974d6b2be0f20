"""Preemption: who may be evicted (policy), in which order (ordering), and which set (search)."""

from .search import Plan, find_victims

__all__ = ["Plan", "find_victims"]
