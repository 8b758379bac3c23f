"""A language model loaded from a Hugging Face directory: scoring and sampling token ids.

:func:`load_model` is the backend's entry point; the torch backend's ``load_model`` returns an
object with the same methods. The model owns its parameters; a
:class:`~textgym.algos.jax.learner.Learner` updates them in place, so the next ``generate``
samples from the trained weights.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from textgym.algos.config.grpo import check_dtype
from textgym.algos.grpo import bucket_length
from textgym.algos.jax import sampler
from textgym.algos.jax.config import ModelConfig
from textgym.algos.jax.params import abstract_model, export_params, load_params
from textgym.algos.jax.transformer import positions_from_mask, scored_logprobs, scored_positions, token_logprobs
from textgym.algos.rollouts.context_cache import CONTEXT_CACHE_MB, ContextCache

_UNBOUNDED = 1 << 30


def _special_ids(path: str | os.PathLike, config: ModelConfig) -> tuple[int, tuple[int, ...]]:
    """``(pad_id, eos_ids)`` from ``generation_config.json``, else ``config.json``."""
    sources = [config.hf_config]
    gen = os.path.join(path, "generation_config.json")
    if os.path.exists(gen):
        with open(gen, encoding="utf-8") as fh:
            sources.insert(0, json.load(fh))
    eos: tuple[int, ...] = ()
    pad = None
    for src in sources:
        if not eos and src.get("eos_token_id") is not None:
            value = src["eos_token_id"]
            eos = tuple(value) if isinstance(value, list) else (value,)
        if pad is None and src.get("pad_token_id") is not None:
            pad = int(src["pad_token_id"])
    if pad is None:
        pad = eos[0] if eos else 0
    return pad, tuple(int(e) for e in eos)


@partial(jax.jit, static_argnames=("graphdef",))
def _score(graphdef: nnx.GraphDef, params, ids, mask, temperature, at=None):
    """Every token's logprob, or (``at``, see :func:`scored_logprobs`) only the named ones'."""
    model = nnx.merge(graphdef, params)
    if at is None:
        logits, _ = model(ids, positions_from_mask(mask), mask)
        lp = token_logprobs(logits, ids, temperature)
    else:
        hidden, _ = model.hidden(ids, positions_from_mask(mask), mask)
        lp = scored_logprobs(model, hidden, ids, at, temperature)
    # A token right after padding (a row's first after left padding) has no real token before it:
    # its logits come from a padding query that attends to nothing real (an all-masked row is
    # uniform over every slot, later ones too), so it is 0, as at t = 0 and as the torch backend says.
    return lp * mask * jnp.pad(mask[:, :-1], ((0, 0), (1, 0)))


class JaxLanguageModel:
    """A decoder with its parameters, a jitted scorer and a sampler.

    Attributes:
        config: The architecture.
        path: The directory it was loaded from.
        pad_id: Padding token (``pad_token_id``, else the first EOS id, else 0).
        eos_ids: Ids that end a generation by default.
        params: The parameter tree (jax arrays); replaced by a learner after each update.
        sampler_dtype: The dtype ``generate`` computes in (``"float32"`` or ``"bfloat16"``); where it
            differs from the parameters', ``generate`` samples from a cast of :attr:`params`, made
            once per parameter tree (a learner's update replaces the tree, so the cast follows it).
        contexts: The keys and values ``generate`` keeps between calls, so an episode's next turn
            prefills only its new tokens (None when ``context_cache_mb`` is 0): see
            :mod:`textgym.algos.rollouts.context_cache`. Emptied whenever :attr:`params` is replaced.
    """

    def __init__(
        self,
        config: ModelConfig,
        params: dict,
        *,
        path: str | os.PathLike,
        sampler_dtype: Literal["float32", "bfloat16"] = "float32",
        context_cache_mb: float = CONTEXT_CACHE_MB,
    ):
        check_dtype("sampler_dtype", sampler_dtype)
        self.config = config
        self.path = os.fspath(path)
        self.graphdef, _ = abstract_model(config)
        self.contexts = ContextCache(int(context_cache_mb * 2**20)) if context_cache_mb > 0 else None
        self._weights_version = 0
        self.params = params
        self.sampler_dtype = sampler_dtype
        self._sampler: tuple[dict, dict] | None = None  # (the params it was cast from, the cast)
        self.pad_id, self.eos_ids = _special_ids(path, config)

    @property
    def params(self) -> dict:
        return self._params

    @params.setter
    def params(self, params: dict) -> None:
        """A new tree (a learner's update, a restore): the kept keys and values belong to the old one."""
        self._params = params
        self._weights_version += 1

    def sampler_params(self) -> dict:
        """:attr:`params` in :attr:`sampler_dtype` (themselves when they already are)."""
        dtype = jnp.dtype(self.sampler_dtype)
        if jax.tree.leaves(self.params)[0].dtype == dtype:
            return self.params
        if self._sampler is None or self._sampler[0] is not self.params:
            self._sampler = (self.params, jax.tree.map(lambda p: p.astype(dtype), self.params))
        return self._sampler[1]

    def snapshot(self) -> JaxLanguageModel:
        """A copy with weights of its own, for a thread that samples while a learner updates
        (the learner donates its buffers to the next update); the context cache stays shared."""
        twin = copy.copy(self)
        twin._sampler = None  # the dtype-cast copy, re-made from the twin's own weights
        twin.params = jax.tree.map(jnp.copy, self.params)
        return twin

    def logprobs(self, ids: np.ndarray, mask: np.ndarray, *, temperature: float = 1.0, scored: np.ndarray | None = None) -> np.ndarray:
        """``(B, T)`` float32 logprob of each token given the ones before it.

        Args:
            ids: ``(B, T)`` int token ids, left- or right-padded.
            mask: ``(B, T)`` attention mask, 1 on real tokens.
            temperature: Divides the logits (use the sampling temperature).
            scored: ``(B, T)``: the tokens to score (a learner's loss mask), 0 elsewhere; the LM
                head runs only at the positions that predict them (a power-of-two count of them,
                so the scorer compiles once per bucket). None: every token.

        Returns:
            ``lp[b, t] = log p(ids[b, t] | ids[b, :t])``; 0 at ``t = 0``, where ``mask`` is 0 and
            where ``mask[b, t - 1]`` is 0 (nothing real precedes the token), so left and right
            padding give the same numbers.
        """
        ids, mask = np.asarray(ids, np.int32), np.asarray(mask, np.int32)
        if ids.ndim != 2 or ids.shape != mask.shape:
            raise ValueError(f"expected ids and mask of one (B, T) shape, got {ids.shape} and {mask.shape}")
        b, t = ids.shape
        rows, length = bucket_length(b, _UNBOUNDED, min_bucket=1), bucket_length(t, _UNBOUNDED)
        padded_ids = np.full((rows, length), self.pad_id, np.int32)
        padded_mask = np.zeros((rows, length), np.int32)
        padded_ids[:b, :t], padded_mask[:b, :t] = ids, mask
        at = None
        if scored is not None:
            wanted = np.zeros((rows, length), bool)
            wanted[:b, :t] = np.asarray(scored) > 0
            at = scored_positions(wanted, bucket_length(int(wanted[:, 1:].sum()), _UNBOUNDED, min_bucket=1))
        out = _score(self.graphdef, self.params, padded_ids, padded_mask, np.float32(temperature), at)
        return np.array(jax.device_get(out))[:b, :t]

    def generate(
        self,
        prompts: Sequence[np.ndarray],
        max_new_tokens: int,
        temperature: float = 1.0,
        seed: int = 0,
        *,
        top_p: float = 1.0,
        stop_ids: Sequence[int | Sequence[int]] = (),
        eos_ids: Sequence[int] | None = None,
        keys: Sequence[tuple[int, int]] | None = None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Sample a continuation of each prompt.

        Args:
            prompts: 1-D int token arrays (any lengths).
            max_new_tokens: Most tokens generated per prompt.
            temperature: Softmax temperature; 0 is greedy.
            seed: The run's seed in every uniform drawn (see ``keys``); the same seed and inputs
                give the same outputs.
            top_p: Nucleus sampling threshold.
            stop_ids: Token sequences (a stop string, tokenized) or single token ids that end a
                generation when the output ends with one.
            eos_ids: Ids that end a generation; None uses the checkpoint's.
            keys: Per prompt, ``(episode key, turn)``: token ``t`` is picked by the uniform
                :func:`textgym.draws.token_uniforms` gives ``(seed, key, turn, t)``, the same in
                either backend and whatever else is in the batch. None: ``(b, 0)`` for prompt ``b``.

        Returns:
            ``(ids, logprobs)``: per prompt, the generated int32 ids (stop tokens included) and
            their float32 logprobs under ``log_softmax(logits / temperature)``. A prompt that
            continues a context an earlier call sampled (the same episode's previous turn)
            prefills only its new tokens (see :attr:`contexts`); the result is the same, to
            float rounding.
        """
        if self.contexts is not None:
            self.contexts.sync(self._weights_version)
        return sampler.generate(
            self.graphdef,
            self.sampler_params(),
            [np.asarray(p, np.int32) for p in prompts],
            int(max_new_tokens),
            float(temperature),
            int(seed),
            top_p=float(top_p),
            stop_ids=stop_ids,
            eos_ids=self.eos_ids if eos_ids is None else tuple(eos_ids),
            pad_id=self.pad_id,
            contexts=self.contexts,
            keys=keys,
        )

    def release(self, contexts: Sequence[np.ndarray]) -> None:
        """Free the kept keys and values of episodes that ended with these token contexts."""
        if self.contexts is not None:
            for context in contexts:
                self.contexts.release(context)

    def export(self, out_dir: str | os.PathLike) -> None:
        """Write the current weights as a Hugging Face directory (float32)."""
        export_params(self.params, self.config, out_dir, source_dir=self.path)


def load_model(
    path: str | os.PathLike,
    *,
    dtype: Literal["float32", "bfloat16"] = "float32",
    sampler_dtype: Literal["float32", "bfloat16"] = "float32",
    context_cache_mb: float = CONTEXT_CACHE_MB,
) -> JaxLanguageModel:
    """Load a Llama, Qwen2 or Qwen3 checkpoint directory (``config.json`` + ``*.safetensors``).

    Args:
        path: A local Hugging Face model directory.
        dtype: Parameter dtype for inference; training keeps float32 master weights regardless.
        sampler_dtype: What ``generate`` computes in (see :attr:`JaxLanguageModel.sampler_dtype`).
        context_cache_mb: The most MiB of keys and values kept between ``generate`` calls (0: none,
            every prompt is prefilled whole; see :attr:`JaxLanguageModel.contexts`).

    Raises:
        ValueError: An unsupported architecture, or checkpoint keys that do not fit it.
    """
    check_dtype("dtype", dtype)
    config = ModelConfig.from_dir(path)
    jdtype = jnp.dtype(dtype)
    params = jax.tree.map(lambda a: jnp.asarray(a, jdtype), load_params(path, config))
    return JaxLanguageModel(config, params, path=path, sampler_dtype=sampler_dtype, context_cache_mb=context_cache_mb)
