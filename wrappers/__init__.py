"""textgym.wrappers: cross-cutting behaviour on top of any textgym env."""

from textgym.wrappers.token_observation import TokenObservation

__all__ = ["TokenObservation"]
