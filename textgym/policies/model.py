"""Adapt a local model's batched ``generate`` to the policy protocol, for token envs.

:func:`textgym.algos.backends.load_model_policy` makes one from what ``--model`` takes (a HF
directory, a ``.gguf`` file, a preset) on either backend; the env that feeds it is a
:class:`~textgym.wrappers.TokenObservation` with its tokenizer, which shows the env's tools to
the model whatever its chat template does with them (:mod:`textgym.tool_prompt`).
"""

from __future__ import annotations

import importlib
import warnings
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

    Both backends keep an episode's keys and values from one turn to the next, so a turn prefills
    only its new tokens. This policy tells the model when an episode is over (its slot went idle,
    or its next prompt does not continue it) so that its cache is freed at once, and it samples
    only the slots that ``collect`` says are live (:meth:`set_live_slots`).

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
        self._live: np.ndarray | None = None  # slots to sample (None: all)
        self._contexts: dict[int, np.ndarray] = {}  # slot -> its episode's context after the last call

    def set_live_slots(self, live: Sequence[bool] | None) -> None:
        """The slots whose episodes are being recorded; ``collect`` says so before every ``act``.

        The others get an empty action (their results are dropped, and an env takes an empty turn
        as a bad move) and the kept keys and values of their ended episodes are freed. None ends
        the collection: every episode's cache is freed and every slot is sampled again.
        """
        self._live = None if live is None else np.asarray(live, dtype=bool)
        self._release([slot for slot in self._contexts if self._live is None or not self._live[slot]])

    def _release(self, slots: Sequence[int]) -> None:
        """Free the model's cache of the episodes that ended in ``slots``."""
        ended = [self._contexts.pop(slot) for slot in slots]
        release = getattr(self.model, "release", None)
        if ended and callable(release):
            release(ended)

    def call_seed(self, call: int) -> int:
        """The sampling seed of the ``call``-th ``act`` (0-based)."""
        return self.seed + call

    @classmethod
    def load(cls, model: str, **kwargs: Any) -> ModelPolicy:
        """Deprecated: :func:`textgym.algos.backends.load_model_policy` (same arguments).

        Loading a model is the trainers' job: the core imports that module by name, as the
        command line does, so that no module of the core depends on ``textgym.algos``.
        """
        warnings.warn("ModelPolicy.load is renamed textgym.algos.backends.load_model_policy", DeprecationWarning, stacklevel=2)
        return importlib.import_module("textgym.algos.backends").load_model_policy(model, **kwargs)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        prompts = []
        for obs in observations:
            if not (isinstance(obs, np.ndarray) and obs.ndim == 1 and np.issubdtype(obs.dtype, np.integer)):
                raise TypeError(
                    f"ModelPolicy needs token observations (1-D int arrays), got {type(obs).__name__}; "
                    "wrap the env in textgym.wrappers.TokenObservation"
                )
            prompts.append(obs.astype(np.int32, copy=False))
        live = range(len(prompts)) if self._live is None else np.flatnonzero(self._live[: len(prompts)]).tolist()
        self._release([slot for slot in live if slot in self._contexts and not _continues(prompts[slot], self._contexts[slot])])
        # top_p only when set, so that models whose generate has no top_p keep working.
        nucleus = {"top_p": self.top_p} if self.top_p < 1 else {}
        ids, logprobs = self.model.generate(
            [prompts[i] for i in live],
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            seed=self.call_seed(self.calls),
            **nucleus,
        )
        self.calls += 1
        if len(ids) != len(live) or len(logprobs) != len(live):
            raise ValueError(f"generate returned {len(ids)} ids and {len(logprobs)} logprobs for {len(live)} prompts")
        actions = [np.zeros(0, np.int32) for _ in prompts]
        lps = [np.zeros(0, np.float32) for _ in prompts]
        for slot, a, lp in zip(live, ids, logprobs):
            actions[slot], lps[slot] = np.asarray(a, dtype=np.int32), np.asarray(lp, dtype=np.float32)
            if actions[slot].shape != lps[slot].shape:
                raise ValueError(f"generate returned {actions[slot].shape[0]} ids but {lps[slot].shape[0]} logprobs for one prompt")
            self._contexts[slot] = np.concatenate([prompts[slot], actions[slot]])
        return PolicyOutput(actions, lps)


def _continues(prompt: np.ndarray, context: np.ndarray) -> bool:
    """Whether ``prompt`` is ``context`` followed by more tokens (the same episode's next turn)."""
    return len(prompt) > len(context) and np.array_equal(prompt[: len(context)], context)
