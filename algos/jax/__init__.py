"""The JAX/Flax GRPO backend: NNX Llama/Qwen2/Qwen3 models, a KV-cache sampler and a sharded learner.

Importing this package is cheap; JAX, Flax and optax load on first use of a name below (and a
missing install raises :class:`textgym.error.MissingDependency` naming ``pip install
'textgym[jax]'``). It exports the same names as :mod:`textgym.algos.torch`
(:data:`textgym.algos.lazy.CONTRACT`); ``ModelConfig``, ``CausalLM``, ``JaxLanguageModel`` and ``make_mesh`` are its own.

Example::

    from textgym.algos.grpo import GRPOConfig, pack
    from textgym.algos.jax import Learner, load_policy

    policy = load_policy("path/to/hf_dir")
    ids, logprobs = policy.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    learner = Learner(policy, GRPOConfig())
    metrics = learner.train_step(pack(rollouts, learner.config, pad_id=policy.pad_id))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textgym.algos import lazy

if TYPE_CHECKING:  # pragma: no cover
    from textgym.algos.jax.config import ModelConfig
    from textgym.algos.jax.learner import Learner, make_schedule
    from textgym.algos.jax.loss import grpo_loss
    from textgym.algos.jax.model import CausalLM
    from textgym.algos.jax.policy import JaxLanguageModel, load_policy
    from textgym.algos.jax.sharding import make_mesh

__all__ = sorted(lazy.CONTRACT)
__getattr__ = lazy.exports(
    __name__,
    {"ModelConfig": "config", "CausalLM": "model", "JaxLanguageModel": "policy", "make_mesh": "sharding"},
    modules=("jax", "flax", "optax", "safetensors"),
    extra="jax",
)
