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
from textgym.rollout import EpisodeSlot


class SeededModelPolicy(ModelPolicy):
    """A :class:`~textgym.policies.model.ModelPolicy` whose episodes draw with keys from the run's
    seed tree: ``tree.episode_key(phase, step, group, member, row)``, where ``row`` tells a
    mixture's envs apart and ``group`` is the step's global group index (``first_group`` plus the
    group's index in this ``collect``) or, with ``first_group=None``, the task seed (held-out tasks
    are distinct seeds, shared out among processes). No process, slot or batch enters a key, so a
    run samples the same episodes however it is split. ``seconds`` adds up the time of its calls
    (the step's ``time/sampling``)."""

    def __init__(self, model: Any, tree: SeedTree, phase: Phase, step: int, *, row: int = 0, first_group: int | None = 0, **kwargs: Any):
        super().__init__(model, seed=tree.root, **kwargs)
        self.tree, self.phase, self.step, self.row, self.first_group = tree, phase, step, row, first_group
        self.seconds = 0.0

    def episode_key(self, episode: EpisodeSlot) -> int:
        group = episode.seed if self.first_group is None else self.first_group + episode.group
        return self.tree.episode_key(self.phase, self.step, int(group or 0), episode.member, self.row)

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

    Sampling (when ``temperature > 0``) keys each episode's draws by ``SeedTree(seed)``'s
    ``("eval_sampler", step)``, its task seed and ``row`` (the env's index in a mixture), so an
    episode samples the same whatever process or batch plays it.
    """
    from textgym.rollout import collect

    actor = SeededModelPolicy(
        model,
        SeedTree(seed),
        "eval_sampler",
        step,
        row=row,
        first_group=None,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
    )
    rollouts = collect(venv, actor, seeds=list(seeds), group_size=1)
    return {
        "eval/success": float(np.mean([r.success for r in rollouts])),
        "eval/reward": float(np.mean([r.reward for r in rollouts])),
        "eval/turns": float(np.mean([r.turns for r in rollouts])),
    }
