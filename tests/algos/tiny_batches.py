"""A tiny random decoder's size and random token rollouts that the backend tests train on."""

from __future__ import annotations

import numpy as np

from textgym.algos.models import tiny
from textgym.rollout import Rollout

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def rollouts(seed: int, n: int = 8) -> list[Rollout]:
    """``n`` random episodes in groups of 4 (rewards alternate 0, 1), each with sampler logprobs."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(10, 40))
        mask = (np.arange(size) >= int(rng.integers(3, size - 2))).astype(np.int8)
        out.append(
            Rollout(
                "e",
                "t",
                i // 4,
                [],
                float(i % 2),
                False,
                1,
                True,
                False,
                token_ids=rng.integers(0, 270, size).astype(np.int32),
                loss_mask=mask,
                logprobs=np.where(mask > 0, rng.normal(-5.6, 0.3, size), 0.0).astype(np.float32),
                group=i // 4,
            )
        )
    return out
