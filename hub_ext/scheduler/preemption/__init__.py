"""Preemption: who may be evicted (policy), in which order (ordering), and which set (search)."""

from .search import Failure, Plan, find_victims

__all__ = ["Failure", "Plan", "find_victims"]
