"""Packing rollouts into the fixed-shape numpy batch that both backends train on.

Shapes are chosen so that a jitted step compiles a handful of times per run, not once per step:
the sequence length is rounded up to a power-of-two bucket and the number of rows to a multiple of
the micro-batch size (padding rows have an all-zero mask).

Normalisation is decided here, once, for the whole batch: each policy token gets a weight
``loss_weights[i, t]`` such that the loss is ``sum(weights * token_loss)``. Because the weights
already contain the global token and sequence counts, the sum over micro-batches equals the loss
of the whole batch exactly, whatever the micro-batch size (tunix normalises per micro-batch, which
makes gradient accumulation change the objective).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.advantages import group_ids
from textgym.algos.grpo.credit import rollout_advantages, shaped_rewards
from textgym.rollout import Rollout


@dataclass(frozen=True)
class Batch:
    """A packed GRPO batch of ``B`` rows and ``T`` tokens (right-padded).

    Alignment: ``old_logprobs[i, t]`` is the log-probability of ``input_ids[i, t]`` given
    ``input_ids[i, :t]``, so column 0 is never trained (``loss_mask[:, 0] == 0``).

    Attributes:
        input_ids: ``(B, T)`` int32 token ids, ``pad_id`` after each sequence.
        attention_mask: ``(B, T)`` int32, 1 on real tokens.
        positions: ``(B, T)`` int32 RoPE positions (0-based, constant over padding).
        loss_mask: ``(B, T)`` float32, 1 on the policy tokens that are trained.
        old_logprobs: ``(B, T)`` float32 sampler logprobs, or None when the rollouts had none
            (the learner then uses the current policy's, detached).
        advantages: ``(B,)`` float32, one per sequence, 0 on padding rows; with
            ``advantage="turn"`` ``(B, T)``, one per token (each policy turn's own, see
            :mod:`textgym.algos.grpo.turns`), 0 off the loss mask.
        loss_weights: ``(B, T)`` float32 aggregation weights (0 off the loss mask).
        rewards: ``(B,)`` float32 episode rewards (with the soft overlong penalty, see
            :func:`shaped_rewards`), 0 on padding rows; each sample of a split episode has its
            episode's.
        num_sequences: Real rows (samples) in the whole batch (global; not per micro-batch).
        token_count: Policy tokens in the whole batch (global; not per micro-batch).
        env_errors: Rows whose episode ended with ``end_reason == "env_error"``: masked out of
            the loss and of the group statistics (an env failure is not a reward of 0).
        is_weights: ``(B, T)`` float32 importance weights of a rollout correction (learner over
            sampler probability, truncated or masked), or None; the learner's
            :meth:`~textgym.algos.grpo.BaseLearner.train_step` fills them in.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    positions: np.ndarray
    loss_mask: np.ndarray
    old_logprobs: np.ndarray | None
    advantages: np.ndarray
    loss_weights: np.ndarray
    rewards: np.ndarray
    num_sequences: int
    token_count: int
    env_errors: int = 0
    is_weights: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(B, T)``."""
        return self.input_ids.shape  # type: ignore[return-value]

    def replace(self, **changes) -> Batch:
        """A copy with some fields changed (e.g. ``old_logprobs`` filled in by a learner)."""
        return dataclasses.replace(self, **changes)


def bucket_length(n: int, max_length: int, min_bucket: int = 16) -> int:
    """The padded length for ``n`` tokens: the next power of two >= ``min_bucket``, capped.

    Example:
        >>> [bucket_length(n, 1000) for n in (1, 16, 17, 600, 1000)]
        [16, 16, 32, 1000, 1000]
    """
    bucket = max(min_bucket, 1 << max(0, int(n) - 1).bit_length())
    return min(bucket, max_length)


def fine_bucket(n: int, min_step: int = 16) -> int:
    """``n`` rounded up in sixteenths of its power-of-two bucket (steps of ``min_step`` at least).

    For jitted code whose cost grows with every padded slot (attention over a cache, a
    continuation in the learner): 8 shapes per doubling (a bucket's upper half holds 8 of its
    sixteenths), where a power of two can waste half the work (136 -> 144 instead of 256,
    450 -> 480 instead of 512). The waste stays under an eighth of ``n``.

    Example:
        >>> [fine_bucket(n) for n in (1, 25, 64, 136, 450, 600)]
        [16, 32, 64, 144, 480, 640]
    """
    step = max(min_step, bucket_length(n, 1 << 62, min_bucket=1) // 16)
    return -(-n // step) * step


def loss_weights(loss_mask: np.ndarray, config: GRPOConfig) -> np.ndarray:
    """Per-token weights implementing ``config.loss_aggregation`` over a whole batch.

    ``sequences`` counts rows with at least one policy token, so masked (e.g. truncated) and
    padding rows do not dilute the mean.

    Args:
        loss_mask: ``(B, T)`` mask of the *whole* batch.
        config: Supplies ``loss_aggregation`` and the Dr. GRPO constant.

    Returns:
        ``(B, T)`` float32 weights that sum to 1 for ``token-mean`` and ``seq-mean-token-mean``.
    """
    mask = np.asarray(loss_mask, dtype=np.float64)
    per_seq = mask.sum(axis=1, keepdims=True)
    sequences = max(1, int((per_seq > 0).sum()))
    mode = config.loss_aggregation
    if mode == "token-mean":
        weights = mask / max(1.0, mask.sum())
    elif mode == "seq-mean-token-mean":
        weights = mask / np.maximum(per_seq, 1.0) / sequences
    elif mode == "seq-mean-token-sum":
        weights = mask / sequences
    else:  # constant (Dr. GRPO)
        weights = mask / (sequences * config.dr_grpo_constant)
    return weights.astype(np.float32)


def pack(rollouts: Sequence[Rollout], config: GRPOConfig, pad_id: int) -> Batch:
    """Pack token rollouts (from :class:`textgym.wrappers.TokenObservation`) into a :class:`Batch`.

    Each rollout is one row, or one row per sample when ``Rollout.sample_spans`` splits it (every
    sample of an episode gets the episode's reward and advantage: GRPO's group statistics are over
    episodes). Sequences longer than ``config.max_length`` are cut there. Rows are padded to a multiple of
    ``config.micro_batch_size`` and tokens to :func:`bucket_length`. Episodes that ended with
    ``end_reason == "env_error"`` keep their row but get no loss tokens and advantage 0, and the
    advantages of their groups are computed over the other episodes alone. With
    ``config.advantage == "turn"`` the advantages are per token, ``(B, T)``: each policy turn's
    (``Rollout.turn_spans``) from :func:`rollout_advantages`.

    Args:
        rollouts: Episodes with ``token_ids``, ``loss_mask`` and (optionally) ``logprobs``.
        config: The GRPO configuration.
        pad_id: Token id written after each sequence (never attended to or trained on).

    Raises:
        ValueError: A rollout has no tokens (a text env without the token wrapper), or only
            some rollouts have logprobs.
    """
    if not rollouts:
        raise ValueError("cannot pack an empty list of rollouts")
    if any(r.token_ids is None or r.loss_mask is None for r in rollouts):
        raise ValueError("every rollout needs token_ids and loss_mask: wrap the env in TokenObservation")
    # An env_error episode may have lost its logprobs with its env; it trains on nothing anyway.
    with_logprobs = [r.logprobs is not None for r in rollouts if r.end_reason != "env_error"]
    if any(with_logprobs) and not all(with_logprobs):
        raise ValueError("either every rollout has logprobs or none has")

    # One row per training sample: an episode is one sample, unless the token wrapper split it where
    # the chat template rewrote earlier turns (Rollout.sample_spans); its samples share its advantage.
    samples = [(i, a, b) for i, r in enumerate(rollouts) for a, b in (r.sample_spans or [(0, len(r.token_ids))])]
    n = len(samples)
    rows = -(-n // config.micro_batch_size) * config.micro_batch_size
    lengths = [min(b - a, config.max_length) for _, a, b in samples]
    length = bucket_length(max(lengths), config.max_length)

    input_ids = np.full((rows, length), pad_id, dtype=np.int32)
    attention_mask = np.zeros((rows, length), dtype=np.int32)
    loss_mask = np.zeros((rows, length), dtype=np.float32)
    old_logprobs = np.zeros((rows, length), dtype=np.float32) if any(with_logprobs) else None
    failed = np.array([r.end_reason == "env_error" for r in rollouts])
    for row, ((i, a, _), size) in enumerate(zip(samples, lengths)):
        r = rollouts[i]
        input_ids[row, :size] = r.token_ids[a : a + size]
        attention_mask[row, :size] = 1
        if not (config.mask_truncated and r.truncated) and not failed[i]:
            loss_mask[row, :size] = r.loss_mask[a : a + size]
        if old_logprobs is not None and r.logprobs is not None:
            old_logprobs[row, :size] = r.logprobs[a : a + size]
    loss_mask[:, 0] = 0.0  # no logprob exists for the first token
    positions = np.maximum(np.cumsum(attention_mask, axis=1) - 1, 0).astype(np.int32)

    episode_rewards = shaped_rewards(rollouts, config)
    scored = rollout_advantages(rollouts, config)
    owner = np.array([i for i, _, _ in samples], dtype=np.int64)
    rewards = np.zeros(rows, dtype=np.float32)
    rewards[:n] = episode_rewards[owner]
    if scored.turns is None:
        advantages = np.zeros(rows, dtype=np.float32)
        advantages[:n] = scored.episodes[owner]
    else:
        advantages = _token_advantages(rollouts, samples, lengths, scored.tokens or scored.turns, loss_mask)

    return Batch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        positions=positions,
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=advantages,
        loss_weights=loss_weights(loss_mask, config),
        rewards=rewards,
        num_sequences=n,
        token_count=int(loss_mask.sum()),
        env_errors=int(failed[owner].sum()),
    )


def sft_batch(rollouts: Sequence[Rollout], config: GRPOConfig, pad_id: int) -> Batch:
    """A batch whose GRPO step is an SFT step: advantage 1 per sequence, no old logprobs."""
    batch = pack(rollouts, config, pad_id=pad_id)
    advantages = (np.arange(batch.shape[0]) < batch.num_sequences).astype(np.float32)
    return batch.replace(advantages=advantages, old_logprobs=None)


def _token_advantages(
    rollouts: Sequence[Rollout],
    samples: list[tuple[int, int, int]],
    lengths: list[int],
    turns: Sequence[Sequence[Any]],
    loss_mask: np.ndarray,
) -> np.ndarray:
    """``(B, T)``: each row's tokens get the advantage of the turn (``turn_spans``) they belong to
    (one value a turn, or one a token of it), 0 off the loss mask and on a span without a scored
    turn (one the env never answered)."""
    out = np.zeros(loss_mask.shape, dtype=np.float32)
    for row, ((i, a, _), size) in enumerate(zip(samples, lengths)):
        spans = rollouts[i].turn_spans or ()
        values = turns[i]
        for t, (start, end) in enumerate(spans):
            lo, hi = max(start - a, 0), min(end - a, size)
            if lo < hi and t < len(values):
                value = values[t]
                out[row, lo:hi] = value if np.ndim(value) == 0 else value[lo + a - start : hi + a - start]
    return out * (loss_mask > 0)


def drop_zero_std_groups(rollouts: Sequence[Rollout], config: GRPOConfig) -> tuple[list[Rollout], int]:
    """The rollouts of groups whose shaped rewards differ, and how many groups had none that did.

    A group whose rewards are all equal has advantage 0 everywhere: it adds no policy gradient
    but counts in the token mean. With ``config.filter_zero_std_groups`` its rollouts are
    dropped (DAPO's dynamic sampling, without resampling); without it every rollout is kept and
    only the count is reported. With ``advantage="turn"`` a group whose turns of one state had
    different returns has a signal too, even when its episodes' rewards are equal.
    """
    groups = group_ids([r.group for r in rollouts], config.group_size)
    rewards = shaped_rewards(rollouts, config)
    n_groups = int(groups.max()) + 1 if groups.size else 0
    spread = np.zeros(n_groups, dtype=bool)
    for g in range(n_groups):
        spread[g] = np.ptp(rewards[groups == g]) > 0
    if config.advantage == "turn" and config.turn_advantage_weight > 0:
        for g, turns in zip(groups, rollout_advantages(rollouts, config).turns):
            spread[g] |= bool(np.any(turns != 0))
    zero = int((~spread).sum())
    if not config.filter_zero_std_groups:
        return list(rollouts), zero
    return [r for r, g in zip(rollouts, groups) if spread[g]], zero


def pad_rows(batch: Batch, multiple: int) -> Batch:
    """Append all-zero rows (no attention, no loss weight) up to a multiple of ``multiple`` rows.

    Both learners take a batch of any row count this way: the padding weighs nothing.
    """
    extra = -batch.shape[0] % multiple
    if extra == 0:
        return batch
    return batch.replace(
        **{
            f.name: np.concatenate([v, np.zeros((extra, *v.shape[1:]), v.dtype)])
            for f in dataclasses.fields(batch)
            if isinstance(v := getattr(batch, f.name), np.ndarray)
        }
    )


def policy_prefix(rollout: Rollout) -> Rollout:
    """The rollout cut after its last trained token: later env tokens change no logprob the
    loss uses (attention is causal), so packing them would only cost compute."""
    trained = np.flatnonzero(rollout.loss_mask)
    if trained.size == 0:
        return rollout
    end = int(trained[-1]) + 1
    spans = None if rollout.sample_spans is None else [(a, min(b, end)) for a, b in rollout.sample_spans if a < end]
    return dataclasses.replace(
        rollout,
        token_ids=rollout.token_ids[:end],
        loss_mask=rollout.loss_mask[:end],
        logprobs=None if rollout.logprobs is None else rollout.logprobs[:end],
        sample_spans=spans,
    )


def split_micro_batches(batch: Batch, micro_batch_size: int) -> list[Batch]:
    """Split along rows; global counts and weights are kept, so micro-batch losses sum to the total.

    Raises:
        ValueError: The row count is not a multiple of ``micro_batch_size`` (``pack`` pads it).
    """
    rows = batch.shape[0]
    if micro_batch_size < 1 or rows % micro_batch_size:
        raise ValueError(f"expected a micro_batch_size dividing {rows} rows, got {micro_batch_size}")
    return [take_rows(batch, slice(start, start + micro_batch_size)) for start in range(0, rows, micro_batch_size)]


def _arrays(batch: Batch) -> dict[str, np.ndarray]:
    return {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch) if isinstance(getattr(batch, f.name), np.ndarray)}


def take_rows(batch: Batch, rows: slice | np.ndarray) -> Batch:
    """The rows ``rows`` (a slice or an index array) of every per-row array; global counts are kept."""
    return batch.replace(**{name: a[rows] for name, a in _arrays(batch).items()})


def by_length(batch: Batch) -> Batch:
    """The rows sorted by real length (stably), so that consecutive micro-batches pad little."""
    order = np.argsort(batch.attention_mask.sum(axis=1), kind="stable")
    return take_rows(batch, order)


# A micro-batch's fixed cost (its calls and autograd graph, the forward and backward), in tokens
# of the tiny model's update: ~25 ms a micro-batch against ~0.09 ms a token on one core.
MICRO_BATCH_COST = 256


def length_groups(lengths: np.ndarray, max_rows: int, pair_cost: float, call_cost: float = MICRO_BATCH_COST) -> list[np.ndarray]:
    """Rows (indices of ``lengths``) in micro-batches of at most ``max_rows``, each run as wide as
    its longest row: of the ways to cut the rows sorted by length, the cheapest.

    Fixed groups of ``max_rows`` pad every row to its group's longest, and attention runs at the
    padding too: on `code-tiny`'s episodes (71 to 524 tokens) groups of 16 ran 1.33x the real
    tokens and 1.75x the real query-key pairs. A group costs ``rows * width * (1 + pair_cost *
    width / 2) + call_cost``: the layers' linears at every slot, causal attention's pairs
    (``pair_cost``: a pair's FLOPs over a token's, see :func:`textgym.algos.grpo.prompts.split_pays`)
    and the fixed cost of a micro-batch, which keeps rows of one length together. Found exactly by
    dynamic programming; a group never holds more rows, nor longer ones, than a fixed one, so memory
    stays within ``max_rows`` rows of the longest.
    """
    order = np.argsort(lengths, kind="stable")
    width = np.asarray(lengths, np.float64)[order]
    best = np.zeros(len(order) + 1)
    start_of = np.zeros(len(order) + 1, np.int64)
    for end in range(1, len(order) + 1):
        starts = np.arange(max(0, end - max_rows), end)
        w = width[end - 1]  # the group's longest: the rows are sorted
        costs = best[starts] + (end - starts) * w * (1 + pair_cost * w / 2) + call_cost
        pick = int(np.argmin(costs))
        best[end], start_of[end] = costs[pick], starts[pick]
    groups, end = [], len(order)
    while end > 0:
        groups.append(order[start_of[end] : end])
        end = int(start_of[end])
    return groups[::-1]


def trimmed(batch: Batch) -> Batch:
    """The columns up to the longest row's end (a micro-batch of short rows drops the batch's padding)."""
    end = max(int(batch.attention_mask.sum(axis=1).max()), 1)
    return batch.replace(**{name: a[:, :end] for name, a in _arrays(batch).items() if a.ndim == 2})
