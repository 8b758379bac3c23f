"""The JAX/Flax GRPO backend: NNX Llama/Qwen2/Qwen3 models, a KV-cache sampler and a sharded learner.

Importing this package is cheap; JAX, Flax and optax load on first use of a name below (and a
missing install raises :class:`textgym.error.MissingDependency` naming ``pip install
'textgym[jax]'``).

Example::

    from textgym.algos.grpo import GRPOConfig, pack
    from textgym.algos.jax import Learner, load_policy

    policy = load_policy("path/to/hf_dir")
    ids, logprobs = policy.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    learner = Learner(policy, GRPOConfig())
    metrics = learner.train_step(pack(rollouts, learner.config, pad_id=policy.pad_id))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from textgym.error import require

_EXPORTS = {
    "load_policy": "policy",
    "Policy": "policy",
    "Learner": "learner",
    "ModelConfig": "config",
    "CausalLM": "model",
    "make_mesh": "sharding",
    "grpo_loss": "loss",
}

if TYPE_CHECKING:  # pragma: no cover
    from textgym.algos.jax.config import ModelConfig
    from textgym.algos.jax.learner import Learner
    from textgym.algos.jax.loss import grpo_loss
    from textgym.algos.jax.model import CausalLM
    from textgym.algos.jax.policy import Policy, load_policy
    from textgym.algos.jax.sharding import make_mesh

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in ("jax", "flax", "optax", "safetensors"):
        require(module, "jax")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
