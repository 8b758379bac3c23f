"""The tokens a GRPO step runs through the model, counted from its episodes: what a step's floor is
made of (the FLOPs of these tokens over the rate the model's shapes reach; see
``benchmarks/floor_report.py``).

Sampling runs a group's shared first prompt once, then at every later turn the env's reply and the
last sampled id (which no decode step fed, so the context cache never holds it), and each sampled
id but a turn's last through one decode step. The update runs a group's shared prompt once and
every episode up to its last trained token. Padding, finished rows and cache misses are not
counted: these are the tokens the step needs, not the ones it happened to run. Beside each count,
its causal attention's query-key pairs (a token at position ``p`` attends to ``p + 1`` keys).

Example:
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> mask = np.array([0, 0, 0, 1, 1, 0, 0, 1])  # a 3-token prompt, 2 sampled, a 2-token reply, 1 sampled
    >>> episode = SimpleNamespace(group=0, loss_mask=mask)
    >>> sampled_tokens([episode])["tokens/prefilled"]  # the prompt, then the last sampled id and the reply
    6
    >>> sampled_tokens([episode])["tokens/decoded"], packed_tokens([episode, episode])["tokens/packed"]
    (1, 13)
    >>> packed_tokens([episode, episode])["tokens/trained"]  # the LM head runs at sampled tokens only
    6
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def causal_pairs(start: int, stop: int) -> int:
    """Query-key pairs of the tokens at positions ``start .. stop - 1`` under causal attention."""
    return (stop * (stop + 1) - start * (start + 1)) // 2


def sampled_spans(loss_mask: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, end)`` runs of sampled (loss mask 1) tokens: one per policy turn."""
    edges = np.diff(np.concatenate([[0], (np.asarray(loss_mask) > 0).astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def sampled_tokens(rollouts: Sequence[Any]) -> dict[str, int]:
    """``tokens/prefilled``, ``tokens/decoded`` and their ``tokens/*_pairs`` of sampling ``rollouts``;
    ``tokens/sampled``: the positions whose LM head it computes (one a sampled token)."""
    keys = ("tokens/prefilled", "tokens/prefill_pairs", "tokens/decoded", "tokens/decode_pairs", "tokens/sampled")
    out: dict[str, int] = dict.fromkeys(keys, 0)
    prompts = set()
    for r in rollouts:
        spans = sampled_spans(r.loss_mask)
        if not spans:
            continue
        if (r.group, spans[0][0]) not in prompts:  # a group's episodes share their first prompt
            prompts.add((r.group, spans[0][0]))
            out["tokens/prefilled"] += spans[0][0]
            out["tokens/prefill_pairs"] += causal_pairs(0, spans[0][0])
        for (_, end), (start, _) in zip(spans, spans[1:]):
            out["tokens/prefilled"] += start - (end - 1)
            out["tokens/prefill_pairs"] += causal_pairs(end - 1, start)
        for start, end in spans:
            out["tokens/sampled"] += end - start
            out["tokens/decoded"] += end - start - 1
            out["tokens/decode_pairs"] += causal_pairs(start, end - 1)
    return out


def packed_tokens(rollouts: Sequence[Any]) -> dict[str, int]:
    """``tokens/packed`` and ``tokens/packed_pairs``: one forward pass of the update over ``rollouts``;
    ``tokens/trained``: the positions whose LM head it computes (one a trained token)."""
    out = {"tokens/packed": 0, "tokens/packed_pairs": 0, "tokens/trained": 0}
    prompts = set()
    for r in rollouts:
        spans = sampled_spans(r.loss_mask)
        if not spans:
            continue
        first, end = spans[0][0], spans[-1][1]
        if (r.group, first) not in prompts:
            prompts.add((r.group, first))
            out["tokens/packed"] += first
            out["tokens/packed_pairs"] += causal_pairs(0, first)
        out["tokens/packed"] += end - first
        out["tokens/packed_pairs"] += causal_pairs(first, end)
        out["tokens/trained"] += int((np.asarray(r.loss_mask) > 0).sum())
    return out
