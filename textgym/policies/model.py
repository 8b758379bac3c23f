"""Adapt a local model's batched ``generate`` to the policy protocol, for token envs.

:meth:`ModelPolicy.load` takes what ``--model`` takes (a HF directory, a ``.gguf`` file, a preset)
and loads it on either backend; the env that feeds it is a
:class:`~textgym.wrappers.TokenObservation` with its tokenizer, which shows the env's tools to
the model whatever its chat template does with them (:mod:`textgym.tool_prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from textgym.policies.base import PolicyOutput


class Generator(Protocol):
    """What the JAX and torch backends' samplers provide."""

    def generate(
        self, prompts: list[np.ndarray], max_new_tokens: int, temperature: float, seed: int
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Sample a continuation of each prompt; return the new ids and their logprobs."""
        ...


class ModelPolicy:
    """Sample actions with a local model from token observations (``TokenObservation`` envs).

    Token-in/token-out: the prompt is the observation's ``int32`` ids as they are, and the
    action is the sampled ids, kept verbatim so the trajectory holds exactly what was sampled.
    Each call uses a fresh seed (:meth:`call_seed`: ``seed``, ``seed + 1``, ...) so repeated turns
    differ while a run stays reproducible; a trainer overrides it to draw from its seed tree.

    Args:
        model: Any object with ``generate(prompts, max_new_tokens, temperature, seed)`` returning
            ``(ids, logprobs)``, two lists of 1-D arrays, one pair per prompt.
        max_new_tokens: Most tokens sampled per turn.
        temperature: Sampling temperature (0 is greedy where the backend supports it).
        seed: Seed of the first call.
        top_p: Nucleus sampling threshold, passed to ``generate`` when below 1.
    """

    tokenizer: Any = None
    """The model's tokenizer when made by :meth:`load` (for the ``TokenObservation`` env)."""

    def __init__(self, model: Generator, max_new_tokens: int = 256, temperature: float = 1.0, seed: int = 0, top_p: float = 1.0):
        if not callable(getattr(model, "generate", None)):
            raise TypeError(f"expected a model with a generate(prompts, ...) method, got {type(model).__name__}")
        if int(max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.model = model
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.seed = int(seed)
        self.top_p = float(top_p)
        self.calls = 0

    def call_seed(self, call: int) -> int:
        """The sampling seed of the ``call``-th ``act`` (0-based)."""
        return self.seed + call

    @classmethod
    def load(
        cls,
        model: str,
        *,
        backend: str = "torch",
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        seed: int = 0,
        threads: int | None = None,
        progress: bool = True,
    ) -> ModelPolicy:
        """A policy sampling from ``model`` with the ``jax`` or ``torch`` backend's sampler.

        Args:
            model: A HF directory, a ``.gguf`` file (converted once, cached) or a preset
                (``tiny``, ``smollm2-135m``): see :func:`textgym.algos.models.resolve`.
            backend: ``jax`` or ``torch``.
            max_new_tokens, temperature, seed: As for the constructor.
            threads: The backend's intra-op CPU threads (see :func:`textgym.algos.backends.load_backend`).
            progress: Show a GGUF conversion's progress.

        Raises:
            FileNotFoundError: ``model`` names nothing loadable, or its directory has no tokenizer.
        """
        from textgym.algos import models
        from textgym.algos.backends import load_backend

        models.quiet_transformers()
        path = models.resolve(model, seed=seed, progress=progress)
        tokenizer = models.load_tokenizer(path)  # before the backend: a missing tokenizer fails fast
        policy = cls(load_backend(backend, threads).load_policy(path), max_new_tokens, temperature, seed)
        policy.tokenizer = tokenizer
        return policy

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        prompts = []
        for obs in observations:
            if not (isinstance(obs, np.ndarray) and obs.ndim == 1 and np.issubdtype(obs.dtype, np.integer)):
                raise TypeError(
                    f"ModelPolicy needs token observations (1-D int arrays), got {type(obs).__name__}; "
                    "wrap the env in textgym.wrappers.TokenObservation"
                )
            prompts.append(obs.astype(np.int32, copy=False))
        # top_p only when set, so that models whose generate has no top_p keep working.
        nucleus = {"top_p": self.top_p} if self.top_p < 1 else {}
        ids, logprobs = self.model.generate(
            prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=self.call_seed(self.calls), **nucleus
        )
        self.calls += 1
        if len(ids) != len(prompts) or len(logprobs) != len(prompts):
            raise ValueError(f"generate returned {len(ids)} ids and {len(logprobs)} logprobs for {len(prompts)} prompts")
        actions = [np.asarray(x, dtype=np.int32) for x in ids]
        lps = [np.asarray(x, dtype=np.float32) for x in logprobs]
        for a, lp in zip(actions, lps):
            if a.shape != lp.shape:
                raise ValueError(f"generate returned {a.shape[0]} ids but {lp.shape[0]} logprobs for one prompt")
        return PolicyOutput(actions, lps)
