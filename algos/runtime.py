"""What a training or SFT run needs around the learner: the backend, token envs, evaluation.

Everything here is backend-agnostic: the backend module is imported by name (``jax`` or
``torch``) only when a run asks for it, and both expose ``load_policy`` and ``Learner``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np

from textgym.algos import models, tiny
from textgym.algos.grpo.seeds import Phase, SeedTree
from textgym.error import require
from textgym.policies.model import ModelPolicy


def load_backend(name: str, threads: int | None = None) -> ModuleType:
    """``textgym.algos.jax`` or ``textgym.algos.torch`` (imported now, not before).

    Args:
        name: ``jax`` or ``torch``.
        threads: Intra-op CPU threads (None: the framework's default). One thread is the fastest
            for tiny models, whose matrices are too small to split, and on shared machines,
            where threads that spin-wait on each other are slower than one. Torch sets its
            thread count; XLA has no such setting and sizes its pools once, from the CPUs the
            process may use, when JAX is first imported: 1 turns off its multi-threaded Eigen,
            N > 1 restricts the process to N CPUs (rotated by process id, so that runs side by
            side do not share them). A JAX already imported keeps its threads (a warning says so).
    """
    if name not in ("jax", "torch"):
        raise ValueError(f"backend must be 'jax' or 'torch', got {name!r}")
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads is not None and name == "jax":
        _limit_xla_threads(int(threads))
    module = importlib.import_module(f"textgym.algos.{name}")
    if threads is not None and name == "torch":
        import torch

        torch.set_num_threads(int(threads))
    return module


def _limit_xla_threads(threads: int) -> None:
    if "jax" in sys.modules:
        import warnings

        warnings.warn(f"JAX is already imported: threads={threads} cannot change its thread pools", stacklevel=3)
        return
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()
        return
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if threads < len(cpus):
        start = os.getpid() % len(cpus)
        os.sched_setaffinity(0, {cpus[(start + i) % len(cpus)] for i in range(threads)})


def parse_mesh(spec: str) -> dict[str, int]:
    """``"data=N,fsdp=M"`` (either axis may be left out: 1 for data, the rest of the devices for fsdp).

    Example:
        >>> parse_mesh("data=2,fsdp=4")
        {'data': 2, 'fsdp': 4}

    Raises:
        ValueError: Another axis, a repeated one, or a size that is not a positive integer.
    """
    axes: dict[str, int] = {}
    for part in spec.split(","):
        name, _, size = part.strip().partition("=")
        if name not in ("data", "fsdp") or name in axes or not size.isdigit() or int(size) < 1:
            raise ValueError(f"expected a mesh like 'data=2,fsdp=4', got {spec!r}")
        axes[name] = int(size)
    return axes


def make_learner(backend: ModuleType, policy: Any, config: Any, mesh: str | None = None) -> Any:
    """``backend.Learner(policy, config)``, on a JAX device mesh when ``mesh`` is given."""
    if mesh is None:
        return backend.Learner(policy, config)
    if not hasattr(backend, "make_mesh"):
        raise ValueError("--mesh is for the JAX backend; torch runs data-parallel ranks with torchrun")
    return backend.Learner(policy, config, mesh=backend.make_mesh(**parse_mesh(mesh)))


class TreeSampler(ModelPolicy):
    """A :class:`~textgym.policies.model.ModelPolicy` whose ``k``-th call of a step samples with
    ``tree.seed(phase, step, turn=k, row=row)``: calls are counted across waves, and ``row`` tells a
    mixture's envs apart, so no two calls of a run share a seed."""

    def __init__(self, model: Any, tree: SeedTree, phase: Phase, step: int, *, row: int = 0, **kwargs: Any):
        super().__init__(model, **kwargs)
        self.tree, self.phase, self.step, self.row = tree, phase, step, row

    def call_seed(self, call: int) -> int:
        return self.tree.seed(self.phase, self.step, turn=call, row=self.row)


def chat_template(kind: str, model: str) -> str | None:
    """The template override for :class:`~textgym.wrappers.TokenObservation` (None: the model's own)."""
    if kind not in ("auto", "model", "compact"):
        raise ValueError(f"chat_template must be 'auto', 'model' or 'compact', got {kind!r}")
    if kind == "compact" or (kind == "auto" and str(model) == tiny.NAME):
        return tiny.compact_chat_template()
    return None


def load_tokenizer(path: str | Path) -> Any:
    """The checkpoint's tokenizer (transformers without torch: the ``tokens`` extra); a clear
    error names what is missing in a weights-only directory."""
    return models.load_tokenizer(path)


def quiet_transformers() -> None:
    """Turn off transformers' "Loading weights" / "Writing model shards" bars: a run shows its own
    progress bar (or none, with ``--no-progress``), which a bar per checkpoint would interleave."""
    transformers = require("transformers", "tokens")
    transformers.utils.logging.disable_progress_bar()


def token_venv(
    env: str,
    env_kwargs: Mapping[str, Any],
    tokenizer: Any,
    template: str | None,
    num_envs: int,
    vectorization_mode: str = "sync",
) -> gym.vector.VectorEnv:
    """A vector env of ``env`` whose sub-envs observe and act in token ids."""
    from textgym.wrappers import TokenObservation

    wrap = partial(TokenObservation, tokenizer=tokenizer, chat_template=template)
    return gym.make_vec(env, num_envs=num_envs, vectorization_mode=vectorization_mode, wrappers=[wrap], **dict(env_kwargs))


def evaluate(
    policy: Any,
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

    actor = TreeSampler(policy, SeedTree(seed), "eval_sampler", step, row=row, max_new_tokens=max_new_tokens,
                        temperature=temperature, top_p=top_p)
    rollouts = collect(venv, actor, seeds=list(seeds), group_size=1)
    return {
        "eval/success": float(np.mean([r.success for r in rollouts])),
        "eval/reward": float(np.mean([r.reward for r in rollouts])),
        "eval/turns": float(np.mean([r.turns for r in rollouts])),
    }


def policy_prefix(rollout: Any) -> Any:
    """The rollout cut after its last trained token: later env tokens change no logprob the
    loss uses (attention is causal), so packing them would only cost compute."""
    trained = np.flatnonzero(rollout.loss_mask)
    if trained.size == 0:
        return rollout
    end = int(trained[-1]) + 1
    return dataclasses.replace(
        rollout,
        token_ids=rollout.token_ids[:end],
        loss_mask=rollout.loss_mask[:end],
        logprobs=None if rollout.logprobs is None else rollout.logprobs[:end],
    )
