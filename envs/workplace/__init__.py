"""Workplace-v0: a workplace assistant over SQLite databases, verified by final state.

See :class:`WorkplaceEnv` and docs/envs/workplace.md.
"""

from textgym.envs.workplace.env import WorkplaceEnv

__all__ = ["WorkplaceEnv"]
