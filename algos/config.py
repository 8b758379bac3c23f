"""The configs of ``textgym train`` and ``textgym sft``: one flat, frozen dataclass each.

The GRPO objective's knobs live in :class:`~textgym.algos.grpo.GRPOConfig` (shared by both
backends); these configs add what a run needs around it: the env, the backend, the model, how
many rollouts, evaluation, checkpoints. ``backend`` is the only field that picks a framework, and
nothing else changes with it.

The ``tiny`` model has per-env recipes (:mod:`textgym.algos.recipes`): fields left at ``None``
take the recipe's value, so ``textgym train --env textgym/Sudoku-v0 --model tiny`` runs a setting
in which the tiny model is known to learn.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from textgym.algos.grpo import GRPOConfig
from textgym.algos.grpo.seeds import EVAL_SEED_OFFSET, SFT_SEED_OFFSET

__all__ = ["EVAL_SEED_OFFSET", "SFT_SEED_OFFSET", "SFTConfig", "TrainConfig"]

Backend = Literal["jax", "torch"]
Template = Literal["auto", "model", "compact"]
VectorMode = Literal["sync", "async"]


@dataclass(frozen=True, kw_only=True)
class SFTConfig:
    """Supervised warm start on the env's oracle demonstrations (``textgym sft``).

    Attributes:
        env: Registered env id, e.g. ``textgym/Sudoku-v0``.
        env_kwargs: Keyword arguments of ``gym.make``.
        backend: ``jax`` or ``torch``; nothing else depends on it.
        model: A Hugging Face model directory, a ``.gguf`` file (converted once, cached) or a preset:
            ``tiny`` (created in ``output_dir``), ``smollm2-135m`` (see :mod:`textgym.algos.models`).
        preset: A named preset of :data:`textgym.algos.recipes.PRESETS` (e.g. ``sudoku-tiny``)
            that fills the fields left unset; ``None``: the preset for this env and model, if any.
        output_dir: Where the run writes ``final/`` (a HF directory) and ``sft_metrics.jsonl``
            (``None``: ``runs/<env>-sft-<backend>``).
        steps: Optimiser steps.
        demos: Oracle episodes collected (task seeds from the run's seed tree, in
            ``[SFT_SEED_OFFSET, EVAL_SEED_OFFSET)``), cycled through in a seeded order.
        oracle_kwargs: Keyword arguments of the env's ``oracle_action`` (``None``: the recipe's,
            else none); Sudoku's ``{"place": 16}`` demonstrates ``place`` calls, not the grid.
        batch_size: Demonstration episodes per step.
        lr: Peak AdamW learning rate (linear warm-up over the first 10% of steps, cosine decay).
        max_length: Longest packed sequence in tokens.
        micro_batch_size: Sequences per forward/backward (gradients accumulate).
        trainable_layers: Train only the top this many decoder layers (see
            ``GRPOConfig.trainable_layers``; ``None``: the preset's, else every parameter).
        chat_template: ``model``: the checkpoint's template; ``compact``: the tiny template
            without its system turn and tool list (a tiny model learns the task from examples,
            not from instructions; prompts are ~15x shorter); ``auto``: the preset's, else compact for
            ``tiny`` and the model's for others.
        seed: Seeds the tiny model's init, the demonstrations' tasks and their order.
        num_envs: Vector env width when collecting demonstrations.
        threads: Intra-op CPU threads of the backend (``None``: the recipe's, else the
            framework's default); see :func:`textgym.algos.runtime.load_backend`.
        progress: Show rich progress bars.
    """

    env: str
    env_kwargs: dict[str, Any] | None = None
    backend: Backend = "torch"
    model: str = "tiny"
    preset: str | None = None
    output_dir: str | None = None
    steps: int | None = None
    demos: int | None = None
    oracle_kwargs: dict[str, Any] | None = None
    batch_size: int = 16
    lr: float | None = None
    max_length: int = 1024
    micro_batch_size: int = 16
    trainable_layers: int | None = None
    chat_template: Template = "auto"
    seed: int = 0
    num_envs: int = 32
    threads: int | None = None
    progress: bool = True


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A GRPO run (``textgym train``), optionally preceded by an SFT warm start.

    Seeds are a pure function of ``seed`` and their place in the run
    (:class:`~textgym.algos.grpo.SeedTree`: GRPO step ``s`` plays task seeds
    ``tree.task_seeds(s, prompts_per_step)`` and its ``k``-th sampler call uses
    ``tree.seed("train_sampler", s, turn=k)``), so a resumed run continues exactly as if it had
    never stopped. Held-out evaluation tasks are the same for every ``seed`` (seeds from
    ``EVAL_SEED_OFFSET``), so that runs compare on one test set.

    Attributes:
        env: Registered env id, or several (a tuple; ``--env A --env B``) to train on a mixture:
            each step's prompts are shared among them by ``env_weights``, and the metrics, the
            curve and ``summary.json`` report each env as well as the whole.
        env_weights: Shares of each step's prompts per env of a mixture (``--env-weights
            0.5,0.5``; normalised; ``None``: equal).
        env_kwargs: Keyword arguments of ``gym.make`` (``None``: the preset's, else ``{}``); for
            a mixture, an object keyed by env id gives each env its own.
        backend: ``jax`` or ``torch``.
        model: A Hugging Face model directory, a ``.gguf`` file or a preset (``tiny``, ``smollm2-135m``).
        preset: A named preset of :data:`textgym.algos.recipes.PRESETS` (e.g. ``sudoku-tiny``)
            that fills the fields left unset; ``None``: the preset for this env and model, if any.
        output_dir: Run directory: checkpoints, ``metrics.jsonl``, ``curve.png``, ``summary.json``
            (``None``: ``runs/<env>-<backend>``).
        steps: GRPO steps (``None``: the recipe's, else 100).
        prompts_per_step: Task seeds per step; each is played ``grpo.group_size`` times
            (``None``: the recipe's, else 8).
        num_envs: Vector env width (at most the episodes per step).
        vectorization_mode: ``sync`` or ``async`` sub-envs.
        chat_template: See :class:`SFTConfig`.
        eval_episodes: Held-out episodes (task seeds from ``EVAL_SEED_OFFSET``, whatever
            ``seed`` is) per evaluation.
        eval_every: Evaluate every this many steps (and before the first and after the last).
        eval_temperature: Sampling temperature of evaluation; 0 is greedy.
        save_every: Checkpoint every this many steps (and at the end, and on Ctrl-C).
        log_rollouts_every: Write the rollouts of every this many steps (and of the first) to
            ``rollouts/step_XXXXXX.jsonl`` for ``textgym view``, with each episode's ``step`` and
            ``advantage``; 0 writes none. The default keeps the README run's view under 20 MB.
        stop_after: Stop (with a checkpoint) after this many steps of *this invocation*; the next
            invocation resumes. For time-sliced jobs and for testing resumption.
        resume: Continue from ``output_dir``'s latest checkpoint when there is one.
        sft_steps: Optimiser steps of the SFT warm start before GRPO (0: none; ``None``: recipe).
        sft_env_kwargs: ``gym.make`` keyword arguments of the warm start's demonstrations
            (``None``: the recipe's, else ``env_kwargs``), e.g. easier tasks than GRPO's for a
            curriculum.
        sft_demos: Oracle demonstrations for the warm start (``None``: recipe, else 256).
        sft_lr: Learning rate of the warm start (``None``: recipe, else ``10 * grpo.lr``).
        sft_oracle_kwargs: See ``SFTConfig.oracle_kwargs``.
        seed: Root of the run's seed tree: the tiny init, training tasks, demonstrations and
            sampling (copied into ``grpo.seed``).
        threads: See :class:`SFTConfig`.
        mesh: The JAX learner's device mesh, ``"data=N,fsdp=M"`` (``None``: one device); see
            :func:`textgym.algos.jax.make_mesh`. The torch backend scales with ``torchrun``.
        plot: Write ``curve.png`` (needs matplotlib).
        progress: Show rich progress bars.
        grpo: The GRPO objective and optimiser (see :class:`~textgym.algos.grpo.GRPOConfig`);
            ``None``: the recipe's settings, else ``GRPOConfig()``.
    """

    env: str | tuple[str, ...]
    env_weights: tuple[float, ...] | None = None
    env_kwargs: dict[str, Any] | None = None
    backend: Backend = "torch"
    model: str = "tiny"
    preset: str | None = None
    output_dir: str | None = None
    steps: int | None = None
    prompts_per_step: int | None = None
    num_envs: int = 64
    vectorization_mode: VectorMode = "sync"
    chat_template: Template = "auto"
    eval_episodes: int = 128
    eval_every: int = 10
    eval_temperature: float = 0.0
    save_every: int = 10
    log_rollouts_every: int = 10
    stop_after: int | None = None
    resume: bool = True
    sft_steps: int | None = None
    sft_env_kwargs: dict[str, Any] | None = None
    sft_demos: int | None = None
    sft_lr: float | None = None
    sft_oracle_kwargs: dict[str, Any] | None = None
    seed: int = 0
    threads: int | None = None
    mesh: str | None = None
    plot: bool = True
    progress: bool = True
    grpo: GRPOConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env, str):
            object.__setattr__(self, "env", tuple(self.env))
            if not self.env or len(set(self.env)) != len(self.env):
                raise ValueError(f"expected one or more distinct env ids, got {list(self.env)}")
        if self.env_weights is not None:
            object.__setattr__(self, "env_weights", tuple(float(w) for w in self.env_weights))
            if len(self.env_weights) != len(self.envs) or min(self.env_weights) < 0 or sum(self.env_weights) <= 0:
                raise ValueError(f"expected {len(self.envs)} env weights >= 0 with a positive sum, got {list(self.env_weights)}")
        if self.backend not in ("jax", "torch"):
            raise ValueError(f"backend must be 'jax' or 'torch', got {self.backend!r}")
        for name in ("prompts_per_step", "num_envs", "eval_episodes", "eval_every", "save_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.log_rollouts_every < 0:
            raise ValueError(f"log_rollouts_every must be >= 0, got {self.log_rollouts_every}")
        if self.stop_after is not None and self.stop_after < 1:
            raise ValueError(f"stop_after must be >= 1 or None, got {self.stop_after}")
        if self.mesh is not None:
            from textgym.algos.runtime import parse_mesh

            parse_mesh(self.mesh)
            if self.backend != "jax":
                raise ValueError(f"mesh is for the JAX backend, got backend={self.backend!r} (torch scales with torchrun)")

    @property
    def envs(self) -> tuple[str, ...]:
        """The run's env ids (one, or a mixture's)."""
        return (self.env,) if isinstance(self.env, str) else self.env

    def kwargs_of(self, env: str) -> dict[str, Any]:
        """``gym.make`` keyword arguments of ``env`` (``env_kwargs``, or its entry when keyed by env id)."""
        kwargs = self.env_kwargs or {}
        if len(self.envs) > 1 and kwargs and set(kwargs) <= set(self.envs):
            return dict(kwargs.get(env, {}))
        return dict(kwargs)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def sft_config(self) -> SFTConfig:
        """The warm start's config: same env (a mixture's first), backend, model, template and seed
        (call on a resolved config)."""
        return SFTConfig(
            env=self.envs[0],
            preset=self.preset,
            env_kwargs=self.kwargs_of(self.envs[0]) if self.sft_env_kwargs is None else self.sft_env_kwargs,
            backend=self.backend,
            model=self.model,
            output_dir=f"{self.output_dir}/sft",
            steps=self.sft_steps,
            demos=self.sft_demos,
            oracle_kwargs=self.sft_oracle_kwargs,
            lr=self.sft_lr,
            max_length=self.grpo.max_length if self.grpo else 1024,
            micro_batch_size=self.grpo.micro_batch_size if self.grpo else 16,
            trainable_layers=self.grpo.trainable_layers if self.grpo else None,
            chat_template=self.chat_template,
            seed=self.seed,
            threads=self.threads,
            progress=self.progress,
        )
