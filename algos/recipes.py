"""Named presets: settings under which a model learns an env on a laptop CPU (the ``tiny`` model, SmolLM2-135M).

A preset fills the fields a user left unset (``None``); anything given explicitly wins. A run
names one with ``--preset`` or gets the preset made for its env and model, if there is one;
other runs get the generic defaults. The numbers come from the runs recorded in
docs/benchmarks.md ("Learning on Sudoku 4x4 with the tiny model").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.grpo import GRPOConfig
from textgym.algos.models import SMOLLM2
from textgym.algos.tiny import NAME as TINY

PRESETS: dict[str, dict[str, Any]] = {
    "sudoku-tiny": {
        "env": "textgym/Sudoku-v0",
        "model": TINY,
        # 4x4 with one blank, answered in one turn with the grid: prompts of ~130 tokens. The
        # demonstrations answer in the compact form (digits only, one row per line: ~23 tokens
        # instead of ~100 for the drawn board), which gets the tiny model past copying the givens.
        # They come from a noisy demonstrator (each blank a random digit: right a quarter of the
        # time), so the warm start learns the format but not the rule (24-43% held-out once SFT
        # has converged) and GRPO learns the rule from the verifier; a clean oracle leaves it
        # nothing (80-96%).
        "env_kwargs": {"size": 4, "blanks": 1, "max_turns": 1},
        "oracle_kwargs": {"compact": True, "noise": 1.0},
        "steps": 200,
        "prompts_per_step": 16,
        # 1600 steps: the warm start must copy the givens reliably and guess the blank at chance.
        # At 400 steps the copy phase had ended in some seeds and not in others (SFT loss 0.07-0.16
        # against a floor of ~0.055 nats per token, the guessed blank's), so at temperature 1
        # between 11% and 64% of the answers altered a given and GRPO spent its steps, or failed,
        # on copying. At 800 the runs whose SFT had not reached the floor started higher and
        # gained least (JAX seed 2: +18 points); at 1600 every seed's gain is +25 or more
        # (issue 13, docs/benchmarks.md).
        "sft_steps": 1600,
        "sft_demos": 2000,
        "sft_lr": 3e-3,
        "threads": 1,
        "grpo": {
            "group_size": 8,
            "lr": 3e-4,  # 5e-4 and 1e-3 were unstable (docs/benchmarks.md)
            # Cosine decay to 0 over the run (total_steps = steps x num_iterations) after a short
            # warm-up: at a constant 3e-4 a run fell below its warm start at step 190 of 200 and
            # its training reward collapsed for five steps (issue 13); the decay leaves the last
            # steps little room to undo what the first ones learned.
            "lr_schedule": "cosine",
            "warmup_steps": 10,
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

# SmolLM2-135M-Instruct on the same task, sized for a two-core CPU: see docs/models.md ("Learning on
# SmolLM2") for the runs behind these numbers and what did not work.
PRESETS["sudoku-smollm2"] = {
    "env": "textgym/Sudoku-v0",
    "model": SMOLLM2,
    # The compact ChatML template (no system turn, no tool list): prompts of 79 tokens instead of
    # 706 with the rules and the place tool, so the model learns the task from demonstrations.
    "env_kwargs": {"size": 4, "blanks": 1, "max_turns": 1},
    "chat_template": "compact",
    # noise=1.0 (the blank a uniform guess): the warm start learns the format, not the rule
    # (25.8% greedy); with noise=0.5 SmolLM2 learns the rule from the demonstrations (78.1%).
    "oracle_kwargs": {"compact": True, "noise": 1.0},
    # 30 GRPO steps, not 60: a whole run (SFT, GRPO, four evaluations) then fits the 45-minute
    # budget on one core; at 60 steps torch seed 0 had gained +18.7 points by step 30.
    "steps": 30,
    "prompts_per_step": 8,
    # 96 steps at 1e-3, not 24 at 5e-4: the warm start must copy the givens when it samples at
    # temperature 1 (after 24 steps no sampled answer of 32 solved a puzzle: rows of the wrong
    # length, altered givens); at 96 the loss reaches the guessed blank's floor.
    "sft_steps": 96,
    "sft_demos": 1536,
    "sft_lr": 1e-3,
    "threads": 2,
    "grpo": {
        "group_size": 8,
        # The top 8 of 30 layers and the final norm: the backward pass stops at layer 22
        # of 30 and the tied 28M-parameter embedding stays as it is.
        "trainable_layers": 8,
        "lr": 1e-4,
        "lr_schedule": "cosine",
        "warmup_steps": 3,
        "filter_zero_std_groups": True,  # all-equal groups carry no gradient; dropping them saves update time
        "max_new_tokens": 40,
        "max_length": 160,
        "micro_batch_size": 16,
        "temperature": 1.0,
        "max_grad_norm": 1.0,
        "advantage_scaling": "group",
        "loss_aggregation": "token-mean",
    },
}

RECIPES: dict[str, dict[str, Any]] = {p["env"]: p for p in PRESETS.values() if p["model"] == TINY}
"""The tiny model's preset per env (the presets' former name, kept for existing code)."""

GENERIC: dict[str, Any] = {"env_kwargs": {}, "steps": 100, "prompts_per_step": 8, "sft_steps": 0, "sft_demos": 256, "threads": None}


def recipe(env: str | tuple[str, ...], model: str, preset: str | None = None) -> dict[str, Any]:
    """The preset named ``preset``, else the one for ``env`` (its first, for a mixture) and ``model``, else the generic defaults.

    Raises:
        ValueError: ``preset`` names no preset.
    """
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
        return PRESETS[preset]
    first = env if isinstance(env, str) else env[0]
    return next((p for p in PRESETS.values() if p["env"] == first and p["model"] == str(model)), GENERIC)


def grpo_config(env: str | tuple[str, ...], model: str, preset: str | None = None, **overrides: Any) -> GRPOConfig:
    """The preset's GRPO settings with ``overrides`` (``None`` values ignored) on top."""
    base = dict(recipe(env, model, preset).get("grpo", {}))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return GRPOConfig(**base)


