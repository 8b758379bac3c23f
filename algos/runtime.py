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

from textgym.algos import tiny
from textgym.error import require


def load_backend(name: str, threads: int | None = None) -> ModuleType:
    """``textgym.algos.jax`` or ``textgym.algos.torch`` (imported now, not before).

    Args:
        name: ``jax`` or ``torch``.
        threads: Intra-op CPU threads (None: the framework's default). One thread is the fastest
            for tiny models, whose matrices are too small to split, and on shared machines,
            where threads that spin-wait on each other are slower than one. JAX reads it only
            when it is imported here first.
    """
    if name not in ("jax", "torch"):
        raise ValueError(f"backend must be 'jax' or 'torch', got {name!r}")
    if threads is not None and name == "jax" and "jax" not in sys.modules and threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()
    module = importlib.import_module(f"textgym.algos.{name}")
    if threads is not None and name == "torch":
        import torch

        torch.set_num_threads(int(threads))
    return module


def chat_template(kind: str, model: str) -> str | None:
    """The template override for :class:`~textgym.wrappers.TokenObservation` (None: the model's own)."""
    if kind not in ("auto", "model", "compact"):
        raise ValueError(f"chat_template must be 'auto', 'model' or 'compact', got {kind!r}")
    if kind == "compact" or (kind == "auto" and str(model) == tiny.NAME):
        return tiny.compact_chat_template()
    return None


def load_tokenizer(path: str | Path) -> Any:
    """The checkpoint's tokenizer (transformers without torch: the ``tokens`` extra)."""
    transformers = require("transformers", "tokens")
    return transformers.AutoTokenizer.from_pretrained(str(path))


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
    import textgym  # noqa: F401  (registers the ids)
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
) -> dict[str, float]:
    """Play one episode per seed with the model; return ``eval/success``, ``eval/reward``, ``eval/turns``."""
    from textgym.policies.model import ModelPolicy
    from textgym.rollout import collect

    actor = ModelPolicy(policy, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
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
