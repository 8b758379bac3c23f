"""The episodes of a run: its train and held-out vector envs, each step's groups collected with
the current model, and the held-out evaluation, each process playing its own share.

Each process plays a contiguous block of the step's groups and every ``world_size``-th held-out
task; what they played is gathered in rank order, so every process sees the same rollouts.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from textgym.algos.config import TrainConfig
from textgym.algos.distributed import processes
from textgym.algos.grpo import SeedTree
from textgym.algos.grpo.seeds import eval_seeds
from textgym.algos.rollouts import branches, seeded, token_envs
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


def prompt_shares(config: TrainConfig, total: int | None = None) -> list[int]:
    """Prompts per env of each step: ``env_weights`` (equal by default) times ``total``
    (``prompts_per_step`` by default), rounded by largest remainder so that they add up.

    Example:
        >>> prompt_shares(TrainConfig(env=("a", "b", "c"), env_weights=(2, 1, 1), prompts_per_step=6))
        [3, 2, 1]
    """
    weights = np.asarray(config.env_weights or [1.0] * len(config.envs), dtype=np.float64)
    total = config.prompts_per_step if total is None else total
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts), kind="stable")[: total - counts.sum()]:
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
    :func:`prompt_shares` (every process's, in order), then its ``branch_groups`` branched groups
    (:func:`collect_branches`), and this process's ``time/sampling``, ``time/env`` and
    ``time/wrapper`` of them (see :func:`token_envs.token_seconds`), with ``branch/*``."""
    from textgym.rollout import collect

    grpo = config.grpo
    tree = SeedTree(grpo.seed)
    seeds = tree.task_seeds(step, config.prompts_per_step)
    mine = processes.my_block(config.prompts_per_step)  # this process's groups (all of them in one process)
    local: list[Any] = []
    seconds = {"time/sampling": 0.0, "time/env": 0.0, "time/wrapper": 0.0}
    keep_states = bool(config.branch_groups) and config.branch_source == "rollouts"  # where branches start
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
            row=row,
            first_group=groups[0],  # episodes keyed by the step's group index, not by this process
            max_new_tokens=grpo.max_new_tokens,
            temperature=grpo.temperature,
            top_p=grpo.top_p,
        )
        clock = token_envs.token_clock(venv)
        got = collect(venv, actor, seeds=[seeds[g] for g in groups], group_size=grpo.group_size, env_id=env, keep_states=keep_states)
        for key, value in token_envs.token_seconds(clock, token_envs.token_clock(venv)).items():
            seconds[key] += value
        seconds["time/sampling"] += actor.seconds
        for r in got:
            assert r.group is not None  # collect numbers every rollout's group
            local.append(dataclasses.replace(r, group=r.group + groups[0]))
    rollouts = processes.gather(local)  # every group of the step, in order, on every process
    if not config.branch_groups:
        return rollouts, seconds
    branches, metrics = collect_branches(config, model, venvs, step, rollouts)
    rollouts = [dataclasses.replace(r, turn_states=None) for r in rollouts]  # chosen from: no longer needed
    return rollouts + branches, metrics | {key: seconds[key] + metrics[key] for key in seconds}


def collect_branches(
    config: TrainConfig, model: Any, venvs: dict[str, Any], step: int, rollouts: list[Any]
) -> tuple[list[Any], dict[str, float]]:
    """Step ``step``'s ``config.branch_groups`` branched groups (every process's, in order), their
    ``branch/*`` metrics and this process's ``time/sampling``, ``time/env`` and ``time/wrapper`` of them.

    Every process chooses the same starts (from the step's gathered ``rollouts``, or from the
    demonstrator, a mixture's shared by :func:`prompt_shares`) and plays a contiguous block of
    them. Group ``prompts_per_step + i`` is start ``i``, so no branched group shares an id with an
    ordinary one.
    """
    started = time.perf_counter()
    grpo, tree = config.grpo, SeedTree(config.grpo.seed)
    if config.branch_source == "rollouts":
        starts = branches.rollout_starts(rollouts, config.branch_groups, tree.rng("branch_starts", step))
    else:
        oracle = config.sft_config()  # the warm start's demonstrator
        starts = [
            start
            for env, n in zip(config.envs, prompt_shares(config, config.branch_groups))
            for start in branches.demonstrator_starts(env, config.kwargs_of(env), oracle.oracle_kwargs_of(env), n, tree, step)
        ]
    world, rank = processes.world_size(), processes.rank()
    mine = np.array_split(np.arange(len(starts)), world)[rank].tolist()
    local: list[Any] = []
    seconds = {"time/sampling": 0.0, "time/env": 0.0, "time/wrapper": 0.0}
    for row, (env, venv) in enumerate(venvs.items()):
        chosen = [i for i in mine if starts[i].env_id == env]
        if not chosen:
            continue
        actor = seeded.SeededModelPolicy(
            model,
            tree,
            "branch_sampler",
            step,
            row=row * world + rank,
            max_new_tokens=grpo.max_new_tokens,
            temperature=grpo.temperature,
            top_p=grpo.top_p,
        )
        clock = token_envs.token_clock(venv)
        played = branches.play_branches(venv, actor, [starts[i] for i in chosen], grpo.group_size, config.branch_turns)
        for key, value in token_envs.token_seconds(clock, token_envs.token_clock(venv)).items():
            seconds[key] += value
        seconds["time/sampling"] += actor.seconds
        local += [dataclasses.replace(r, group=config.prompts_per_step + chosen[r.group]) for r in played]
    played = sorted(processes.gather(local), key=lambda r: r.group)  # stable: a group's episodes keep their order
    return played, branches.branch_metrics(played, time.perf_counter() - started) | seconds


def evaluate_shares(model: Any, venv: Any, seeds: list[int], **kwargs: Any) -> dict[str, float]:
    """:func:`seeded.evaluate` on this process's held-out tasks, averaged with the other processes'."""
    local = seeded.evaluate(model, venv, seeds, **kwargs) if seeds else {}
    parts = [(n, m) for n, m in processes.gather([(len(seeds), local)]) if n]
    total = sum(n for n, _ in parts)
    return {k: sum(n * m[k] for n, m in parts) / total for k in parts[0][1]}
