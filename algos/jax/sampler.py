"""Batched sampling with a KV cache: one jitted prefill, one jitted decode loop.

The jitted functions take the model's graph as a static argument, so every model of one
architecture (a reloaded checkpoint, a learner's updated weights) shares their compilations.

Shapes are static and bucketed so a training run compiles a few times, not every step: the
distinct prompts (a GRPO group shares one) are left-padded to a length ``P`` in sixteenths of a
power of two and their count to a power of two, the batch to a power of two, the generation
buffer to a power of two ``N >= max_new_tokens`` and the cache to ``S = P + N``. The number of
tokens actually generated is a traced value, and the decode loop is a ``lax.while_loop`` that ends
when every row has stopped, so neither ``max_new_tokens`` nor early stopping recompiles. The cache
is donated to the decode loop, so it is updated in place.

Left padding puts every prompt's last token in the same slot, which makes the prefill's logits
one slice and every decode step write the same cache slot for all rows.

With a :class:`~textgym.algos.rollouts.context_cache.ContextCache`, the slots of a prompt's tokens that an
earlier call already ran (an episode's previous turns) are filled from it: only the last ``N``
slots run through the model, where ``N`` (in the same sixteenths) covers what any distinct prompt
has not cached, and the layout is the one a full prefill has, so the decode loop is the same.
After the call each row's keys and values, generated tokens included, are stored.

Randomness is each row's own counter-based uniforms (:mod:`textgym.draws`), computed on the host
and passed in: the numbers the torch sampler gets, whatever else shares the row's batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from textgym.algos.grpo import bucket_length, fine_bucket
from textgym.algos.grpo.learner import stop_sequences
from textgym.algos.grpo.prompts import distinct_prompts
from textgym.algos.jax.transformer import empty_cache, positions_from_mask
from textgym.algos.rollouts.context_cache import MISS, ContextCache, Hit
from textgym.draws import call_uniforms

_NEVER = -3  # a stop-matrix entry no token equals
_ANY = -2  # a stop-matrix entry every token matches (left of a shorter stop sequence)
_UNBOUNDED = 1 << 30


def stop_matrix(stop_ids: Sequence[int | Sequence[int]], eos_ids: Sequence[int]) -> np.ndarray:
    """Stop sequences right-aligned in one ``(n, L)`` int32 matrix.

    An int in ``stop_ids`` and every EOS id are length-1 stops.
    """
    stops = stop_sequences(stop_ids) + [[int(e)] for e in eos_ids]
    if not stops:
        return np.full((1, 1), _NEVER, dtype=np.int32)
    width = max(len(s) for s in stops)
    return np.array([[_ANY] * (width - len(s)) + s for s in stops], dtype=np.int32)


def inverse_cdf(probs: jax.Array, u: jax.Array, block: int = 256) -> jax.Array:
    """The ``(B,)`` first index whose cumulative ``probs`` ``(B, V)`` exceeds ``u * total`` (``u`` ``(B, 1)``).

    In two levels: the cumulative sums of blocks of ``block`` entries pick the block, then one
    block's own cumulative sum picks the entry. XLA:CPU's cumsum is slow over a long axis (one over
    SmolLM2's 49,152 logits x 8 rows: 4-7 ms, every decode step); these take ~0.3 ms in all.
    """
    b, v = probs.shape
    blocks = jnp.pad(probs, ((0, 0), (0, -v % block))).reshape(b, -1, block)  # (B, V / block, block)
    ends = jnp.cumsum(blocks.sum(-1), axis=-1)  # (B, V / block): mass up to each block's end
    u = u * ends[:, -1:]
    j = jnp.minimum(jnp.sum(ends <= u, axis=-1), ends.shape[1] - 1)  # the block holding u
    before = jnp.where(j > 0, jnp.take_along_axis(ends, jnp.maximum(j - 1, 0)[:, None], axis=1)[:, 0], 0.0)
    inner = before[:, None] + jnp.cumsum(jnp.take_along_axis(blocks, j[:, None, None], axis=1)[:, 0], axis=-1)
    k = jnp.minimum(jnp.sum(inner <= u, axis=-1), block - 1)  # the two levels round apart: stay in the block
    return jnp.minimum(j * block + k, v - 1)


def sample_token(logits: jax.Array, u: jax.Array, temperature: jax.Array, top_p: jax.Array, use_top_p: bool):
    """Sample ``(B,)`` tokens, each picked by its row's uniform ``u`` ``(B, 1)``, and their logprobs
    under ``log_softmax(logits / temperature)``.

    ``temperature == 0`` is greedy (logprobs then at temperature 1). Top-p truncates the sampling
    distribution but not the reported logprob, which is the one the learner recomputes. Sampling
    inverts the CDF (:func:`inverse_cdf`) with one uniform number per row: Gumbel-max (``jax.random.categorical``)
    draws one per vocabulary entry, which costs as much as the LM head on a CPU.
    """
    greedy = temperature <= 0
    logp = jax.nn.log_softmax(logits / jnp.where(greedy, 1.0, temperature), axis=-1)
    probs = jnp.exp(logp)
    if use_top_p:  # keep the smallest prefix of sorted tokens whose mass reaches top_p
        sorted_logp = jnp.sort(logp, axis=-1)[:, ::-1]
        before = jnp.cumsum(jnp.exp(sorted_logp), axis=-1) - jnp.exp(sorted_logp)
        cutoff = jnp.min(jnp.where(before < top_p, sorted_logp, jnp.inf), axis=-1, keepdims=True)
        probs = jnp.where(logp >= cutoff, probs, 0.0)
    sampled = inverse_cdf(probs, u)
    token = jnp.where(greedy, jnp.argmax(logits, axis=-1), sampled).astype(jnp.int32)
    return token, jnp.take_along_axis(logp, token[:, None], axis=-1)[:, 0]


@partial(jax.jit, static_argnames=("graphdef", "cache_len"))
def prefill(graphdef: nnx.GraphDef, params, prompt_ids, prompt_mask, past, rows, cache_len: int):
    """Run the distinct left-padded prompts' last ``N`` slots into a cache, then copy it per row.

    A GRPO group repeats one prompt ``group_size`` times: running each distinct prompt once and
    gathering its cache for every row that samples from it saves most of the prefill.

    Args:
        prompt_ids: ``(U, N)`` the last ``N`` slots of the prompts, left-padded to ``P`` slots.
        prompt_mask: ``(U, P)`` 1 on the prompts' real tokens.
        past: ``(U, layers, 2, K, P - N, D)`` keys and values of the first ``P - N`` slots, or
            None when ``N == P``.
        rows: ``(B,)`` index of each sampled row's prompt in ``prompt_ids``.

    Returns:
        ``(last logits (B, V), cache, key-slot mask (B, S))``.
    """
    model = nnx.merge(graphdef, params)
    u, p = prompt_mask.shape
    start = p - prompt_ids.shape[1]
    kv_mask = jnp.pad(prompt_mask, ((0, 0), (0, cache_len - p)))
    cache = empty_cache(model, u, cache_len, jax.tree.leaves(params)[0].dtype)
    if past is not None:
        cache = tuple((k.at[:, :, :start].set(past[:, i, 0]), v.at[:, :, :start].set(past[:, i, 1])) for i, (k, v) in enumerate(cache))
    positions = positions_from_mask(prompt_mask)[:, start:]
    logits, cache = model(prompt_ids, positions, kv_mask, cache, start, last_only=True)
    take = partial(jnp.take, indices=rows, axis=0)
    return take(logits[:, -1]), jax.tree.map(take, cache), take(kv_mask)


def cached_slots(distinct: Sequence[np.ndarray], hits: Sequence[Hit], rows: int, prompt_len: int, new: int) -> np.ndarray | None:
    """``(rows, layers, 2, K, prompt_len - new, D)``: each prompt's cached keys and values, right-aligned
    against its ``new`` slots that run (None when none are cached)."""
    cached = prompt_len - new
    if cached == 0:
        return None
    first = next(h.entry.kv for h in hits if h.entry is not None)  # (layers, 2, K, L, D)
    past = np.zeros((rows, *first.shape[:3], cached, first.shape[-1]), first.dtype)
    for j, (prompt, hit) in enumerate(zip(distinct, hits)):
        used = len(prompt) - new
        if used > 0:
            past[j, ..., cached - used :, :] = hit.entry.kv[..., :used, :]
    return past


def store_contexts(
    contexts: ContextCache, cache, rows: Sequence[np.ndarray], tokens: np.ndarray, lengths: np.ndarray, prompt_len: int
) -> None:
    """Store each row's prompt and sampled ids with their keys and values (every sampled token ran)."""
    layers = jax.device_get(cache)  # per layer (keys, values), each (B, K, S, D)
    for b, prompt in enumerate(rows):
        lo, hi = prompt_len - len(prompt), prompt_len + int(lengths[b])
        kv = np.stack([np.stack((k[b, :, lo:hi], v[b, :, lo:hi])) for k, v in layers])  # (layers, 2, K, L, D)
        contexts.add(np.concatenate([prompt, tokens[b, : lengths[b]]]), kv, kv.nbytes)


@partial(jax.jit, static_argnames=("graphdef", "use_top_p", "buffer"), donate_argnames=("cache",))
def decode(
    graphdef: nnx.GraphDef,
    params,
    cache,
    kv_mask,
    logits,
    next_pos,
    done,
    uniforms,
    max_new,
    temperature,
    top_p,
    stops,
    pad_id,
    use_top_p: bool,
    buffer: int,
):
    """Sample up to ``max_new`` tokens into a ``buffer``-long output, one cached step at a time;
    token ``t`` of row ``b`` is picked by ``uniforms[b, t]`` (``uniforms`` ``(B, buffer)``).

    Returns:
        ``(tokens (B, buffer), logprobs (B, buffer), lengths (B,), cache)``; the cache holds every
        sampled token's keys and values (each step runs the token it sampled), which the next turn
        of an episode reuses.
    """
    model = nnx.merge(graphdef, params)
    b = logits.shape[0]
    prompt_len = kv_mask.shape[1] - buffer
    width = stops.shape[1]

    def cond(state):
        step, *_, done = state
        return (step < max_new) & ~jnp.all(done)

    def body(state):
        step, cache, kv_mask, logits, pos, history, lps, lengths, done = state
        token, lp = sample_token(logits, jax.lax.dynamic_slice_in_dim(uniforms, step, 1, axis=1), temperature, top_p, use_top_p)
        token = jnp.where(done, pad_id, token)
        history = history.at[:, width - 1 + step].set(token)
        lps = lps.at[:, step].set(jnp.where(done, 0.0, lp))
        window = jax.lax.dynamic_slice_in_dim(history, step, width, axis=1)  # (B, L): the last L tokens
        hit = jnp.all((window[:, None, :] == stops[None]) | (stops[None] == _ANY), axis=-1).any(axis=-1)
        lengths = jnp.where(done, lengths, step + 1)
        done = done | hit
        slot = prompt_len + step
        kv_mask = kv_mask.at[:, slot].set(1)
        logits, cache = model(token[:, None], pos[:, None], kv_mask, cache, slot)
        return step + 1, cache, kv_mask, logits[:, -1], pos + 1, history, lps, lengths, done

    history = jnp.full((b, width - 1 + buffer), _NEVER, jnp.int32)
    lps = jnp.zeros((b, buffer), jnp.float32)
    lengths = jnp.zeros((b,), jnp.int32)
    state = (jnp.int32(0), cache, kv_mask, logits, next_pos, history, lps, lengths, done)
    state = jax.lax.while_loop(cond, body, state)
    return state[5][:, width - 1 :], state[6], state[7], state[1]


def generate(
    graphdef: nnx.GraphDef,
    params,
    prompts: Sequence[np.ndarray],
    max_new_tokens: int,
    temperature: float,
    seed: int,
    *,
    top_p: float = 1.0,
    stop_ids: Sequence[int | Sequence[int]] = (),
    eos_ids: Sequence[int] = (),
    pad_id: int = 0,
    contexts: ContextCache | None = None,
    keys: Sequence[tuple[int, int]] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Sample continuations; see :meth:`textgym.algos.jax.model.JaxLanguageModel.generate`.

    ``contexts``: where earlier calls' keys and values are looked up and this call's are stored
    (None: every prompt is prefilled whole and nothing is kept). ``keys``: per prompt, the
    ``(episode key, turn)`` its uniforms are drawn with (see :func:`textgym.draws.call_uniforms`).
    """
    if not prompts:
        return [], []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    n = len(prompts)
    distinct, source = distinct_prompts(prompts)
    hits = [contexts.lookup(p) for p in distinct] if contexts is not None else [MISS] * len(distinct)
    rows = bucket_length(n, _UNBOUNDED, min_bucket=1)
    # Every decode step attends to all prompt + generated slots: a tight bucket saves each step.
    prompt_len = fine_bucket(max(len(p) for p in distinct))
    new = min(prompt_len, fine_bucket(max(len(p) - h.length for p, h in zip(distinct, hits))))
    buffer = bucket_length(max_new_tokens, _UNBOUNDED)
    uniforms = np.zeros((rows, buffer), np.float32)  # batch padding rows and steps past max_new_tokens never sample
    uniforms[:n, :max_new_tokens] = call_uniforms(seed, keys, n, max_new_tokens)
    ids = np.full((bucket_length(len(distinct), _UNBOUNDED, min_bucket=1), prompt_len), pad_id, np.int32)
    mask = np.zeros(ids.shape, np.int32)
    for i, p in enumerate(distinct):
        ids[i, prompt_len - len(p) :] = p
        mask[i, prompt_len - len(p) :] = 1
    if contexts is not None:
        contexts.reused_tokens += sum(max(len(p) - new, 0) for p in distinct)
        contexts.prefilled_tokens += sum(min(len(p), new) for p in distinct)
    past = cached_slots(distinct, hits, len(ids), prompt_len, new)
    source = np.pad(source, (0, rows - n))  # batch padding rows copy prompt 0 and never run
    logits, cache, kv_mask = prefill(graphdef, params, ids[:, prompt_len - new :], mask, past, source, cache_len=prompt_len + buffer)
    done = np.arange(rows) >= n  # batch padding rows never run
    next_pos = mask.sum(axis=1).astype(np.int32)[source]
    tokens, lps, lengths, cache = decode(
        graphdef,
        params,
        cache,
        kv_mask,
        logits,
        next_pos,
        done,
        uniforms,
        np.int32(max_new_tokens),
        np.float32(temperature),
        np.float32(top_p),
        stop_matrix(stop_ids, eos_ids),
        np.int32(pad_id),
        use_top_p=top_p < 1.0,
        buffer=buffer,
    )
    tokens, lps, lengths = jax.device_get((tokens, lps, lengths))
    if contexts is not None:
        store_contexts(contexts, cache, [distinct[j] for j in source[:n]], tokens, lengths, prompt_len)
        for hit in hits:
            if hit.extends:  # the episode's longer context replaces it
                contexts.drop(hit.entry)
    return [tokens[i, : lengths[i]].copy() for i in range(n)], [lps[i, : lengths[i]].copy() for i in range(n)]
