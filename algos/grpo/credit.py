"""What each episode, turn and token of a batch is credited: the episode's group-relative advantage
over its shaped reward, and with turn-level advantages each turn's (:mod:`textgym.algos.grpo.turns`)
mixed in. :func:`textgym.algos.grpo.batch.pack` writes them onto the batch's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.advantages import group_advantages, group_ids
from textgym.algos.grpo.turns import TurnAdvantages, turn_advantages
from textgym.rollout import Rollout


@dataclass(frozen=True)
class Advantages:
    """The advantages :func:`pack` gives a list of rollouts.

    Attributes:
        episodes: ``(N,)`` float32 group-relative episode advantages, ``negative_advantage_scale``
            applied, 0 for ``env_error`` episodes: every token's with ``advantage="episode"``.
        turns: With ``advantage="turn"``, one ``(turns,)`` float32 array per episode: each policy
            turn's token advantage (the episode's and the turn's mixed, then
            ``negative_advantage_scale``); None otherwise.
        anchors: With ``advantage="turn"``, the anchor groups (for their metrics); None otherwise.
        tokens: With ``turn_token_credit="prefix"``, per episode and turn, each sampled token's
            advantage (the episode's and the token's credit mixed, then ``negative_advantage_scale``);
            None otherwise.
    """

    episodes: np.ndarray
    turns: list[np.ndarray] | None = None
    anchors: TurnAdvantages | None = None
    tokens: list[list[np.ndarray]] | None = None


def rollout_advantages(rollouts: Sequence[Rollout], config: GRPOConfig) -> Advantages:
    """Each episode's advantage, and with ``config.advantage == "turn"`` each turn's.

    Episodes that ended with ``end_reason == "env_error"`` get 0 and are left out of their
    group's (and their anchor groups') statistics.
    """
    failed = np.array([r.end_reason == "env_error" for r in rollouts])
    episode_rewards = shaped_rewards(rollouts, config)
    raw = np.zeros(len(rollouts), dtype=np.float32)
    groups = group_ids([r.group for r in rollouts], config.group_size)
    kept = np.flatnonzero(~failed)
    dense = np.zeros(0, np.int64)
    if kept.size:
        _, dense = np.unique(groups[kept], return_inverse=True)
        raw[kept] = group_advantages(episode_rewards[kept], dense.astype(np.int64), config.advantage_scaling, config.advantage_eps)
    episodes = _scale_negative(raw, config)
    if config.advantage == "episode":
        return Advantages(episodes)
    anchors = turn_advantages([rollouts[i] for i in kept], dense, config)
    w = config.turn_advantage_weight

    def mixed(i: int, turn: np.ndarray) -> np.ndarray:
        return _scale_negative(((1.0 - w) * np.float64(raw[i]) + w * turn.astype(np.float64)).astype(np.float32), config)

    turns = [np.zeros(len(r.turn_rewards or ()), np.float32) for r in rollouts]
    for i, per_turn in zip(kept, anchors.per_episode):
        turns[i] = mixed(i, per_turn)
    if anchors.per_token is None:
        return Advantages(episodes, turns, anchors)
    tokens: list[list[np.ndarray]] = [[] for _ in rollouts]  # an env_error episode trains on nothing
    for i, per_turn in zip(kept, anchors.per_token):
        tokens[i] = [mixed(i, credit) for credit in per_turn]
    return Advantages(episodes, turns, anchors, tokens)


def _scale_negative(advantages: np.ndarray, config: GRPOConfig) -> np.ndarray:
    """``advantages`` with the values below 0 multiplied by ``negative_advantage_scale`` (a copy)."""
    out = advantages.copy()
    out[out < 0] *= config.negative_advantage_scale
    return out


def shaped_rewards(rollouts: Sequence[Rollout], config: GRPOConfig) -> np.ndarray:
    """``(N,)`` rewards that the advantages use: the episode's, plus DAPO's soft overlong penalty.

    With ``config.soft_overlong_buffer = N > 0`` and ``L`` the longest assistant turn's generated
    tokens, the penalty is ``0`` up to ``max_new_tokens - N``, then falls linearly to ``-1`` at
    ``max_new_tokens`` (Yu et al., 2025, DAPO section 3.4).

    Example:
        >>> from textgym.rollout import Rollout
        >>> rs = [Rollout("e", "t", 0, [], 1.0, True, 1, True, False, token_ids=np.zeros(n + 1),
        ...               loss_mask=np.r_[0, np.ones(n)]) for n in (4, 6, 8)]
        >>> shaped_rewards(rs, GRPOConfig(max_new_tokens=8, soft_overlong_buffer=4)).tolist()
        [1.0, 0.5, 0.0]
    """
    rewards = np.array([r.reward for r in rollouts], dtype=np.float64)
    buffer = config.soft_overlong_buffer
    if buffer == 0:
        return rewards.astype(np.float32)
    longest = np.array([_longest_turn(r) for r in rollouts], dtype=np.float64)
    penalty = np.clip((config.max_new_tokens - buffer - longest) / buffer, -1.0, 0.0)
    return (rewards + penalty).astype(np.float32)


def _longest_turn(rollout: Rollout) -> int:
    """Tokens of the rollout's longest assistant turn (its spans of loss-mask ones)."""
    mask = np.r_[0, np.asarray(rollout.loss_mask) > 0, 0].astype(np.int8)
    edges = np.flatnonzero(np.diff(mask))
    return int((edges[1::2] - edges[::2]).max()) if edges.size else 0