def resolve_train(config: TrainConfig) -> TrainConfig:
    """``config`` with every ``None`` field filled from the recipe (or the generic defaults)."""
    rec = recipe(config.env, config.model, config.preset)
    changes: dict[str, Any] = {}
    if config.output_dir is None:
        changes["output_dir"] = default_output_dir(config.env, config.backend)
    if config.grpo is None:
        changes["grpo"] = grpo_config(config.env, config.model, config.preset)
    for name in ("env_kwargs", "steps", "prompts_per_step", "sft_steps", "sft_demos"):
        if getattr(config, name) is None:
            changes[name] = rec.get(name, GENERIC[name])
    if config.env_kwargs is None and not isinstance(config.env, str):  # a mixture: each env its preset's
        changes["env_kwargs"] = {env: recipe(env, config.model).get("env_kwargs", {}) for env in config.env}
    if config.threads is None:
        changes["threads"] = rec.get("threads")
    if config.sft_env_kwargs is None:
        changes["sft_env_kwargs"] = rec.get("sft_env_kwargs")
    if config.sft_oracle_kwargs is None:
        changes["sft_oracle_kwargs"] = rec.get("oracle_kwargs")
    if config.chat_template == "auto" and "chat_template" in rec:
        changes["chat_template"] = rec["chat_template"]
    grpo = changes.get("grpo") or config.grpo
    if config.sft_lr is None:
        changes["sft_lr"] = rec.get("sft_lr", 10 * grpo.lr)
    # One seed for the run, and the schedule's horizon from the run's length.
    steps = changes.get("steps", config.steps)
    total = grpo.total_steps if grpo.total_steps is not None else steps * grpo.num_iterations
    changes["grpo"] = dataclasses.replace(grpo, seed=config.seed, total_steps=total)
    return dataclasses.replace(config, **changes)


def resolve_sft(config: SFTConfig) -> SFTConfig:
    """``config`` with ``output_dir``, ``env_kwargs``, ``steps``, ``demos`` and ``lr`` filled from the recipe."""
    rec = recipe(config.env, config.model, config.preset)
    changes: dict[str, Any] = {}
    if config.output_dir is None:
        changes["output_dir"] = default_output_dir(config.env, f"sft-{config.backend}")
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
    if config.trainable_layers is None:
        changes["trainable_layers"] = rec.get("grpo", {}).get("trainable_layers")
    if config.chat_template == "auto" and "chat_template" in rec:
        changes["chat_template"] = rec["chat_template"]
    return dataclasses.replace(config, **changes)


def default_output_dir(env: str | tuple[str, ...], suffix: str) -> str:
    """``runs/<env name>-<suffix>`` (a mixture joins its env names with ``+``)."""
    envs = (env,) if isinstance(env, str) else env
    return "runs/" + "+".join(e.split("/")[-1].lower() for e in envs) + f"-{suffix}"
