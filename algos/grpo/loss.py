"""The GRPO objective in plain numpy: the reference both backends are tested against.

The JAX and torch learners implement the same formula in their own framework (so it can be
differentiated and jitted); their tests compare them with :func:`grpo_loss` on the same inputs.
"""

from __future__ import annotations

import numpy as np

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.batch import Batch


def grpo_loss(
    logprobs: np.ndarray, batch: Batch, config: GRPOConfig, ref_logprobs: np.ndarray | None = None
) -> tuple[float, dict[str, float]]:
    """The GRPO loss (``config.policy_loss``'s policy term plus a k3 KL), and its metrics.

    Policy terms per token, with ``r = exp(logp - old_logp)`` and ``clip`` to
    ``[1 - clip_eps_low, 1 + clip_eps_high]``:

    * ``clip``: ``-min(r * A, clip(r) * A)``;
    * ``gspo``: the same with ``r`` replaced by the sequence's ``exp(mean_t(logp - old_logp))``;
    * ``cispo``: ``-sg(clip(r)) * A * logp`` (``sg``: no gradient).

    With a rollout correction the term is multiplied by ``batch.is_weights``.

    Every metric is a weighted sum over tokens with weights normalised by the *global* counts in
    ``batch``, so each value computed on micro-batches adds up to the value on the whole batch.

    Args:
        logprobs: ``(B, T)`` current-policy logprobs, aligned like ``batch.old_logprobs``
            (position ``t`` holds ``log p(input_ids[t] | input_ids[:t])``).
        batch: The packed batch (or a micro-batch of it).
        config: Supplies the clip range and ``kl_beta``.
        ref_logprobs: ``(B, T)`` frozen reference logprobs; required when ``kl_beta > 0``.

    Returns:
        ``(loss, metrics)`` with ``loss/total`` (equal to ``loss``), ``loss/policy``, ``loss/kl``
        (the aggregated k3 estimate, before ``kl_beta``), ``stats/clip_frac`` (share of policy
        tokens whose gradient the clip removed; for ``cispo``, whose weight it bounded) and
        ``stats/ratio_mean`` (of the ratio the policy term used).

    Example:
        >>> from textgym.algos.grpo import GRPOConfig, pack
        >>> from textgym.rollout import Rollout
        >>> r = [Rollout("e", "t", 0, [], rew, rew > 0, 1, True, False,
        ...              token_ids=np.array([5, 6, 7]), loss_mask=np.array([0, 1, 1]),
        ...              logprobs=np.array([0.0, -1.0, -1.0])) for rew in (1.0, 0.0)]
        >>> batch = pack(r, GRPOConfig(group_size=2, advantage_scaling="none"), pad_id=0)
        >>> loss, m = grpo_loss(batch.old_logprobs, batch, GRPOConfig())
        >>> round(loss, 6), m["stats/clip_frac"]
        (0.0, 0.0)
    """
    if config.kl_beta > 0 and ref_logprobs is None:
        raise ValueError("kl_beta > 0 needs ref_logprobs")
    logprobs = np.asarray(logprobs, dtype=np.float64)
    old = logprobs if batch.old_logprobs is None else np.asarray(batch.old_logprobs, dtype=np.float64)
    mask = np.asarray(batch.loss_mask, dtype=np.float64)
    weights = np.asarray(batch.loss_weights, dtype=np.float64)
    adv = np.asarray(batch.advantages, dtype=np.float64)[:, None]
    low, high = 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high

    # Off-mask positions may hold anything (padding): zero the log-ratio there so exp stays finite.
    log_ratio = np.where(mask > 0, logprobs - old, 0.0)
    if config.policy_loss == "gspo":  # one length-normalised ratio per sequence
        log_ratio = np.broadcast_to(
            (mask * log_ratio).sum(axis=1, keepdims=True) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0), mask.shape
        )
    ratio = np.exp(log_ratio)
    if config.policy_loss == "cispo":  # REINFORCE weighted by the clipped ratio, a constant
        pg = -np.clip(ratio, low, high) * adv * np.where(mask > 0, logprobs, 0.0)
        was_clipped = (ratio > high) | (ratio < low)
    else:
        pg = -np.minimum(ratio * adv, np.clip(ratio, low, high) * adv)
        was_clipped = ((adv > 0) & (ratio > high)) | ((adv < 0) & (ratio < low))
    if batch.is_weights is not None:
        pg = pg * np.asarray(batch.is_weights, dtype=np.float64)

    if ref_logprobs is None:
        kl = np.zeros_like(logprobs)
    else:
        # k3 (Schulman, "Approximating KL divergence"): unbiased for KL(pi || ref) and >= 0.
        delta = np.where(mask > 0, np.asarray(ref_logprobs, dtype=np.float64) - logprobs, 0.0)
        kl = np.exp(delta) - delta - 1.0

    tokens = max(1, batch.token_count)
    policy_loss = float((weights * pg).sum())
    kl_loss = float((weights * kl).sum())
    total = policy_loss + config.kl_beta * kl_loss
    metrics = {
        "loss/total": total,
        "loss/policy": policy_loss,
        "loss/kl": kl_loss,
        "stats/clip_frac": float((mask * was_clipped).sum() / tokens),
        "stats/ratio_mean": float((mask * ratio).sum() / tokens),
    }
    return total, metrics
