"""Settings under which the ``tiny`` model learns an env on a laptop CPU.

A recipe fills the fields a user left unset (``None``) when the model is ``tiny``; anything given
explicitly wins. Envs without a recipe get the generic defaults. The numbers come from the runs
recorded in docs/benchmarks.md ("Learning on Sudoku 4x4 with the tiny model").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.grpo import GRPOConfig
from textgym.algos.tiny import NAME as TINY

RECIPES: dict[str, dict[str, Any]] = {
    "textgym/Sudoku-v0": {
        # 4x4 with one blank, answered in one turn with the grid: prompts of ~130 tokens. The
        # demonstrations answer in the compact form (digits only, one row per line: ~23 tokens
        # instead of ~100 for the drawn board), which gets the tiny model past copying the givens.
        # They come from a noisy demonstrator (each blank a random digit: right a quarter of the
        # time), so the warm start learns the format and some solving (34-58% held-out) and GRPO
        # has the rest to learn from the verifier; a clean oracle leaves it nothing (80-96%).
        "env_kwargs": {"size": 4, "blanks": 1, "max_turns": 1},
        "oracle_kwargs": {"compact": True, "noise": 1.0},
        "steps": 200,
        "prompts_per_step": 16,
        "sft_steps": 400,
        "sft_demos": 2000,
        "sft_lr": 3e-3,
        "threads": 1,
        "grpo": {
            "group_size": 8,
            "lr": 3e-4,  # 5e-4 and 1e-3 were unstable (docs/benchmarks.md)
            "num_iterations": 2,  # two updates per batch learned faster per second than one
            "max_new_tokens": 64,
            "max_length": 512,
            "micro_batch_size": 32,
            "temperature": 1.0,
            "max_grad_norm": 1.0,
            "advantage_scaling": "group",
            "loss_aggregation": "token-mean",
        },
    },
}

GENERIC: dict[str, Any] = {"env_kwargs": {}, "steps": 100, "prompts_per_step": 8, "sft_steps": 0, "sft_demos": 256, "threads": None}


def recipe(env: str, model: str) -> dict[str, Any]:
    """The recipe for ``env`` when ``model`` is tiny, else the generic defaults."""
    return RECIPES.get(env, GENERIC) if str(model) == TINY else GENERIC


def grpo_config(env: str, model: str, **overrides: Any) -> GRPOConfig:
    """The recipe's GRPO settings with ``overrides`` (``None`` values ignored) on top."""
    base = dict(recipe(env, model).get("grpo", {}))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return GRPOConfig(**base)


def resolve_train(config: TrainConfig) -> TrainConfig:
    """``config`` with every ``None`` field filled from the recipe (or the generic defaults)."""
    rec = recipe(config.env, config.model)
    changes: dict[str, Any] = {}
    if config.grpo is None:
        changes["grpo"] = grpo_config(config.env, config.model)
    for name in ("env_kwargs", "steps", "prompts_per_step", "sft_steps", "sft_demos"):
        if getattr(config, name) is None:
            changes[name] = rec.get(name, GENERIC[name])
    if config.threads is None:
        changes["threads"] = rec.get("threads")
    if config.sft_env_kwargs is None:
        changes["sft_env_kwargs"] = rec.get("sft_env_kwargs")
    if config.sft_oracle_kwargs is None:
        changes["sft_oracle_kwargs"] = rec.get("oracle_kwargs")
    grpo = changes.get("grpo") or config.grpo
    if config.sft_lr is None:
        changes["sft_lr"] = rec.get("sft_lr", 10 * grpo.lr)
    # One seed for the run, and the schedule's horizon from the run's length.
    steps = changes.get("steps", config.steps)
    total = grpo.total_steps if grpo.total_steps is not None else steps * grpo.num_iterations
    changes["grpo"] = dataclasses.replace(grpo, seed=config.seed, total_steps=total)
    return dataclasses.replace(config, **changes)


def resolve_sft(config: SFTConfig) -> SFTConfig:
    """``config`` with ``env_kwargs``, ``steps``, ``demos`` and ``lr`` filled from the recipe."""
    rec = recipe(config.env, config.model)
    changes: dict[str, Any] = {}
    if config.env_kwargs is None:
        changes["env_kwargs"] = rec.get("env_kwargs", {})
    if config.steps is None:
        changes["steps"] = rec.get("sft_steps") or 100
    if config.demos is None:
        changes["demos"] = rec.get("sft_demos", GENERIC["sft_demos"])
    if config.lr is None:
        changes["lr"] = rec.get("sft_lr", 1e-4)
    if config.threads is None:
        changes["threads"] = rec.get("threads")
    if config.oracle_kwargs is None:
        changes["oracle_kwargs"] = rec.get("oracle_kwargs")
    return dataclasses.replace(config, **changes)
