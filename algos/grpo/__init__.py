"""Framework-free GRPO: the config, group-relative advantages, batch packing and the loss.

Both trainers (``textgym.algos.jax`` and ``textgym.algos.torch``) consume what this package
produces, implement :func:`grpo_loss` in their framework with the same signature, and subclass
:class:`BaseLearner` (the train step and checkpoint layout they share, typed by the
:class:`LanguageModel` and :class:`Learner` protocols); this package needs only numpy.

Alignment convention (shared by every array in a :class:`Batch`, by the samplers and by both
backends' ``logprobs``): the logprob at position ``t`` is ``log p(input_ids[t] | input_ids[:t])``.
A model's logits at position ``t - 1`` therefore score token ``t``; position 0 has no logprob
(it is 0 and never in the loss mask).

Typical use::

    batch = pack(rollouts, config, pad_id=tokenizer.pad_token_id)
    for micro in split_micro_batches(batch, config.micro_batch_size):
        ...  # forward, loss with micro.loss_weights, backward; gradients simply add up

References:
    Shao et al., 2024, DeepSeekMath (GRPO). Yu et al., 2025, DAPO (clip-higher, token-mean,
    overlong filtering). Liu et al., 2025, Understanding R1-Zero-Like Training (Dr. GRPO).
    Schulman, 2020, Approximating KL Divergence (k3). Zheng et al., 2025, Group Sequence Policy
    Optimization (GSPO). MiniMax, 2025, MiniMax-M1 (CISPO). Yao et al., 2025, Your Efficient RL
    Framework Secretly Brings You Off-Policy RL Training (truncated importance sampling).
"""

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.advantages import group_advantages, group_ids
from textgym.algos.grpo.batch import (
    Batch,
    bucket_length,
    drop_zero_std_groups,
    fine_bucket,
    loss_weights,
    pack,
    pad_rows,
    policy_prefix,
    sft_batch,
    split_micro_batches,
)
from textgym.algos.grpo.credit import shaped_rewards
from textgym.algos.grpo.learner import BaseLearner, LanguageModel, Learner, rollout_correction
from textgym.algos.grpo.loss import grpo_loss
from textgym.algos.grpo.seeds import SeedTree

__all__ = [
    "BaseLearner",
    "Batch",
    "GRPOConfig",
    "LanguageModel",
    "Learner",
    "SeedTree",
    "bucket_length",
    "drop_zero_std_groups",
    "fine_bucket",
    "group_advantages",
    "group_ids",
    "grpo_loss",
    "loss_weights",
    "pack",
    "pad_rows",
    "policy_prefix",
    "rollout_correction",
    "sft_batch",
    "shaped_rewards",
    "split_micro_batches",
]
