"""A causal LM from any local Hugging Face checkpoint: batched logprobs and a KV-cache sampler.

The torch twin of :mod:`textgym.algos.jax`: the same names, the same array conventions (numpy
in, numpy out), so the training loop never knows which backend it drives. The model is
transformers' ``AutoModelForCausalLM`` in float32 (the dtype in which both backends agree to
1e-4). Sampling draws counter-based uniforms keyed per row (:mod:`textgym.draws`), so the seed and
inputs alone fix the output, in either backend, and no global RNG is touched.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from textgym.algos.config.grpo import ComputeDType, check_dtype
from textgym.algos.grpo.prompts import PromptSplit
from textgym.algos.models import has_tokenizer
from textgym.algos.rollouts.context_cache import CONTEXT_CACHE_MB, ContextCache
from textgym.algos.torch import packed
from textgym.algos.torch.sampler import generate, last_position, token_logprobs


def sequence_logprobs(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0, scored: torch.Tensor | None = None
) -> torch.Tensor:
    """Logprob of every token given the ones before it, aligned with ``ids`` (differentiable).

    ``out[:, t] = log p(ids[:, t] | ids[:, :t])``; position 0, padding (``mask == 0``) and a token
    right after padding (nothing real precedes it) are 0. Position ids count real tokens only, so
    left and right padding give the same numbers. With ``scored`` (``(B, T)`` bool), only those
    tokens are scored and the rest are 0: see :func:`next_token_logprobs`.
    """
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)

    def logits(keep: int | torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, attention_mask=mask.long(), position_ids=positions, use_cache=False, logits_to_keep=keep).logits

    lp = F.pad(next_token_logprobs(logits, ids, scored, temperature), (1, 0))  # (B, T): nothing predicts the first token
    return lp * (mask * F.pad(mask[:, :-1], (1, 0))).to(lp.dtype)


def attention_pair_cost(model: torch.nn.Module) -> float:
    """A query-key pair's attention FLOPs over a token's FLOPs in the model's linears (see
    :func:`textgym.algos.grpo.prompts.split_pays`): ``2 * attention width * layers / weights``,
    the weights without the token embedding and the LM head (which runs at trained tokens only)."""
    config: Any = model.config
    width = config.num_attention_heads * (getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    embedding: Any = model.get_input_embeddings().weight
    head: Any = model.get_output_embeddings()
    outside = embedding.numel() + (0 if head is None or head.weight is embedding else head.weight.numel())
    return 2 * width * config.num_hidden_layers / max(sum(p.numel() for p in model.parameters()) - outside, 1)


def row_logprobs(model: torch.nn.Module, ids: torch.Tensor, temperature: float, scored: torch.Tensor) -> torch.Tensor:
    """:func:`sequence_logprobs` of right-padded rows, with no attention mask (differentiable).

    Under causal attention no real token sees the padding after it, so the rows need no mask: the
    attention kernel then runs causal (half the query-key pairs of a masked one) and builds no
    ``(B, T, T)`` mask. Positions are left to the model (``0 .. T - 1``, a real token's own): given
    with padding's constant ones, transformers would read the rows as packed sequences and mask
    them. Tokens left out of ``scored`` and the padding's are 0.
    """

    def logits(keep: int | torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits

    return F.pad(next_token_logprobs(logits, ids, scored, temperature), (1, 0))


def next_token_logprobs(
    logits: Callable[[int | torch.Tensor], torch.Tensor], ids: torch.Tensor, scored: torch.Tensor | None, temperature: float = 1.0
) -> torch.Tensor:
    """``(B, T - 1)`` float32: ``log p(ids[:, t] | ids[:, :t])`` for ``t >= 1``, from the logits at ``t - 1``.

    The LM head and the log-softmax run only where a logprob is wanted: on multi-turn episodes most
    tokens are the environment's, which no loss reads, and a head over a large vocabulary is a large
    share of a small model's work (SmolLM2's 49k-token head).

    Args:
        logits: The model's forward for a transformers ``logits_to_keep``: ``0`` gives ``(B, T, V)``
            logits, a ``(B, T)`` bool mask the ``(K, V)`` logits of its positions, in row-major order.
        ids: ``(B, T)`` token ids.
        scored: ``(B, T)`` bool, the tokens to score (0 elsewhere); None: every one.
        temperature: Divides the logits.
    """
    if scored is None:
        return token_logprobs(logits(0)[:, :-1], ids[:, 1:], temperature)
    wanted = scored[:, 1:]  # (B, T - 1)
    keep = torch.cat([wanted, torch.zeros_like(scored[:, :1])], dim=1)  # the logits at t - 1 score token t (also when T is 1)
    picked = token_logprobs(logits(keep), ids[:, 1:][wanted], temperature)  # (K,)
    return torch.zeros(wanted.shape, dtype=picked.dtype, device=picked.device).masked_scatter(wanted, picked)


def continuation_logprobs(
    model: torch.nn.Module, split: PromptSplit, temperature: float = 1.0, scored: np.ndarray | None = None
) -> torch.Tensor:
    """Logprob of every token of ``split.rest`` (differentiable), each distinct prompt run once.

    The prompts fill a KV cache whose rows are copied to the rows that continue them (gradients
    flow back through the copy), so a group's shared prompt costs one row, not ``group_size``.

    Args:
        model: The causal LM (or its DDP wrapper).
        split: The batch cut at its prompts.
        temperature: Divides the logits.
        scored: ``(B, C)``: score only these tokens of ``split.rest`` (a learner passes its loss
            mask), so the LM head runs at their positions alone (:func:`next_token_logprobs`);
            None: every token. Column 0 is always scored, by its prompt's last logits.

    Returns:
        ``(B, C)`` float32, aligned with ``split.rest.input_ids``; padding holds anything, tokens
        left out of ``scored`` 0.
    """
    device = next(model.parameters()).device

    def tensor(a) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.long, device=device)

    prompt_mask, source, rest = tensor(split.prompt_mask), tensor(split.source), split.rest
    cache = DynamicCache(config=getattr(model, "module", model).config)  # DDP keeps the model as .module
    last = model(
        input_ids=tensor(split.prompt_ids),
        attention_mask=prompt_mask,
        position_ids=(prompt_mask.cumsum(-1) - 1).clamp(min=0),
        cache=cache,
        use_cache=True,
        logits_to_keep=last_position(prompt_mask.shape[1], device),
    ).logits  # (U, 1, V)
    cache.reorder_cache(source)
    mask = torch.cat([prompt_mask[source], tensor(rest.attention_mask)], dim=1)
    ids = tensor(rest.input_ids)

    def logits(keep: int | torch.Tensor) -> torch.Tensor:
        return model(
            input_ids=ids, attention_mask=mask, position_ids=tensor(rest.positions), cache=cache, use_cache=True, logits_to_keep=keep
        ).logits

    wanted = None if scored is None else torch.as_tensor(np.asarray(scored) > 0, device=device)
    first = token_logprobs(last[source, 0], ids[:, 0], temperature)  # (B,)
    return torch.cat([first[:, None], next_token_logprobs(logits, ids, wanted, temperature)], dim=1)


class TorchLanguageModel:
    """A causal LM with numpy-facing ``logprobs`` and ``generate`` (see :func:`load_model`).

    Attributes:
        model: The ``torch.nn.Module`` (trained in place by :class:`~textgym.algos.torch.Learner`).
        tokenizer: The checkpoint's tokenizer (None for a weights-only directory).
        eos_ids: Ids that end a generated turn (``generation_config.json``, else ``config.json``).
        pad_id: Id written after a finished sequence inside the batch.
        path: Where the checkpoint was loaded from.
        sampler_dtype: The dtype ``generate`` computes in (``"float32"`` or ``"bfloat16"``). Where it
            differs from the model's, ``generate`` runs a copy of the model in that dtype, re-cast
            from :attr:`model` whenever a parameter changed (a learner step, a restore), so the
            weights the learner trains keep their own dtype.
        contexts: The keys and values ``generate`` keeps between calls, so an episode's next turn
            prefills only its new tokens (None when ``context_cache_mb`` is 0): see
            :mod:`textgym.algos.rollouts.context_cache`. Emptied whenever the weights change.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        path: str | os.PathLike | None = None,
        *,
        sampler_dtype: ComputeDType = "float32",
        context_cache_mb: float = CONTEXT_CACHE_MB,
    ):
        check_dtype("sampler_dtype", sampler_dtype)
        if sampler_dtype == "bfloat16" and next(model.parameters()).device.type == "cpu" and not packed.native_bf16():
            warnings.warn(
                "sampler_dtype='bfloat16' on a CPU without native bfloat16 products (no AVX512-BF16 or AMX): "
                "sampling runs slower than in float32 here (SmolLM2-135M: 114 ms a decode step against 73)",
                stacklevel=2,
            )
        self.contexts = ContextCache(int(context_cache_mb * 2**20)) if context_cache_mb > 0 else None
        self._packed = packed.PackedWeights()  # the sampler's packed linears, kept while the weights stay
        self.model = model
        self.tokenizer = tokenizer
        self.path = None if path is None else Path(path)
        self.sampler_dtype = sampler_dtype
        self._sampler: tuple[tuple, torch.nn.Module] | None = None  # (weights' versions, the cast copy)
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        if eos is None:
            eos = model.config.eos_token_id
        if eos is None and tokenizer is not None:
            eos = tokenizer.eos_token_id
        self.eos_ids = sorted({int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])})
        pad = model.config.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def sampler_model(self) -> torch.nn.Module:
        """The module ``generate`` runs: :attr:`model`, or its copy in :attr:`sampler_dtype`.

        The copy is refreshed when any parameter's storage or in-place version counter moved since
        it was cast (an optimiser step bumps the counter), so it always holds the current weights.
        """
        dtype = getattr(torch, self.sampler_dtype)
        params = list(self.model.parameters())
        if params[0].dtype == dtype:
            return self.model
        stamp = tuple((p.data_ptr(), p._version) for p in params)
        if self._sampler is None:
            model = copy.deepcopy(self.model)
            for p in model.parameters():  # parameters only: RoPE's float32 buffers stay float32
                p.data = p.data.to(dtype)
            self._sampler = (stamp, model.eval().requires_grad_(False))
        elif self._sampler[0] != stamp:
            with torch.no_grad():
                for target, source in zip(self._sampler[1].parameters(), params, strict=True):
                    target.copy_(source)
            self._sampler = (stamp, self._sampler[1])
        return self._sampler[1]

    def snapshot(self) -> TorchLanguageModel:
        """A copy with weights of its own, for a thread that samples while a learner updates
        (the learner updates the module in place); the context cache stays shared."""
        twin = copy.copy(self)
        twin._sampler = None  # the dtype-cast copy, re-made from the twin's own weights
        twin.model = copy.deepcopy(self.model).eval()
        return twin

    @torch.no_grad()
    def logprobs(self, ids: np.ndarray, mask: np.ndarray, *, temperature: float = 1.0, scored: np.ndarray | None = None) -> np.ndarray:
        """Per-token logprobs of a batch, aligned with ``ids`` (0 at position 0, on padding and
        right after it: see :func:`sequence_logprobs`).

        Args:
            ids: ``(B, T)`` int token ids.
            mask: ``(B, T)`` 1 on real tokens, 0 on padding.
            temperature: Divides the logits, so the result matches what a sampler at that
                temperature drew from.
            scored: ``(B, T)``: the tokens to score (a learner's loss mask), 0 elsewhere; the LM
                head runs only at the positions that predict them. None: every token.

        Returns:
            ``(B, T)`` float32 array.
        """
        was_training = self.model.training
        self.model.eval()
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.long, device=self.device)
        mask_t = torch.as_tensor(np.asarray(mask), dtype=torch.long, device=self.device)
        wanted = None if scored is None else torch.as_tensor(np.asarray(scored) > 0, device=self.device)
        out = sequence_logprobs(self.model, ids_t, mask_t, temperature, wanted)
        self.model.train(was_training)
        return out.cpu().numpy().astype(np.float32)

    @torch.no_grad()
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
        """Sample a continuation for each prompt with a KV cache, in one batch.

        Prompts are left-padded into one prefill; then one token per step for every unfinished
        row, until each has produced an end-of-turn token, ended with a stop sequence, or reached
        ``max_new_tokens``. A prompt that continues a context an earlier call sampled (the same
        episode's previous turn) prefills only its new tokens (see :attr:`contexts`); the result
        is the same, to float rounding.

        Args:
            prompts: 1-D int arrays of token ids (lengths may differ).
            max_new_tokens: Most tokens generated per prompt.
            temperature: Sampling temperature; 0 means greedy.
            seed: The run's seed in every uniform drawn (see ``keys``); the same seed and inputs
                give the same outputs.
            top_p: Nucleus sampling threshold (1.0 samples from the full distribution).
            stop_ids: Token sequences (or single ids) that also end a row when the generated ids
                end with one.
            eos_ids: End-of-turn ids; ``None`` means :attr:`eos_ids`.
            keys: Per prompt, ``(episode key, turn)``: token ``t`` is picked by the uniform
                :func:`textgym.draws.token_uniforms` gives ``(seed, key, turn, t)``, the same in
                either backend and whatever else is in the batch. None: ``(b, 0)`` for prompt ``b``.

        Returns:
            ``(ids, logprobs)``: per prompt, the generated ``int32`` ids (the EOS or stop tokens
            included, so a trajectory stays verbatim) and the ``float32`` logprob of each under
            ``log_softmax(logits / temperature)``, before top-p (the greedy case reports
            temperature-1 logprobs).
        """
        was_training = self.model.training
        self.model.eval()
        try:
            model = self.sampler_model()
            weights = tuple((p.data_ptr(), p._version) for p in model.parameters())
            if self.contexts is not None:
                self.contexts.sync(weights)
            return generate(
                model,
                prompts,
                int(max_new_tokens),
                float(temperature),
                int(seed),
                top_p=float(top_p),
                stop_ids=stop_ids,
                eos_ids=self.eos_ids if eos_ids is None else eos_ids,
                pad_id=self.pad_id,
                contexts=self.contexts,
                keys=keys,
                packed=self._packed.get(model, len(prompts), weights),
            )
        finally:
            self.model.train(was_training)

    def release(self, contexts: Sequence[np.ndarray]) -> None:
        """Free the kept keys and values of episodes that ended with these token contexts."""
        if self.contexts is not None:
            for context in contexts:
                self.contexts.release(context)

    def export(self, out_dir: str | os.PathLike) -> None:
        """Write the current weights and tokenizer as a Hugging Face directory."""
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(out_dir))
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(out_dir))


