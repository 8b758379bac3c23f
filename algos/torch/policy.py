"""A causal LM from any local Hugging Face checkpoint: batched logprobs and a KV-cache sampler.

The torch twin of :mod:`textgym.algos.jax`: the same names, the same array conventions (numpy
in, numpy out), so the training loop never knows which backend it drives. The model is
transformers' ``AutoModelForCausalLM`` in float32 (the dtype in which both backends agree to
1e-4). Sampling draws from an explicit ``torch.Generator`` per call, so a seed alone fixes the
output and no global RNG is touched.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log softmax(logits / T)`` at ``ids``, in float32; both tensors share their leading dims."""
    logits = logits.float() / temperature
    picked = logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def sequence_logprobs(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Logprob of every token given the ones before it, aligned with ``ids`` (differentiable).

    ``out[:, t] = log p(ids[:, t] | ids[:, :t])``; position 0 and padding (``mask == 0``) are 0.
    Position ids count real tokens only, so left and right padding give the same numbers.
    """
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
    logits = model(input_ids=ids, attention_mask=mask.long(), position_ids=positions, use_cache=False).logits
    lp = token_logprobs(logits[:, :-1], ids[:, 1:], temperature)  # (B, T-1)
    lp = F.pad(lp, (1, 0))  # (B, T): nothing predicts the first token
    return lp * (mask * F.pad(mask[:, :-1], (1, 0))).to(lp.dtype)


class TorchPolicy:
    """A causal LM with numpy-facing ``logprobs`` and ``generate`` (see :func:`load_policy`).

    Attributes:
        model: The ``torch.nn.Module`` (trained in place by :class:`~textgym.algos.torch.Learner`).
        tokenizer: The checkpoint's tokenizer.
        eos_ids: Ids that end a generated turn (``generation_config.json``, else ``config.json``).
        pad_id: Id written after a finished sequence inside the batch.
        path: Where the checkpoint was loaded from.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, path: str | os.PathLike | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.path = None if path is None else Path(path)
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        if eos is None:
            eos = model.config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids = sorted({int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])})
        pad = model.config.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def logprobs(self, ids: np.ndarray, mask: np.ndarray, *, temperature: float = 1.0) -> np.ndarray:
        """Per-token logprobs of a batch, aligned with ``ids`` (0 at position 0 and on padding).

        Args:
            ids: ``(B, T)`` int token ids.
            mask: ``(B, T)`` 1 on real tokens, 0 on padding.
            temperature: Divides the logits, so the result matches what a sampler at that
                temperature drew from.

        Returns:
            ``(B, T)`` float32 array.
        """
        was_training = self.model.training
        self.model.eval()
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.long, device=self.device)
        mask_t = torch.as_tensor(np.asarray(mask), dtype=torch.long, device=self.device)
        out = sequence_logprobs(self.model, ids_t, mask_t, temperature)
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
        stop_ids: Sequence[Sequence[int]] = (),
        eos_ids: Sequence[int] | None = None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Sample a continuation for each prompt with a KV cache, in one batch.

        Prompts are left-padded into one prefill; then one token per step for every unfinished
        row, until each has produced an end-of-turn token, ended with a stop sequence, or reached
        ``max_new_tokens``.

        Args:
            prompts: 1-D int arrays of token ids (lengths may differ).
            max_new_tokens: Most tokens generated per prompt.
            temperature: Sampling temperature; 0 means greedy.
            seed: Seeds this call's ``torch.Generator``; the same seed gives the same samples.
            top_p: Nucleus sampling threshold (1.0 samples from the full distribution).
            stop_ids: Token sequences that also end a row when the generated ids end with one.
            eos_ids: End-of-turn ids; ``None`` means :attr:`eos_ids`.

        Returns:
            ``(ids, logprobs)``: per prompt, the generated ``int32`` ids (the EOS or stop tokens
            included, so a trajectory stays verbatim) and the ``float32`` logprob of each under
            ``log_softmax(logits / temperature)``, before top-p (the greedy case reports
            temperature-1 logprobs).
        """
        batch = len(prompts)
        if batch == 0:
            return [], []
        lengths = [len(p) for p in prompts]
        if min(lengths) < 1:
            raise ValueError("every prompt needs at least one token")
        was_training = self.model.training
        self.model.eval()
        device = self.device
        width = max(lengths)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every row's next token is at the end
            ids[i, width - len(p):] = torch.as_tensor(np.asarray(p, dtype=np.int64))
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        generator = torch.Generator(device=device).manual_seed(int(seed))
        eos = torch.as_tensor(list(self.eos_ids if eos_ids is None else eos_ids), dtype=torch.long, device=device)
        stops = [list(map(int, s)) for s in stop_ids if len(s)]
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
        next_pos = positions[:, -1] + 1
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        ends = np.full(batch, int(max_new_tokens))  # generated length of each row
        tokens, logps, history = [], [], [[] for _ in range(batch)]
        for step in range(int(max_new_tokens)):
            tok, lp = _sample(out.logits[:, -1].float(), temperature, top_p, generator)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(lp)
            finished = torch.isin(tok, eos) & ~done
            if stops:
                for i, t in enumerate(tok.tolist()):
                    history[i].append(t)
                    if not done[i] and any(history[i][-len(s):] == s for s in stops):
                        finished[i] = True
            ends[finished.cpu().numpy()] = step + 1
            done = done | finished
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], dim=1)
            out = self.model(input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos[:, None], cache=cache, use_cache=True)
            next_pos = next_pos + 1
        self.model.train(was_training)
        toks = torch.stack(tokens, 1).cpu().numpy().astype(np.int32) if tokens else np.zeros((batch, 0), np.int32)
        lps = torch.stack(logps, 1).cpu().numpy().astype(np.float32) if logps else np.zeros((batch, 0), np.float32)
        return [toks[i, : ends[i]].copy() for i in range(batch)], [lps[i, : ends[i]].copy() for i in range(batch)]


def _sample(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its logprob under ``log_softmax(logits / temperature)``."""
    if temperature <= 0:
        tok = logits.argmax(-1)
        return tok, token_logprobs(logits, tok)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = (sorted_p.cumsum(-1) - sorted_p) < top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
    tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


def load_policy(path: str | os.PathLike, *, dtype: str = "float32", device: str | torch.device = "cpu") -> TorchPolicy:
    """Load a local Hugging Face causal-LM directory (config.json, safetensors, tokenizer).

    Args:
        path: The checkpoint directory (``AutoModelForCausalLM`` and ``AutoTokenizer`` read it).
        dtype: Parameter dtype, ``"float32"`` (training) or ``"bfloat16"``.
        device: Where the model lives.

    Raises:
        FileNotFoundError: ``path`` is not a directory with a ``config.json``.
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"expected a Hugging Face model directory with config.json, got {str(path)!r}")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
    model.to(device)
    model.train()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    return TorchPolicy(model, tokenizer, path)
