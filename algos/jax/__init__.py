"""The JAX/Flax GRPO backend: NNX Llama/Qwen2/Qwen3 models, a KV-cache sampler and a sharded learner.

Importing this package is cheap; JAX, Flax and optax load on first use of a name below (and a
missing install raises :class:`textgym.error.MissingDependency` naming ``pip install
'textgym[jax]'``). It exports the same names as :mod:`textgym.algos.torch`
(:data:`textgym.algos.backends.contract.CONTRACT`); ``ModelConfig``, ``CausalLM``, ``JaxLanguageModel`` and ``make_mesh`` are its own.

Example::

    from textgym.algos.grpo import GRPOConfig, pack
    from textgym.algos.jax import Learner, load_model

    model = load_model("path/to/hf_dir")
    ids, logprobs = model.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    learner = Learner(model, GRPOConfig())
    metrics = learner.train_step(pack(rollouts, learner.config, pad_id=model.pad_id))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textgym.algos.backends import contract

if TYPE_CHECKING:  # pragma: no cover
    from textgym.algos.jax.config import ModelConfig
    from textgym.algos.jax.learner import Learner, make_schedule
    from textgym.algos.jax.loss import grpo_loss
    from textgym.algos.jax.model import JaxLanguageModel, load_model
    from textgym.algos.jax.sharding import device_count, make_mesh
    from textgym.algos.jax.transformer import CausalLM

__all__ = sorted(contract.CONTRACT)
__getattr__ = contract.exports(
    __name__,
    {"ModelConfig": "config", "CausalLM": "transformer", "JaxLanguageModel": "model", "make_mesh": "sharding", "device_count": "sharding"},
    modules=("jax", "flax", "optax", "safetensors"),
    extra="jax",
)