def load_model(
    path: str | os.PathLike,
    *,
    dtype: str = "float32",
    device: str | torch.device = "cpu",
    sampler_dtype: ComputeDType = "float32",
    context_cache_mb: float = CONTEXT_CACHE_MB,
) -> TorchLanguageModel:
    """Load a local Hugging Face causal-LM directory (config.json, safetensors, tokenizer if any).

    Args:
        path: The checkpoint directory (``AutoModelForCausalLM`` and ``AutoTokenizer`` read it).
        dtype: Parameter dtype, ``"float32"`` (training) or ``"bfloat16"``.
        device: Where the model lives.
        sampler_dtype: What ``generate`` computes in (see :attr:`TorchLanguageModel.sampler_dtype`).
        context_cache_mb: The most MiB of keys and values kept between ``generate`` calls (0: none,
            every prompt is prefilled whole; see :attr:`TorchLanguageModel.contexts`).

    Raises:
        FileNotFoundError: ``path`` is not a directory with a ``config.json``.
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"expected a Hugging Face model directory with config.json, got {str(path)!r}")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
    model.to(device)
    model.train()
    # A weights-only directory has no tokenizer; only text needs one (models.load_tokenizer says so).
    tokenizer = AutoTokenizer.from_pretrained(str(path)) if has_tokenizer(path) else None
    return TorchLanguageModel(model, tokenizer, path, sampler_dtype=sampler_dtype, context_cache_mb=context_cache_mb)
