"""The GRPO objective in torch: :func:`textgym.algos.grpo.grpo_loss`, differentiable.

Term for term the numpy reference (same masking, clipping, k3 KL and global weights), so the tests
can hold the two equal to 1e-5; only the arrays are torch tensors and the metrics stay tensors
until the learner has summed them over micro-batches.
"""

from __future__ import annotations

import torch

from textgym.algos.grpo import Batch, GRPOConfig


def grpo_loss(
    logprobs: torch.Tensor,
    batch: Batch,
    config: GRPOConfig,
    ref_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``config.policy_loss``'s policy term plus a k3 KL for one (micro-)batch.

    Args:
        logprobs: ``(B, T)`` current-policy logprobs (with gradient), aligned with ``input_ids``.
        batch: The packed (micro-)batch; its ``loss_weights`` already hold the global counts.
        config: Supplies the policy loss, clip range and ``kl_beta``.
        ref_logprobs: ``(B, T)`` frozen reference logprobs; required when ``kl_beta > 0``.

    Returns:
        ``(loss, metrics)``; metric names and meanings are those of the numpy reference.
    """
    if config.kl_beta > 0 and ref_logprobs is None:
        raise ValueError("kl_beta > 0 needs ref_logprobs")
    device = logprobs.device

    def tensor(a) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.float32, device=device)

    mask = tensor(batch.loss_mask)
    weights = tensor(batch.loss_weights)
    adv = tensor(batch.advantages)
    adv = adv if adv.ndim == 2 else adv[:, None]  # (B, T) per token (turn-level), or (B,) per sequence
    old = logprobs.detach() if batch.old_logprobs is None else tensor(batch.old_logprobs)
    on_mask = mask > 0

    # Off-mask positions may hold anything (padding): zero the log-ratio there so exp stays finite.
    low, high = 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high
    log_ratio = torch.where(on_mask, logprobs - old, torch.zeros_like(logprobs))
    if config.policy_loss == "gspo":  # one length-normalised ratio per sequence
        log_ratio = ((mask * log_ratio).sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1.0)).expand_as(mask)
    ratio = torch.exp(log_ratio)
    if config.policy_loss == "cispo":  # REINFORCE weighted by the clipped ratio, a constant
        pg = -ratio.detach().clamp(low, high) * adv * torch.where(on_mask, logprobs, torch.zeros_like(logprobs))
        was_clipped = (ratio > high) | (ratio < low)
    else:
        pg = -torch.minimum(ratio * adv, ratio.clamp(low, high) * adv)
        was_clipped = ((adv > 0) & (ratio > high)) | ((adv < 0) & (ratio < low))
    if batch.is_weights is not None:
        pg = pg * tensor(batch.is_weights)

    if ref_logprobs is None:
        kl = torch.zeros_like(logprobs)
    else:
        # k3 (Schulman, "Approximating KL divergence"): unbiased for KL(pi || ref) and >= 0.
        delta = torch.where(on_mask, ref_logprobs.detach() - logprobs, torch.zeros_like(logprobs))
        kl = torch.exp(delta) - delta - 1.0

    tokens = max(1, batch.token_count)
    policy_loss = (weights * pg).sum()
    kl_loss = (weights * kl).sum()
    total = policy_loss + config.kl_beta * kl_loss
    metrics = {
        "loss/total": total.detach(),
        "loss/policy": policy_loss.detach(),
        "loss/kl": kl_loss.detach(),
        "stats/clip_frac": (mask * was_clipped).sum() / tokens,
        "stats/ratio_mean": (mask * ratio.detach()).sum() / tokens,
    }
    return total, metrics
