"""Built-in policies: random, oracle, local models and OpenAI-compatible endpoints."""

from textgym.policies.base import Policy, PolicyOutput

__all__ = ["Policy", "PolicyOutput"]
