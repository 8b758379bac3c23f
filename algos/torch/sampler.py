"""Batched sampling with a KV cache for transformers causal LMs, drawn from an explicit generator.

The torch twin of :mod:`textgym.algos.jax.sampler`. The distinct prompts are left-padded into
one prefill (positions count real tokens only, so padding never shifts RoPE) whose cache is copied
to every row that continues them; then one token per step for every unfinished row, each step
feeding only the new token against the cache (:mod:`textgym.algos.torch.decode`: the model's
decode step without transformers' per-call machinery, where the architecture allows). With a :class:`~textgym.algos.rollouts.context_cache.ContextCache`,
the slots of a prompt's tokens that an earlier call already ran (an episode's previous turns) are
filled from it and only the last ``new`` slots run through the model, where ``new`` is the most
that any distinct prompt has not cached; after the call each row's keys and values are stored.
Rows that finished leave the decode steps, with the padding columns no remaining row needs (see
``_RETIRE_AT``). On a CPU the linears multiply by weights packed
once per call (:mod:`textgym.algos.torch.packed`): a step's products have only a few rows. Randomness
is the row's own counter-based uniforms (:mod:`textgym.draws`), the numbers the JAX sampler gets,
never torch's RNG: a row samples the same tokens whatever else shares its batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from textgym.algos.grpo.learner import stop_sequences
from textgym.algos.grpo.prompts import distinct_prompts
from textgym.algos.rollouts.context_cache import MISS, ContextCache, Hit
from textgym.algos.torch.decode import decoder_for
from textgym.algos.torch.packed import PackedLinear, packed_linears
from textgym.draws import call_uniforms


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log_softmax(logits / temperature)`` at ``ids``, in float32; both share their leading dims."""
    logits = logits.float() / temperature
    picked = logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


