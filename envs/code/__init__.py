"""Code-v0: Python programming tasks verified in an isolated sandbox (docs/envs/code.md)."""

from textgym.envs.code.env import CodeEnv

__all__ = ["CodeEnv"]
