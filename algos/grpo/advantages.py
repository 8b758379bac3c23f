"""Group-relative advantages: each completion is scored against its siblings.

GRPO (Shao et al., 2024) replaces PPO's value network with the mean reward of the ``G``
completions sampled for the same prompt; the same scalar advantage applies to every policy token
of a completion.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from textgym.algos.config.grpo import AdvantageScaling


def group_ids(groups: Sequence[int | None], group_size: int) -> np.ndarray:
    """Dense group indices ``0..n_groups-1`` for a batch.

    Rollouts carry a ``group`` id (the GRPO group they were sampled in). When none carries one,
    the batch is taken to be ordered as ``venv.reset(seed=[s, s, s, s, t, t, t, t])`` makes it:
    consecutive chunks of ``group_size``.

    Raises:
        ValueError: Some rollouts have a group id and others do not.
    """
    if all(g is None for g in groups):
        return np.arange(len(groups), dtype=np.int64) // group_size
    if any(g is None for g in groups):
        raise ValueError("either every rollout has a group id or none has")
    _, dense = np.unique(np.asarray(groups), return_inverse=True)
    return dense.astype(np.int64)


def group_advantages(rewards: np.ndarray, groups: np.ndarray, scaling: AdvantageScaling = "group", eps: float = 1e-6) -> np.ndarray:
    """Advantages ``(r - mean of the group) / scale``.

    Args:
        rewards: ``(N,)`` episode rewards.
        groups: ``(N,)`` dense group indices (see :func:`group_ids`).
        scaling: ``group`` divides by the group's std, ``batch`` by the whole batch's std,
            ``none`` does not divide (Dr. GRPO). Stds are population stds (``ddof=0``), so a
            group whose rewards are all equal gets advantage 0 whatever the scaling.
        eps: Added to the std.

    Returns:
        ``(N,)`` float32 advantages.

    Example:
        >>> group_advantages(np.array([1.0, 0.0, 0.0, 0.0]), np.array([0, 0, 1, 1]), "none")
        array([ 0.5, -0.5,  0. ,  0. ], dtype=float32)
    """
    centred, scale = centred_and_scale(rewards, groups, scaling, eps)
    return (centred / scale).astype(np.float32)


def centred_and_scale(
    rewards: np.ndarray, groups: np.ndarray, scaling: AdvantageScaling = "group", eps: float = 1e-6
) -> tuple[np.ndarray, np.ndarray]:
    """``(N,)`` float64 ``r - mean of the group`` and the ``(N,)`` scale :func:`group_advantages`
    divides it by (the group's std plus ``eps``, the batch's, or 1)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    groups = np.asarray(groups)
    n_groups = int(groups.max()) + 1 if groups.size else 0
    counts = np.bincount(groups, minlength=n_groups)
    mean = np.bincount(groups, weights=rewards, minlength=n_groups) / counts
    centred = rewards - mean[groups]
    if scaling == "group":
        std = np.sqrt(np.bincount(groups, weights=centred**2, minlength=n_groups) / counts)
        return centred, std[groups] + eps
    if scaling == "batch":
        return centred, np.full(centred.shape, rewards.std() + eps)
    return centred, np.ones(centred.shape)
