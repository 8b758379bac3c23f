"""The PyTorch GRPO backend: transformers models, a KV-cache sampler and a DDP learner.

Mirrors :mod:`textgym.algos.jax` name for name, so the training loop swaps backends with one word::

    from textgym.algos.torch import Learner, load_policy

    policy = load_policy("path/to/hf-dir")            # any local AutoModelForCausalLM checkpoint
    ids, logprobs = policy.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    learner = Learner(policy, GRPOConfig(lr=1e-5))
    metrics = learner.train_step(pack(rollouts, learner.config, pad_id=policy.pad_id))

Importing this package imports torch and transformers (``pip install 'textgym[torch]'``).
"""

from textgym.error import require

require("torch", "torch")
require("transformers", "torch")

from textgym.algos.torch.learner import Learner, load_weights, make_schedule  # noqa: E402
from textgym.algos.torch.loss import grpo_loss  # noqa: E402
from textgym.algos.torch.policy import Policy, load_policy, sequence_logprobs  # noqa: E402
from textgym.algos.torch.sampler import generate  # noqa: E402

__all__ = ["Learner", "Policy", "generate", "grpo_loss", "load_policy", "load_weights", "make_schedule", "sequence_logprobs"]
