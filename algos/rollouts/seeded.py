"""Sampling from the trained model during a run: every call seeded from the run's seed tree, and
the held-out evaluation that plays the fixed evaluation tasks with it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from textgym.algos.grpo.seeds import Phase, SeedTree
from textgym.policies.base import PolicyOutput
from textgym.policies.model import ModelPolicy


class SeededModelPolicy(ModelPolicy):
    """A :class:`~textgym.policies.model.ModelPolicy` whose ``k``-th call of a step samples with
    ``tree.seed(phase, step, turn=k, row=row)``: calls are counted across waves, and ``row`` tells a
    mixture's envs apart, so no two calls of a run share a seed. ``seconds`` adds up the time of
    its calls (the step's ``time/sampling``)."""

    def __init__(self, model: Any, tree: SeedTree, phase: Phase, step: int, *, row: int = 0, **kwargs: Any):
        super().__init__(model, **kwargs)
        self.tree, self.phase, self.step, self.row = tree, phase, step, row
        self.seconds = 0.0

    def call_seed(self, call: int) -> int:
        return self.tree.seed(self.phase, self.step, turn=call, row=self.row)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        start = time.perf_counter()
        try:
            return super().act(observations, infos)
        finally:
            self.seconds += time.perf_counter() - start


def evaluate(
    model: Any,
    venv: gym.vector.VectorEnv,
    seeds: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    top_p: float = 1.0,
    step: int = 0,
    row: int = 0,
) -> dict[str, float]:
    """Play one episode per task seed with the model; return ``eval/success``, ``eval/reward``, ``eval/turns``.

    Sampling (when ``temperature > 0``) draws from ``SeedTree(seed)`` at ``("eval_sampler", step,
    row=row)`` (``row``: the env's index in a mixture).
    """
    from textgym.rollout import collect

    actor = SeededModelPolicy(
        model, SeedTree(seed), "eval_sampler", step, row=row, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p
    )
    rollouts = collect(venv, actor, seeds=list(seeds), group_size=1)
    return {
        "eval/success": float(np.mean([r.success for r in rollouts])),
        "eval/reward": float(np.mean([r.reward for r in rollouts])),
        "eval/turns": float(np.mean([r.turns for r in rollouts])),
    }
