"""The GRPO objective in jax.numpy: the differentiable twin of ``textgym.algos.grpo.grpo_loss``.

Same formula, same metric names, and the same additivity: with the global ``token_count`` and
``loss_weights`` of a packed batch, the values of micro-batches sum to the whole batch's.
Tests compare it with the numpy reference.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from textgym.algos.grpo import GRPOConfig


def grpo_loss(
    logprobs: jax.Array,
    batch: Mapping[str, jax.Array],
    config: GRPOConfig,
    token_count: jax.Array | float,
    ref_logprobs: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped surrogate plus ``kl_beta`` times the k3 KL, aggregated by ``batch["loss_weights"]``.

    Args:
        logprobs: ``(B, T)`` current-policy logprobs (differentiated).
        batch: ``loss_mask``, ``loss_weights``, ``advantages`` and optionally ``old_logprobs``
            (absent: the current logprobs, detached, so the ratio is 1 and the gradient is
            the plain policy gradient).
        config: Clip range and ``kl_beta``.
        token_count: Policy tokens of the whole batch (for the ``stats/`` metrics).
        ref_logprobs: ``(B, T)`` frozen-reference logprobs, needed when ``kl_beta > 0``.

    Returns:
        ``(loss, metrics)`` with the keys of the numpy reference.
    """
    mask, weights = batch["loss_mask"], batch["loss_weights"]
    adv = batch["advantages"][:, None]
    old = batch.get("old_logprobs")
    old = jax.lax.stop_gradient(logprobs) if old is None else old
    on_mask = mask > 0
    ratio = jnp.exp(jnp.where(on_mask, logprobs - old, 0.0))
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high)
    pg = -jnp.minimum(ratio * adv, clipped * adv)
    was_clipped = ((adv > 0) & (ratio > 1.0 + config.clip_eps_high)) | ((adv < 0) & (ratio < 1.0 - config.clip_eps_low))
    if ref_logprobs is None:
        kl = jnp.zeros_like(logprobs)
    else:  # k3: exp(d) - d - 1 with d = ref - logp
        delta = jnp.where(on_mask, jax.lax.stop_gradient(ref_logprobs) - logprobs, 0.0)
        kl = jnp.exp(delta) - delta - 1.0
    tokens = jnp.maximum(token_count, 1)
    policy_loss = jnp.sum(weights * pg)
    kl_loss = jnp.sum(weights * kl)
    total = policy_loss + config.kl_beta * kl_loss
    metrics = {
        "loss/total": total,
        "loss/policy": policy_loss,
        "loss/kl": kl_loss,
        "stats/clip_frac": jnp.sum(mask * was_clipped) / tokens,
        "stats/ratio_mean": jnp.sum(mask * ratio) / tokens,
    }
    return total, metrics