class _SlotLayer(DynamicLayer):
    """A full-attention cache layer that writes new keys into spare slots instead of concatenating.

    ``DynamicLayer`` copies the whole cache at every decode step (``torch.cat``), which on a CPU
    costs about as much as the attention itself. The keys handed to attention are a view of the
    filled slots, equal to ``DynamicLayer``'s; a cache replaced wholesale (``reorder_cache``) is
    copied into fresh slots at the next step.
    """

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity
        self.slots: tuple[torch.Tensor, torch.Tensor] | None = None  # (B, K, capacity, D) keys and values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if self.slots is None or self.keys._base is not self.slots[0]:
            size = max(self.capacity, end)
            self.slots = tuple(x.new_empty((*x.shape[:2], size, x.shape[-1])) for x in (key_states, value_states))
            if start:
                self.slots[0][:, :, :start], self.slots[1][:, :, :start] = self.keys, self.values
        self.slots[0][:, :, start:end], self.slots[1][:, :, start:end] = key_states, value_states
        self.keys, self.values = self.slots[0][:, :, :end], self.slots[1][:, :, :end]
        return self.keys, self.values

    def fill(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Start the layer with ``(B, K, W, D)`` keys and values already in its first ``W`` slots."""
        self.lazy_initialization(keys, values)
        self.slots = tuple(x.new_empty((*x.shape[:2], max(self.capacity, x.shape[2]), x.shape[-1])) for x in (keys, values))
        width = keys.shape[2]
        self.slots[0][:, :, :width], self.slots[1][:, :, :width] = keys, values
        self.keys, self.values = self.slots[0][:, :, :width], self.slots[1][:, :, :width]

    def keep(self, rows: torch.Tensor, first: int) -> None:
        """Keep only ``rows`` of the batch and the slots from column ``first`` on (one copy)."""
        assert self.slots is not None, "keep() follows the prefill's update(), which fills the slots"
        end, (keys, values) = self.get_seq_length(), self.slots
        self.slots = (keys[rows, :, first:], values[rows, :, first:])
        self.keys, self.values = self.slots[0][:, :, : end - first], self.slots[1][:, :, : end - first]


# Finished rows leave the decode batch once they are 1 / _RETIRE_AT of it (each leaving copies the cache once).
_RETIRE_AT = 8


def slot_layers(cache: DynamicCache) -> list[_SlotLayer] | None:
    """The cache's layers if every one is a :class:`_SlotLayer` (their rows and left columns can be dropped), else None."""
    layers = [layer for layer in cache.layers if type(layer) is _SlotLayer]
    return layers if len(layers) == len(cache.layers) else None


def last_position(width: int, device: torch.device) -> torch.Tensor:
    """``logits_to_keep`` for the last of ``width`` positions, as an index tensor.

    transformers slices ``hidden[:, -1:]`` for ``logits_to_keep=1``, a strided view that its
    matmul does not fold into one GEMM: it broadcasts the head's weight to a batched matmul,
    copying the ``(V, D)`` weight once per row (measured here: most of a short prefill's time,
    3 s of a 5.8 s bf16 call). Indexing with a tensor gathers the rows into a contiguous
    ``(B, 1, D)`` first, so the head is one GEMM.
    """
    return torch.tensor([width - 1], device=device)


def sample_token(logits: torch.Tensor, temperature: float, top_p: float, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row, picked by its uniform ``u`` ``(B, 1)``, and its logprob under ``log_softmax(logits / temperature)``."""
    if temperature <= 0:
        tok = logits.argmax(-1)
        return tok, token_logprobs(logits, tok)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = (sorted_p.cumsum(-1) - sorted_p) < top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
    # Inverse CDF with one uniform number per row: multinomial draws one per vocabulary entry.
    cdf = probs.cumsum(-1)
    u = u * cdf[:, -1:]
    tok = (cdf <= u).sum(-1).clamp(max=probs.shape[-1] - 1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


def reusable(cache: DynamicCache) -> bool:
    """Whether every layer keeps all its keys (a sliding window's layer drops old ones)."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def fill_from_contexts(cache: DynamicCache, distinct: Sequence[np.ndarray], hits: Sequence[Hit], width: int, new: int) -> None:
    """Put every distinct prompt's cached keys and values in the slots left of the ``new`` that run.

    Prompt ``j`` (left-padded to ``width``) uses the first ``len(j) - new`` tokens of its hit, in
    slots ``width - len(j) .. width - new``; the others hold zeros, masked like padding.
    """
    cached = width - new
    first = next(h.entry.kv for h in hits if h.entry is not None)  # (layers, 2, K, L, D)
    past = first.new_zeros((first.shape[0], 2, len(distinct), first.shape[2], cached, first.shape[-1]))
    for j, (prompt, hit) in enumerate(zip(distinct, hits)):
        used = len(prompt) - new
        if used > 0:
            past[:, :, j, :, cached - used :] = hit.entry.kv[:, :, :, :used]
    for layer, (keys, values) in zip(cache.layers, past):
        layer.fill(keys, values)


def store_contexts(
    contexts: ContextCache,
    cache: DynamicCache,
    prompts: Sequence[np.ndarray],
    tokens: np.ndarray,
    ends: np.ndarray,
    fed: int,
    width: int,
    rows: Sequence[int] | np.ndarray,
    first: int,
    slots: Sequence[int] | np.ndarray | None = None,
) -> None:
    """Store each row's prompt and sampled ids whose keys and values the call computed.

    A row's last sampled token ran through the model only if a later step ran (``fed`` steps did).
    ``rows``: the batch rows to store, at ``slots`` of the cache (default: ``0, 1, ...``);
    ``first``: the key columns dropped from its left (:meth:`_SlotLayer.keep`).
    """
    for b, row in zip(range(len(rows)) if slots is None else slots, rows):
        prompt, kept = prompts[row], min(int(ends[row]), fed)
        lo, hi = width - len(prompt) - first, width + kept - first
        kv = torch.stack([torch.stack((layer.keys[b, :, lo:hi], layer.values[b, :, lo:hi])) for layer in cache.layers])
        contexts.add(np.concatenate([prompt, tokens[row, :kept]]), kv, kv.numel() * kv.element_size())


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    prompts: Sequence[np.ndarray],
    max_new_tokens: int,
    temperature: float,
    seed: int,
    *,
    top_p: float,
    stop_ids: Sequence[int | Sequence[int]],
    eos_ids: Sequence[int],
    pad_id: int,
    contexts: ContextCache | None = None,
    packed: dict[str, PackedLinear] | None = None,
    keys: Sequence[tuple[int, int]] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Sample from ``model`` (in eval mode); see :meth:`textgym.algos.torch.model.TorchLanguageModel.generate`.

    ``contexts``: where earlier calls' keys and values are looked up and this call's are stored
    (None: every prompt is prefilled whole and nothing is kept). ``packed``: packed linears kept
    from an earlier call on the same weights (see :func:`~textgym.algos.torch.packed.packed_linears`).
    ``keys``: per prompt, the ``(episode key, turn)`` its uniforms are drawn with (see
    :func:`textgym.draws.call_uniforms`).
    """
    batch = len(prompts)
    if batch == 0:
        return [], []
    lengths = [len(p) for p in prompts]
    if min(lengths) < 1:
        raise ValueError("every prompt needs at least one token")
    device = next(model.parameters()).device
    distinct, source = distinct_prompts(prompts)
    width = max(lengths)
    cache = DynamicCache(config=model.config)
    if contexts is not None and not reusable(cache):
        contexts = None
    hits = [contexts.lookup(p) for p in distinct] if contexts is not None else [MISS] * len(distinct)
    new = max(len(p) - h.length for p, h in zip(distinct, hits))  # the slots that run through the model
    ids = torch.full((len(distinct), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(distinct), width), dtype=torch.long)
    for i, p in enumerate(distinct):  # left padding: every row's next token is at the end
        ids[i, width - len(p) :] = torch.as_tensor(np.asarray(p, dtype=np.int64))
        mask[i, width - len(p) :] = 1
    ids, mask, source = ids.to(device), mask.to(device), torch.as_tensor(source, dtype=torch.long, device=device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    uniforms = torch.from_numpy(call_uniforms(seed, keys, batch, int(max_new_tokens))).to(device)  # (B, max_new_tokens)
    eos = np.asarray(list(eos_ids), dtype=np.int64)
    stops = stop_sequences(stop_ids)
    cache.layers = [_SlotLayer(width + int(max_new_tokens)) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    if new < width:
        fill_from_contexts(cache, distinct, hits, width, new)
    if contexts is not None:
        contexts.reused_tokens += sum(max(len(p) - new, 0) for p in distinct)
        contexts.prefilled_tokens += sum(min(len(p), new) for p in distinct)
    with packed_linears(model, batch, packed):  # a few rows per product: see textgym.algos.torch.packed
        # A GRPO group repeats one prompt: run each distinct prompt once, then copy its cache per row.
        out = model(
            input_ids=ids[:, width - new :],
            attention_mask=mask,
            position_ids=positions[:, width - new :],
            cache=cache,
            use_cache=True,
            logits_to_keep=last_position(new, device),
        )
        cache.reorder_cache(source)
        logits, mask, positions = out.logits[source], mask[source], positions[source]
        next_pos = positions[:, -1] + 1
        done = np.zeros(batch, dtype=bool)
        ends = np.full(batch, int(max_new_tokens))  # generated length of each row
        toks = np.full((batch, int(max_new_tokens)), pad_id, dtype=np.int32)
        lps = np.zeros((batch, int(max_new_tokens)), dtype=np.float32)
        history: list[list[int]] = [[] for _ in range(batch)]
        fed = 0  # decode steps run: the sampled tokens whose keys and values are in the cache
        decode = decoder_for(model, cache)
        row_prompts = [distinct[j] for j in source.tolist()]
        starts = width - np.asarray([len(p) for p in row_prompts])  # each row's first real key column
        # The decode steps run the batch rows in ``live``, their keys from column ``first`` of the
        # padded prompt on: rows that finished, and the left padding that no live row needs, leave.
        live, first, step = np.arange(batch), 0, -1
        slot_cache = slot_layers(cache)  # None: the cache cannot drop rows (finished rows then stay)
        for step in range(int(max_new_tokens)):
            was_done = done[live]
            tok, lp = sample_token(logits[:, -1].float(), temperature, top_p, uniforms[live, step : step + 1])
            tok = torch.where(torch.as_tensor(was_done, device=device), torch.full_like(tok, pad_id), tok)
            picked = tok.cpu().numpy()  # the step's one copy of its tokens to the host
            toks[live, step], lps[live, step] = picked, lp.cpu().numpy()
            finished = np.isin(picked, eos) & ~was_done
            if stops:
                for b, (row, t) in enumerate(zip(live.tolist(), picked.tolist())):
                    history[row].append(t)
                    if not was_done[b] and any(history[row][-len(s) :] == s for s in stops):
                        finished[b] = True
            ends[live[finished]] = step + 1
            done[live] = was_done | finished
            if done.all() or step == max_new_tokens - 1:  # no step samples from the last logits
                break
            if slot_cache is not None and was_done.sum() * _RETIRE_AT >= len(live):  # their last tokens ran already
                if contexts is not None:
                    store_contexts(contexts, cache, row_prompts, toks, ends, fed, width, live[was_done], first, np.flatnonzero(was_done))
                live = live[~was_done]
                drop = int(starts[live].min()) - first
                index = torch.as_tensor(np.flatnonzero(~was_done), device=device)
                for layer in slot_cache:
                    layer.keep(index, drop)
                tok, mask, next_pos, first = tok[index], mask[index, drop:], next_pos[index], first + drop
            mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=device)], dim=1)
            logits = decode(tok[:, None], mask, next_pos[:, None])
            next_pos = next_pos + 1
            fed += 1
    toks, lps = toks[:, : step + 1], lps[:, : step + 1]
    if contexts is not None:
        store_contexts(contexts, cache, row_prompts, toks, ends, fed, width, live, first)
        for hit in hits:
            if hit.extends:  # the episode's longer context replaces it
                contexts.drop(hit.entry)
    return [toks[i, : ends[i]].copy() for i in range(batch)], [lps[i, : ends[i]].copy() for i in range(batch)]
