"""The one protocol every policy follows: a batch of observations in, a batch of actions out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass
class PolicyOutput:
    """Actions for a batch, and the sampled tokens' logprobs where the policy knows them.

    ``actions[i]`` is a str, an assistant message dict, or (for token envs) an ``int32`` array of
    generated ids. ``logprobs[i]`` is a ``float32`` array aligned with those ids, or None.
    """

    actions: list[Any]
    logprobs: list[np.ndarray | None] | None = None


@runtime_checkable
class Policy(Protocol):
    def act(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]] | None = None) -> PolicyOutput:
        """Return one action per observation."""
        ...
