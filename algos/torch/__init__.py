"""The PyTorch GRPO backend: transformers models, a KV-cache sampler and a DDP learner.

Mirrors :mod:`textgym.algos.jax` name for name (:data:`textgym.algos.backends.contract.CONTRACT`), so the
training loop swaps backends with one word; ``TorchLanguageModel``, ``generate``, ``load_weights``
and ``sequence_logprobs`` are its own::

    from textgym.algos.torch import Learner, load_model

    model = load_model("path/to/hf-dir")            # any local AutoModelForCausalLM checkpoint
    ids, logprobs = model.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    learner = Learner(model, GRPOConfig(lr=1e-5))
    metrics = learner.train_step(pack(rollouts, learner.config, pad_id=model.pad_id))

Importing this package is cheap; torch and transformers load on first use of a name (a missing
install raises :class:`textgym.error.MissingDependency` naming ``pip install 'textgym[torch]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textgym.algos.backends import contract

if TYPE_CHECKING:  # pragma: no cover
    from textgym.algos.torch.learner import Learner, load_weights, make_schedule
    from textgym.algos.torch.loss import grpo_loss
    from textgym.algos.torch.model import TorchLanguageModel, load_model, sequence_logprobs
    from textgym.algos.torch.sampler import generate

__all__ = sorted(contract.CONTRACT)
__getattr__ = contract.exports(
    __name__,
    {"TorchLanguageModel": "model", "generate": "sampler", "load_weights": "learner", "sequence_logprobs": "model"},
    modules=("torch", "transformers", "safetensors"),
    extra="torch",
)
