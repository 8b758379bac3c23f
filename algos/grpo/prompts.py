"""A batch split at its prompts: each distinct prompt is run through the model once, and every row
that continues it reads its keys and values (a GRPO group samples one prompt ``group_size`` times).
Both backends' samplers and learners split this way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from textgym.algos.grpo.batch import Batch


def distinct_prompts(prompts: Sequence[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct prompts in first-seen order, and ``(B,)`` int32 index of each prompt among them.

    A GRPO group samples one prompt ``group_size`` times; the samplers run each distinct prompt's
    prefill once and copy its KV cache to every row that continues it.
    """
    index: dict[tuple[int, ...], int] = {}
    distinct, source = [], []
    for p in prompts:
        key = tuple(np.asarray(p).tolist())
        if key not in index:
            index[key] = len(distinct)
            distinct.append(p)
        source.append(index[key])
    return distinct, np.array(source, np.int32)


@dataclass(frozen=True)
class PromptSplit:
    """A batch cut at each row's first trained token: the distinct prompts once, then every row's rest.

    A GRPO group repeats one prompt ``group_size`` times, and a prompt is often half a row: running
    each distinct prompt once into a KV cache that its rows' continuations attend to saves that
    share of the forward and backward pass. Nothing before a row's first trained token is in the
    loss, and the last prompt token's logits score the first continuation token.

    Attributes:
        prompt_ids: ``(U, P)`` int32 distinct prompts, left-padded so that all end at slot ``P - 1``.
        prompt_mask: ``(U, P)`` int32, 1 on real tokens.
        source: ``(B,)`` int32 index of each row's prompt.
        rest: The rows from their first trained token on, right-padded to ``C`` columns, with
            positions that continue the prompt's; ``input_ids[:, 0]`` is scored by the prompt's
            last logits and ``input_ids[:, j]`` by the rest's logits at ``j - 1``.
    """

    prompt_ids: np.ndarray
    prompt_mask: np.ndarray
    source: np.ndarray
    rest: Batch


def split_prompts(batch: Batch, pad_id: int, prompt_multiple: int = 1, rest_multiple: int = 1) -> PromptSplit:
    """Split ``batch`` (right-padded) at each row's first trained token; see :class:`PromptSplit`.

    Args:
        batch: A packed (micro-)batch.
        pad_id: Id written in the padding.
        prompt_multiple: ``P`` is rounded up to a multiple of it (jitted steps compile per shape).
        rest_multiple: ``C`` is rounded up to a multiple of it.
    """
    # A row without trained tokens (padding, masked) keeps its tokens in the prompt: no loss either way.
    lengths, cut = prompt_cuts(batch)
    prompts, source = distinct_prompts([ids[:n] for ids, n in zip(batch.input_ids, cut)])
    width = -(-max(len(p) for p in prompts) // prompt_multiple) * prompt_multiple
    prompt_ids = np.full((len(prompts), width), pad_id, np.int32)
    prompt_mask = np.zeros((len(prompts), width), np.int32)
    for i, p in enumerate(prompts):
        prompt_ids[i, width - len(p) :] = p
        prompt_mask[i, width - len(p) :] = 1  # a padding row's one-token prompt too: never all-masked
    rest_len = np.maximum(lengths - cut, 0)
    columns = max(1, -(-int(rest_len.max()) // rest_multiple) * rest_multiple)
    index = np.minimum(cut[:, None] + np.arange(columns), batch.shape[1] - 1)  # (B, C)
    real = np.arange(columns) < rest_len[:, None]

    def rest(a: np.ndarray) -> np.ndarray:
        return np.where(real, np.take_along_axis(a, index, axis=1), 0).astype(a.dtype)

    old = None if batch.old_logprobs is None else rest(batch.old_logprobs)
    is_weights = None if batch.is_weights is None else rest(batch.is_weights)
    tail = batch.replace(
        input_ids=np.where(real, np.take_along_axis(batch.input_ids, index, axis=1), pad_id).astype(np.int32),
        attention_mask=real.astype(np.int32),
        positions=(cut[:, None] + np.arange(columns)).astype(np.int32),
        loss_mask=rest(batch.loss_mask),
        loss_weights=rest(batch.loss_weights),
        advantages=rest(batch.advantages) if batch.advantages.ndim == 2 else batch.advantages,
        old_logprobs=old,
        is_weights=is_weights,
    )
    return PromptSplit(prompt_ids, prompt_mask, source, tail)


_WHOLE_ROWS_AT = 0.8
"""Whole rows' counted cost, as a share of the split's, at which :func:`split_pays` gives way."""


def prompt_cuts(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """``(B,)`` each row's real length and the column of its first trained token (its length if none)."""
    lengths = batch.attention_mask.sum(axis=1)
    trained = batch.loss_mask > 0
    return lengths, np.where(trained.any(axis=1), trained.argmax(axis=1), np.maximum(lengths, 1))


def split_pays(batch: Batch, micro_batch_size: int, pair_cost: float) -> bool:
    """Whether cutting each micro-batch at its prompts is kept over whole rows sorted by length.

    The split runs a group's shared prompt once, but its attention needs a mask (the prompts are
    left-padded), so every query-key pair of a row is computed. Whole right-padded rows need no
    mask: attention is causal, half the pairs, and rows sorted by length barely pad. A one-turn
    task's rows are mostly prompt (the split wins); a multi-turn episode's are mostly its own turns,
    whose long contexts make the attention's share large (whole rows win).

    Whole rows are taken only where the count makes them at least a fifth cheaper: it leaves out
    the split's second forward call and what the causal kernel really saves (1.55x, not 2x, on
    `sudoku-moves-tiny`), and within that margin the two measured alike (16 one-turn Sudoku
    demonstrations, counted 7% cheaper whole: 104-117 ms an update either way), where switching
    would only change the float order of a run's sums.

    Args:
        batch: The rows a learner trains, in their micro-batches' order.
        micro_batch_size: Rows a forward pass.
        pair_cost: A query-key pair's attention FLOPs over a token's FLOPs in the layers' linears
            (``2 * attention width * layers / non-embedding weights``).
    """
    lengths, cut = prompt_cuts(batch)
    split = 0.0
    for start in range(0, len(lengths), micro_batch_size):
        rows = slice(start, start + micro_batch_size)
        prompts, _ = distinct_prompts([ids[:n] for ids, n in zip(batch.input_ids[rows], cut[rows])])
        width, rest = max(len(p) for p in prompts), int((lengths[rows] - cut[rows]).clip(min=0).max())
        count = len(cut[rows])
        split += len(prompts) * width * (1 + pair_cost * width) + count * rest * (1 + pair_cost * (width + rest))
    ordered = np.sort(lengths)
    whole = sum(
        len(chunk) * int(chunk.max()) * (1 + pair_cost * int(chunk.max()) / 2)
        for chunk in np.split(ordered, range(micro_batch_size, len(ordered), micro_batch_size))
    )
    return whole > _WHOLE_ROWS_AT * split
