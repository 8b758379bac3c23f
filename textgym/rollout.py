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


@dataclass(frozen=True, eq=False)
class TokenTrajectory:
    """The tokens of one episode, as :class:`textgym.wrappers.TokenObservation` reports them.

    It travels in ``info["trajectory"]`` as one object (not as loose arrays) because vector envs
    batch array-valued infos into one fixed-shape array, which variable lengths would break.

    Attributes:
        token_ids: ``(T,)`` int32, the whole context: prompt, sampled ids and env turns.
        loss_mask: ``(T,)`` int8, 1 exactly on the policy-sampled ids.
        logprobs: ``(T,)`` float32 sampler logprobs on the sampled ids (0 elsewhere), or None
            unless every policy turn gave them.
        turn_spans: ``[start, end)`` of each policy turn in ``token_ids``.
        messages: The final conversation.
    """

    token_ids: np.ndarray
    loss_mask: np.ndarray
    logprobs: np.ndarray | None
    turn_spans: tuple[tuple[int, int], ...]
    messages: tuple[Mapping[str, Any], ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenTrajectory):
            return NotImplemented
        same_lps = (self.logprobs is None) == (other.logprobs is None) and (
            self.logprobs is None or np.array_equal(self.logprobs, other.logprobs)
        )
        return (
            np.array_equal(self.token_ids, other.token_ids)
            and np.array_equal(self.loss_mask, other.loss_mask)
            and same_lps
            and self.turn_spans == other.turn_spans
            and self.messages == other.messages
        )

    __hash__ = None  # mutable arrays inside


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
