"""The GRPO objective in jax.numpy: the differentiable twin of ``textgym.algos.grpo.grpo_loss``.

Same signature, formula, metric names and additivity: with the global ``token_count`` and
``loss_weights`` of a packed batch, the values of micro-batches sum to the whole batch's. Inside
the jitted update a :class:`~textgym.algos.grpo.Batch` holds jax arrays: importing this module
registers it (and :class:`~textgym.algos.grpo.batch.PromptSplit`) as pytrees. Tests compare it
with the numpy reference.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from textgym.algos.grpo import Batch, GRPOConfig
from textgym.algos.grpo.prompts import PromptSplit

for _cls in (Batch, PromptSplit):
    jax.tree_util.register_dataclass(_cls, data_fields=[f.name for f in dataclasses.fields(_cls)], meta_fields=[])


def grpo_loss(
    logprobs: jax.Array, batch: Batch, config: GRPOConfig, ref_logprobs: jax.Array | None = None
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``config.policy_loss``'s policy term plus ``kl_beta`` times the k3 KL, aggregated by ``batch.loss_weights``.

    Args:
        logprobs: ``(B, T)`` current-policy logprobs (differentiated).
        batch: The (micro-)batch, numpy or jax arrays; without ``old_logprobs`` the current
            logprobs, detached, are the old ones (ratio 1, the plain policy gradient).
        config: Policy loss, clip range and ``kl_beta``.
        ref_logprobs: ``(B, T)`` frozen-reference logprobs, needed when ``kl_beta > 0``.

    Returns:
        ``(loss, metrics)`` with the keys of the numpy reference.
    """
    if config.kl_beta > 0 and ref_logprobs is None:
        raise ValueError("kl_beta > 0 needs ref_logprobs")
    mask, weights = batch.loss_mask, batch.loss_weights
    adv = batch.advantages[:, None]
    old = jax.lax.stop_gradient(logprobs) if batch.old_logprobs is None else batch.old_logprobs
    on_mask = mask > 0
    low, high = 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high
    log_ratio = jnp.where(on_mask, logprobs - old, 0.0)
    if config.policy_loss == "gspo":  # one length-normalised ratio per sequence
        seq = jnp.sum(mask * log_ratio, axis=1, keepdims=True) / jnp.maximum(jnp.sum(mask, axis=1, keepdims=True), 1.0)
        log_ratio = jnp.broadcast_to(seq, mask.shape)
    ratio = jnp.exp(log_ratio)
    if config.policy_loss == "cispo":
        pg = -jax.lax.stop_gradient(jnp.clip(ratio, low, high)) * adv * jnp.where(on_mask, logprobs, 0.0)
        was_clipped = (ratio > high) | (ratio < low)
    else:
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, low, high) * adv)
        was_clipped = ((adv > 0) & (ratio > high)) | ((adv < 0) & (ratio < low))
    if batch.is_weights is not None:
        pg = pg * batch.is_weights
    if ref_logprobs is None:
        kl = jnp.zeros_like(logprobs)
    else:  # k3: exp(d) - d - 1 with d = ref - logp
        delta = jnp.where(on_mask, jax.lax.stop_gradient(ref_logprobs) - logprobs, 0.0)
        kl = jnp.exp(delta) - delta - 1.0
    tokens = jnp.maximum(batch.token_count, 1)
    policy_loss = jnp.sum(weights * pg)
    kl_loss = jnp.sum(weights * kl)
    total = policy_loss + config.kl_beta * kl_loss
    metrics = {
        "loss/total": total,
        "loss/policy": policy_loss,
        "loss/kl": kl_loss,
        "stats/clip_frac": jnp.sum(mask * was_clipped) / tokens,
        "stats/ratio_mean": jnp.sum(mask * jax.lax.stop_gradient(ratio)) / tokens,
    }
    return total, metrics
