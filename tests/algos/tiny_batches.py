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


def multi_turn_rollouts(seed: int, n: int = 8, group_size: int = 4, turn_fields: bool = True) -> list[Rollout]:
    """``n`` random episodes of 1-3 policy turns with env tokens between them, in groups of
    ``group_size``: ``turn_spans``, sampler logprobs and (``turn_fields``) per-turn rewards that sum
    to the reward and state keys that repeat across a group (the start, and each count of rewards
    so far), so that turns share anchor states."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ids, mask, spans, rewards, keys = list(rng.integers(0, 270, int(rng.integers(3, 8)))), [], [], [], []
        mask = [0] * len(ids)
        for _ in range(int(rng.integers(1, 4))):
            keys.append(f"k{sum(r > 0 for r in rewards)}")
            start, length = len(ids), int(rng.integers(2, 6))
            ids += list(rng.integers(0, 270, length))
            mask += [1] * length
            spans.append((start, start + length))
            rewards.append(float(rng.choice([0.0, 0.0, 0.5, 1.0])))
            env = int(rng.integers(1, 4))
            ids += list(rng.integers(0, 270, env))
            mask += [0] * env
        mask_array = np.asarray(mask, np.int8)
        out.append(
            Rollout(
                "e",
                "t",
                i // group_size,
                [],
                float(sum(rewards)),
                False,
                len(spans),
                True,
                False,
                token_ids=np.asarray(ids, np.int32),
                loss_mask=mask_array,
                logprobs=np.where(mask_array > 0, rng.normal(-5.6, 0.3, len(ids)), 0.0).astype(np.float32),
                turn_spans=spans,
                group=i // group_size,
                **({"turn_rewards": rewards, "turn_state_keys": keys} if turn_fields else {}),
            )
        )
    return out
