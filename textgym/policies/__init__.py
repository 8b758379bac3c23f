"""Built-in policies: random, oracle, local models and OpenAI-compatible endpoints.

Every policy follows one protocol (:class:`Policy`): ``act(observations, infos)`` takes a batch
and returns a :class:`PolicyOutput` with one action per observation. None of these modules
imports a deep-learning backend or the ``openai`` client at import time.
"""

from textgym.policies.base import Policy, PolicyOutput, SlotTools
from textgym.policies.model import ModelPolicy
from textgym.policies.openai import OpenAIPolicy
from textgym.policies.oracle import OraclePolicy
from textgym.policies.random import RandomPolicy

__all__ = ["ModelPolicy", "OpenAIPolicy", "OraclePolicy", "Policy", "PolicyOutput", "RandomPolicy", "SlotTools"]
