"""Rollout records: one finished episode, as training data and as an evaluation log.

Records write to and read from JSONL (arrays as lists), so a file of rollouts is both a dataset
for the trainers and something a person can grep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from textgym.messages import thaw

_ARRAYS = {"token_ids": np.int32, "loss_mask": np.int8, "logprobs": np.float32}


@dataclass
class Rollout:
    """One episode.

    Token fields come from :class:`textgym.wrappers.TokenObservation` and are None for text envs:
    ``token_ids`` is the whole trajectory, ``loss_mask`` is 1 exactly on policy-sampled tokens,
    ``logprobs`` holds the sampler's logprob at those positions (0 elsewhere), ``turn_spans`` the
    ``[start, end)`` span of each policy turn. ``group`` ties GRPO groups (same seed) together.
    """

    env_id: str
    task_id: str
    seed: int | None
    messages: list[dict[str, Any]]
    reward: float
    success: bool
    turns: int
    terminated: bool
    truncated: bool
    token_ids: np.ndarray | None = None
    loss_mask: np.ndarray | None = None
    logprobs: np.ndarray | None = None
    turn_spans: list[tuple[int, int]] | None = None
    group: int | None = None
    timing: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self) | {"messages": thaw(self.messages)}
        for name in _ARRAYS:
            if d[name] is not None:
                d[name] = np.asarray(d[name]).tolist()
        if d["turn_spans"] is not None:
            d["turn_spans"] = [list(s) for s in d["turn_spans"]]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Rollout":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        for name, dtype in _ARRAYS.items():
            if kwargs.get(name) is not None:
                kwargs[name] = np.asarray(kwargs[name], dtype=dtype)
        if kwargs.get("turn_spans") is not None:
            kwargs["turn_spans"] = [tuple(s) for s in kwargs["turn_spans"]]
        return cls(**kwargs)


def write_rollouts(path: str | os.PathLike, rollouts: Iterable[Rollout], append: bool = False) -> None:
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for r in rollouts:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def read_rollouts(path: str | os.PathLike) -> list[Rollout]:
    with open(path, encoding="utf-8") as fh:
        return [Rollout.from_dict(json.loads(line)) for line in fh if line.strip()]
