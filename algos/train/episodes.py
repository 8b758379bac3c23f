"""The episodes of a run: its train and held-out vector envs, each step's groups collected with
the current model, and the held-out evaluation, each process playing its own share.

Each process plays a contiguous block of the step's groups and every ``world_size``-th held-out
task; what they played is gathered in rank order, so every process sees the same rollouts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from textgym.algos.config import TrainConfig
from textgym.algos.distributed import processes
from textgym.algos.grpo import SeedTree
from textgym.algos.grpo.seeds import eval_seeds
from textgym.algos.rollouts import seeded, token_envs
from textgym.algos.train.report import env_name


class Episodes:
    """The run's vector envs, one per env of a mixture, for training and for the held-out tasks.

    Args:
        config: The resolved run.
        model: The language model the run trains (it plays both).
        tokenizer: Its tokenizer.
        template: The chat template of the run (None: the tokenizer's own).
    """

    def __init__(self, config: TrainConfig, model: Any, tokenizer: Any, template: str | None):
        self.config, self.model = config, model
        world, rank = processes.world_size(), processes.rank()
        self.held_out = eval_seeds(config.eval_episodes)[rank::world]

        def venvs(width: int) -> dict[str, Any]:
            return {
                env: token_envs.token_venv(
                    *env_source(config, env),
                    tokenizer,
                    template,
                    min(config.num_envs, width),
                    config.vectorization_mode,
                    config.on_template_break,
                )
                for env in config.envs
            }

        self.train = venvs(config.prompts_per_step // world * config.grpo.group_size)
        self.eval = venvs(max(1, len(self.held_out)))

    def evaluate(self, at: int) -> dict[str, float]:
        """``eval/*`` of the model at step ``at`` on the held-out tasks (a mixture's per env too)."""
        grpo = self.config.grpo
        results = [
            evaluate_shares(
                self.model,
                venv,
                self.held_out,
                max_new_tokens=grpo.max_new_tokens,
                temperature=self.config.eval_temperature,
                seed=grpo.seed,
                top_p=grpo.top_p,
                step=at,
                row=i,
            )
            for i, venv in enumerate(self.eval.values())
        ]
        return per_env(self.config, results, "eval/")

    def close(self) -> None:
        for venv in (*self.train.values(), *self.eval.values()):
            venv.close()


def prompt_shares(config: TrainConfig) -> list[int]:
    """Prompts per env of each step: ``env_weights`` (equal by default) times ``prompts_per_step``,
    rounded by largest remainder so that they add up.

    Example:
        >>> prompt_shares(TrainConfig(env=("a", "b", "c"), env_weights=(2, 1, 1), prompts_per_step=6))
        [3, 2, 1]
    """
    weights = np.asarray(config.env_weights or [1.0] * len(config.envs), dtype=np.float64)
    exact = config.prompts_per_step * weights / weights.sum()
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts), kind="stable")[: config.prompts_per_step - counts.sum()]:
        counts[i] += 1
    return counts.tolist()


def env_source(config: TrainConfig, env: str) -> tuple[str, dict[str, Any]]:
    """The id and keyword arguments ``env``'s sub-envs are made with: the env itself, or a client of its servers."""
    if config.env_url:
        from textgym.registration import REMOTE_ID

        return REMOTE_ID, {"urls": list(config.env_url)}
    return env, config.kwargs_of(env)


def per_env(config: TrainConfig, results: list[dict[str, float]], prefix: str) -> dict[str, float]:
    """One env's metrics as they are; a mixture's as their means plus ``<prefix><env name>/<metric>`` each."""
    if len(results) == 1:
        return results[0]
    merged = {k: float(np.mean([r[k] for r in results])) for k in results[0]}
    for env, r in zip(config.envs, results):
        merged |= {f"{prefix}{env_name(env)}/{k.removeprefix(prefix)}": v for k, v in r.items()}
    return merged


def collect_step(config: TrainConfig, model: Any, venvs: dict[str, Any], step: int) -> tuple[list[Any], dict[str, float]]:
    """Step ``step``'s groups sampled by ``model``, shared among a mixture's envs by
    :func:`prompt_shares` (every process's, in order), and this process's ``time/sampling``,
    ``time/env`` and ``time/wrapper`` of them (see :func:`token_envs.token_seconds`)."""
    from textgym.rollout import collect

    grpo = config.grpo
    tree = SeedTree(grpo.seed)
    seeds = tree.task_seeds(step, config.prompts_per_step)
    mine = processes.my_block(config.prompts_per_step)  # this process's groups (all of them in one process)
    world, rank = processes.world_size(), processes.rank()
    local: list[Any] = []
    seconds = {"time/sampling": 0.0, "time/env": 0.0, "time/wrapper": 0.0}
    first = 0
    for row, ((env, venv), share) in enumerate(zip(venvs.items(), prompt_shares(config))):
        groups = [g for g in range(first, first + share) if g in mine]
        first += share
        if not groups:
            continue
        actor = seeded.SeededModelPolicy(
            model,
            tree,
            "train_sampler",
            step,
            row=row * world + rank,
            max_new_tokens=grpo.max_new_tokens,
            temperature=grpo.temperature,
            top_p=grpo.top_p,
        )
        clock = token_envs.token_clock(venv)
        got = collect(venv, actor, seeds=[seeds[g] for g in groups], group_size=grpo.group_size, env_id=env)
        for key, value in token_envs.token_seconds(clock, token_envs.token_clock(venv)).items():
            seconds[key] += value
        seconds["time/sampling"] += actor.seconds
        local += [dataclasses.replace(r, group=r.group + groups[0]) for r in got]
    return processes.gather(local), seconds  # every group of the step, in order, on every process


def evaluate_shares(model: Any, venv: Any, seeds: list[int], **kwargs: Any) -> dict[str, float]:
    """:func:`seeded.evaluate` on this process's held-out tasks, averaged with the other processes'."""
    local = seeded.evaluate(model, venv, seeds, **kwargs) if seeds else {}
    parts = [(n, m) for n, m in processes.gather([(len(seeds), local)]) if n]
    total = sum(n for n, _ in parts)
    return {k: sum(n * m[k] for n, m in parts) / total for k in parts[0][1]}
