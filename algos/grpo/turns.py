"""Turn-level advantages: each policy turn scored against the turns that left from the same state.

Episode-level GRPO gives every token of an episode its one advantage, so a right move in a failed
episode is pushed down with the rest. GiGPO (Feng et al., 2025) adds step-level groups without
extra rollouts: the turns of a GRPO group whose env states are equal (an *anchor* state, here
``Rollout.turn_state_keys``) form a group of their own, and each turn's return from that turn on
is compared with theirs. The token advantage mixes the two levels::

    A_token = (1 - w) * A_episode + w * A_turn        (w = GRPOConfig.turn_advantage_weight)

GiGPO's ``A_E + omega * A_S`` is ``w = omega / (1 + omega)``, scaled by ``1 + omega``.
``negative_advantage_scale`` applies to the mixed value.

With ``turn_token_credit="prefix"`` a turn's advantage is split over its tokens: each token gets the
change it made to the anchor group's mean return, taken over the turns that share the action up to
it (a Monte Carlo value of every prefix of the action, from the turns already sampled). A Sudoku
move that picks an empty cell and then a wrong digit is then pushed down at the digit alone;
pushing the whole move down would teach the model to avoid the empty cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from textgym.algos.config.grpo import AdvantageScaling, GRPOConfig
from textgym.algos.grpo.advantages import centred_and_scale, group_advantages
from textgym.rollout import Rollout


def turn_returns(rewards: Sequence[float], discount: float) -> np.ndarray:
    """``G_t = sum_j discount**j * r_(t+j)``: each turn's return from that turn on.

    Example:
        >>> turn_returns([0.0, 0.5, 1.0], 0.5).tolist()
        [0.5, 1.0, 1.0]
    """
    returns = np.zeros(len(rewards), dtype=np.float64)
    later = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        later = float(rewards[t]) + discount * later
        returns[t] = later
    return returns


def accepted(rollout: Rollout, discount: float) -> np.ndarray:
    """``(turns,)`` bool: the policy turns whose return from that turn on is above 0, the ones
    turn-level rejection sampling trains on; with ``discount=0``, those whose own env step paid."""
    return turn_returns(rollout.turn_rewards or (), discount) > 0


def accepted_turns(rollout: Rollout, discount: float) -> Rollout:
    """The rollout with a loss mask on its :func:`accepted` turns alone: every other turn's mask is
    zeroed, with the token that closes it (a warm start trains that end-of-turn token too).

    Example:
        >>> r = Rollout("e", "t", 0, [], 1.0, True, 2, True, False, token_ids=np.arange(6),
        ...             loss_mask=np.array([0, 1, 1, 0, 1, 1]), turn_spans=[(1, 3), (4, 6)], turn_rewards=[0.0, 1.0])
        >>> accepted_turns(r, 0.0).loss_mask.tolist(), accepted_turns(r, 1.0).loss_mask.tolist()
        ([0, 0, 0, 0, 1, 1], [0, 1, 1, 0, 1, 1])
    """
    mask = np.array(rollout.loss_mask, copy=True)
    for (start, end), keep in zip(rollout.turn_spans or (), accepted(rollout, discount)):
        if not keep:
            mask[start : end + 1] = 0
    return dataclasses.replace(rollout, loss_mask=mask)


@dataclass(frozen=True)
class TurnAdvantages:
    """Every turn's advantage within its anchor group.

    Attributes:
        per_episode: One ``(turns,)`` float32 array per episode given, in order.
        anchor_sizes: ``(A,)`` the number of turns in each anchor group.
        per_token: With ``turn_token_credit="prefix"``, per episode and turn, a float32 array of
            its sampled tokens' credit (:func:`prefix_credit`); None otherwise.
    """

    per_episode: list[np.ndarray]
    anchor_sizes: np.ndarray
    per_token: list[list[np.ndarray]] | None = None

    def metrics(self) -> dict[str, float]:
        """``turn/anchor_groups``, ``turn/anchor_group_size_mean`` (turns per anchor group),
        ``turn/singleton_fraction`` (of turns whose state no other turn of their group left from:
        their turn advantage is 0) and ``turn/credited_fraction`` (of turns whose turn advantage is
        not 0: with a sparse reward and ``turn_discount=0`` only the last turns of solved episodes)."""
        sizes = self.anchor_sizes
        turns = int(sizes.sum())
        credited = sum(int(np.count_nonzero(a)) for a in self.per_episode)
        return {
            "turn/anchor_groups": float(sizes.size),
            "turn/anchor_group_size_mean": float(sizes.mean()) if sizes.size else 0.0,
            "turn/singleton_fraction": float((sizes == 1).sum() / turns) if turns else 0.0,
            "turn/credited_fraction": credited / turns if turns else 0.0,
        }


def turn_advantages(rollouts: Sequence[Rollout], groups: np.ndarray, config: GRPOConfig) -> TurnAdvantages:
    """Each turn's return against those of the turns of its GRPO group with the same state key.

    Scaled as ``config.advantage_scaling`` scales episodes: ``(G - mean) / (std + eps)`` over the
    anchor group (``group``), over every turn of the batch (``batch``), or not at all (``none``).
    A state met once, or an anchor group whose returns are all equal, gives 0.

    Args:
        rollouts: Episodes with ``turn_rewards`` and ``turn_state_keys``.
        groups: ``(N,)`` dense GRPO group indices of ``rollouts``.
        config: Supplies ``turn_discount``, ``advantage_scaling`` and ``advantage_eps``.

    Raises:
        ValueError: A rollout lacks per-turn rewards or state keys (a record written before they
            existed, or an env that reports no ``state_key``).
    """
    anchors: dict[tuple[int, str], int] = {}
    returns, ids, lengths = [], [], []
    for r, g in zip(rollouts, groups):
        if r.turn_rewards is None or r.turn_state_keys is None or len(r.turn_state_keys) != len(r.turn_rewards):
            raise ValueError(
                f"advantage='turn' needs turn_rewards and turn_state_keys (one per turn) in every rollout; "
                f"an episode of {r.env_id} task {r.task_id} has none (an older record, or an env without info['state_key'])"
            )
        returns.append(turn_returns(r.turn_rewards, config.turn_discount))
        ids += [anchors.setdefault((int(g), key), len(anchors)) for key in r.turn_state_keys]
        lengths.append(len(r.turn_rewards))
    flat_ids = np.asarray(ids, dtype=np.int64)
    flat = (
        group_advantages(np.concatenate(returns), flat_ids, config.advantage_scaling, config.advantage_eps)
        if flat_ids.size
        else np.zeros(0, np.float32)
    )
    splits = np.cumsum(lengths)[:-1]
    per_episode = np.split(flat, splits) if lengths else []
    per_token = None
    if config.turn_token_credit == "prefix" and flat_ids.size:
        actions = [action for r in rollouts for action in turn_actions(r)]
        credit = prefix_credit(actions, np.concatenate(returns), flat_ids, config.advantage_scaling, config.advantage_eps)
        bounds = np.cumsum([0, *lengths])
        per_token = [credit[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return TurnAdvantages(per_episode, np.bincount(flat_ids, minlength=len(anchors)), per_token)


def turn_actions(rollout: Rollout) -> list[np.ndarray]:
    """The token ids each policy turn sampled (``turn_spans``), one array per turn reward; empty
    for a turn without a span."""
    spans = rollout.turn_spans or ()
    ids = np.asarray(rollout.token_ids if rollout.token_ids is not None else (), dtype=np.int64)
    return [ids[spans[t][0] : spans[t][1]] if t < len(spans) else ids[:0] for t in range(len(rollout.turn_rewards or ()))]


def prefix_credit(
    actions: Sequence[np.ndarray], returns: np.ndarray, anchors: np.ndarray, scaling: AdvantageScaling, eps: float
) -> list[np.ndarray]:
    """Each action token's credit: ``V(a[:k+1]) - V(a[:k])``, ``V(p)`` the mean return of the
    anchor group's actions that start with ``p`` (``V`` of the empty prefix: the group's mean),
    scaled as :func:`~textgym.algos.grpo.advantages.group_advantages` scales (the anchor group's
    std, the batch's, or none).

    An action's credits sum to the mean centred return of the actions equal to it; tokens that
    every action of the group shares get 0, and so does every token of a state met once.

    Example:
        >>> actions = [np.array([7, 1]), np.array([7, 2]), np.array([8, 1]), np.array([8, 1])]
        >>> [x.tolist() for x in prefix_credit(actions, np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(4, int), "none", 0.0)]
        [[0.25, 0.5], [0.25, -0.5], [-0.25, 0.0], [-0.25, 0.0]]
    """
    anchors = np.asarray(anchors, dtype=np.int64)
    centred, scale = centred_and_scale(returns, anchors, scaling, eps)
    sums: dict[tuple[int, bytes], float] = {}
    seen: dict[tuple[int, bytes], int] = {}
    for action, g, anchor in zip(actions, centred, anchors):
        for k in range(len(action) + 1):
            key = (int(anchor), action[:k].tobytes())
            sums[key] = sums.get(key, 0.0) + g
            seen[key] = seen.get(key, 0) + 1
    out = []
    for action, anchor, divisor in zip(actions, anchors, scale):
        values = np.array([sums[key] / seen[key] for key in ((int(anchor), action[:k].tobytes()) for k in range(len(action) + 1))])
        out.append((np.diff(values) / divisor).astype(np.float32))
    return out
