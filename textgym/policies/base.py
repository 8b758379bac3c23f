"""The one protocol every policy follows: a batch of observations in, a batch of actions out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from textgym.messages import thaw


@dataclass
class PolicyOutput:
    """Actions for a batch, and the sampled tokens' logprobs where the policy knows them.

    ``actions[i]`` is a str, an assistant message dict, or (for token envs) an ``int32`` array of
    generated ids. ``logprobs[i]`` is a ``float32`` array aligned with those ids, or None.
    ``cut[i]`` is True when the policy's token limit cut action ``i`` (an endpoint's
    ``finish_reason == "length"``): if that turn ends the episode unsolved, the rollout's
    ``end_reason`` is ``length``. Token envs need no flag (a sample without a stop token says it).
    """

    actions: list[Any]
    logprobs: list[np.ndarray | None] | None = None
    cut: list[bool] | None = None


@runtime_checkable
class Policy(Protocol):
    def act(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]] | None = None) -> PolicyOutput:
        """Return one action per observation (``infos[i]`` is slot ``i``'s latest info)."""
        ...


class SlotTools:
    """The OpenAI tool schemas that the env in each batch slot declared at its last reset.

    Envs give ``info["tools"]`` only in reset infos (including autoresets inside a vector env),
    so a policy that calls tools remembers them per slot until the slot's next reset.
    """

    def __init__(self) -> None:
        self._tools: dict[int, list[dict[str, Any]]] = {}

    def update(self, infos: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> None:
        """Remember the tools of every slot whose info has them.

        ``infos`` is one info per slot (as ``collect`` passes them), or a Gymnasium vector info
        (arrays with ``_tools`` masks) straight from ``venv.reset``/``venv.step``.
        """
        if isinstance(infos, Mapping):
            tools, mask = infos.get("tools"), infos.get("_tools")
            if tools is not None and mask is not None:
                infos = [{"tools": t} if on else {} for t, on in zip(tools, mask)]
            else:
                infos = [infos]  # a single env's info
        for i, info in enumerate(infos or ()):
            if info and info.get("tools") is not None:
                self._tools[i] = [thaw(t) for t in info["tools"] if isinstance(t, Mapping)]

    def __getitem__(self, slot: int) -> list[dict[str, Any]]:
        return self._tools.get(slot, [])
