"""Preemption: who may be evicted (policy), in which order (ordering), and which set (search)."""

from .retry import find_victims
from .search import Failure, Plan

__all__ = ["Failure", "Plan", "find_victims"]
