"""Play several policies on the same seeds and profile each: success, pass@k, pass^k, turns, reward."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from textgym.evaluate.estimators import pass_at_k, pass_hat_k
from textgym.policies.base import Policy
from textgym.rollout import Rollout


@dataclass
class PolicyReport:
    """The profile of one policy: its rollouts and the metrics computed from them."""

    name: str
    rollouts: list[Rollout]
    k: int
    seconds: float
    categories: Mapping[int, str | None] = field(default_factory=dict)

    def _by_seed(self) -> dict[int | None, list[bool]]:
        groups: dict[int | None, list[bool]] = defaultdict(list)
        for r in self.rollouts:
            groups[r.seed].append(bool(r.success))
        return groups

    @property
    def success(self) -> float:
        return float(np.mean([r.success for r in self.rollouts]))

    @property
    def pass_at_k(self) -> float:
        return float(np.mean([pass_at_k(len(s), sum(s), self.k) for s in self._by_seed().values()]))

    @property
    def pass_hat_k(self) -> float:
        return float(np.mean([pass_hat_k(len(s), sum(s), self.k) for s in self._by_seed().values()]))

    @property
    def mean_turns(self) -> float:
        return float(np.mean([r.turns for r in self.rollouts]))

    @property
    def mean_reward(self) -> float:
        return float(np.mean([r.reward for r in self.rollouts]))

    @property
    def end_reasons(self) -> dict[str, int]:
        """Episodes per ``end_reason`` (every reason of :data:`textgym.env.END_REASONS`, zeros too)."""
        from textgym.env import END_REASONS

        counts = {reason: 0 for reason in END_REASONS}
        for r in self.rollouts:
            key = r.end_reason or "unrecorded"
            counts[key] = counts.get(key, 0) + 1
        return counts

    @property
    def by_category(self) -> dict[str, float]:
        """Success rate per task category (empty when the env's tasks have none)."""
        groups: dict[str, list[bool]] = defaultdict(list)
        for r in self.rollouts:
            category = self.categories.get(r.seed)
            if category is not None:
                groups[str(category)].append(bool(r.success))
        return {c: float(np.mean(v)) for c, v in sorted(groups.items())}


def evaluate(
    venv: gym.vector.VectorEnv,
    policies: Mapping[str, Callable[[gym.vector.VectorEnv], Policy]],
    seeds: Sequence[int],
    k: int = 1,
    categories: Mapping[int, str | None] | None = None,
    on_episodes: Callable[[str, int], None] | None = None,
) -> list[PolicyReport]:
    """Run every policy on the same seeds, ``k`` episodes per seed, and profile each.

    Args:
        venv: The vector env all policies play (reset with the seeds, so runs are comparable).
        policies: Name -> function making the policy for ``venv`` (the oracle needs it).
        seeds: One seed per task.
        k: Attempts per seed (the ``k`` of pass@k and pass^k).
        categories: Seed -> task category, for success by category.
        on_episodes: Called with (policy name, episodes just finished), e.g. for a progress bar.
    """
    from textgym.rollout import collect

    env_id = getattr(venv.spec, "id", None)
    counted = venv if on_episodes is None else _EpisodeCounter(venv, on_episodes)
    reports = []
    for name, make_policy in policies.items():
        if on_episodes is not None:
            counted.name = name
        policy = make_policy(counted)
        started = time.perf_counter()
        try:
            rollouts = collect(counted, policy, seeds=list(seeds), group_size=k, env_id=env_id)
        finally:
            if callable(getattr(policy, "close", None)):
                policy.close()  # an endpoint policy's threads and connections
        reports.append(PolicyReport(name, rollouts, k, time.perf_counter() - started, dict(categories or {})))
    return reports


class _EpisodeCounter(gym.vector.VectorWrapper):
    """Reports the seeded episodes that finished at each vector step (drives the progress bar).

    Only episodes begun by a seeded reset count: the unseeded autoreset episodes that a vector
    env starts in slots that ``collect`` leaves idle are not the evaluation's.
    """

    def __init__(self, env: gym.vector.VectorEnv, report: Callable[[str, int], None]):
        super().__init__(env)
        self.report = report
        self.name = ""
        self.live = np.zeros(env.num_envs, dtype=bool)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        mask = np.ones(self.num_envs, dtype=bool) if not options or "reset_mask" not in options else options["reset_mask"]
        seeded = [s is not None for s in seed] if isinstance(seed, (list, tuple)) else [True] * self.num_envs
        self.live[mask] = np.asarray(seeded)[mask]
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        done = (terminated | truncated) & self.live
        self.live &= ~done
        self.report(self.name, int(done.sum()))
        return obs, rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return self.env.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.env.get_attr(name)


def task_categories(env_id: str, seeds: Sequence[int], env_kwargs: Mapping[str, Any]) -> dict[int, str | None]:
    """Each seed's task category: ``info["category"]`` at reset, else the task's metadata."""
    env = gym.make(env_id, **env_kwargs)
    out = {}
    try:
        for seed in seeds:
            _, info = env.reset(seed=seed)
            task = getattr(env.unwrapped, "task", None)
            out[seed] = info.get("category") or (getattr(task, "metadata", None) or {}).get("category")
    finally:
        env.close()
    return out
