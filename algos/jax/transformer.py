"""A Flax NNX decoder for the Llama, Qwen2 and Qwen3 families.

Module and attribute names follow the Hugging Face checkpoints (``model.layers.0.self_attn.q_proj``
becomes ``layers[0].self_attn.q_proj``), so :mod:`textgym.algos.jax.params` can map them with a
short table. The numerics follow transformers' implementation (RMSNorm in float32, half-split
RoPE, softmax in float32), which is what makes logprobs agree to 1e-4.

With a :class:`LoraSpec`, the layers it names are :class:`ScaledLoRALinear` (Flax NNX's
``nnx.LoRALinear``): their kernels stay where a plain ``nnx.Linear`` keeps them, and the adapters
are ``nnx.LoRAParam`` variables at ``<layer>.lora.lora_a`` and ``.lora_b``.

Every forward takes the key slots' ``attention_mask`` and the slot of the first query
(``cache_index``); the causal mask is built from them, so the same code serves training
(no cache, ``cache_index=0``), prefill and one-token decode steps (with a KV cache).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from textgym.algos.jax.config import ModelConfig

# One layer's cache: keys and values, each (B, K, S, D).
LayerCache = tuple[jax.Array, jax.Array]


def rope_inv_freq(config: ModelConfig) -> np.ndarray:
    """RoPE inverse frequencies ``(D/2,)`` with the config's scaling (default, linear, llama3)."""
    rope, dim = config.rope, config.head_dim
    inv_freq = 1.0 / (float(rope["rope_theta"]) ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    kind = rope["rope_type"]
    if kind == "linear":
        inv_freq = inv_freq / float(rope["factor"])
    elif kind == "llama3":  # Llama 3.1: divide low frequencies by `factor`, blend the middle band.
        factor, low, high = float(rope["factor"]), float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
        old_len = float(rope["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        inv_freq = np.where(medium, blended, scaled)
    return inv_freq.astype(np.float32)


def rope_tables(inv_freq: jax.Array, positions: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    """cos and sin ``(B, T, D)`` for integer ``positions`` ``(B, T)``."""
    freqs = positions.astype(jnp.float32)[..., None] * inv_freq  # (B, T, D/2)
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb).astype(dtype), jnp.sin(emb).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate ``x`` ``(B, T, H, D)`` by half-split RoPE (the HF layout, not interleaved)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, :, None, :] + rotated * sin[:, :, None, :]


def dot_general(lhs: jax.Array, rhs: jax.Array, dimension_numbers, precision=None, preferred_element_type=None, **kwargs) -> jax.Array:
    """``lax.dot_general`` accumulated and written in float32, then cast to ``lhs``'s dtype.

    XLA:CPU runs a ``bf16 x bf16 -> bf16`` dot on a generic kernel (~40 GFLOP/s on this project's
    2-core Xeon, below float32's ~60-90) but hands ``bf16 x bf16 -> f32`` to oneDNN, which uses
    AMX (~170-350 GFLOP/s measured); for float32 operands this is ``lax.dot_general`` itself.
    """
    out = jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision, preferred_element_type=jnp.float32, **kwargs)
    return out.astype(preferred_element_type or lhs.dtype)


class LoraSpec(NamedTuple):
    """Which linear layers get a LoRA adapter (by attribute name: ``q_proj``, ``down_proj``,
    ``lm_head``), its rank and the factor of its output, peft's ``lora_alpha / r``."""

    rank: int
    scale: float
    targets: tuple[str, ...]


class ScaledLoRALinear(nnx.LoRALinear):
    """``nnx.LoRALinear`` with peft's scale: ``linear(x) + scale * x @ lora_a @ lora_b``.

    ``nnx.LoRA`` applies no ``alpha / r``; scaling its output (not folding the scale into
    ``lora_a`` or ``lora_b``) keeps the adapters equal to peft's (``lora_a = A.T``,
    ``lora_b = B.T``), so their gradients and AdamW's steps are peft's too.
    """

    def __init__(self, in_features: int, out_features: int, *, lora_scale: float, **kwargs):
        super().__init__(in_features, out_features, **kwargs)
        self.lora_scale = lora_scale

    def __call__(self, x: jax.Array) -> jax.Array:
        return nnx.Linear.__call__(self, x) + self.lora_scale * self.lora(x)


def linear(name: str, in_features: int, out_features: int, lora: LoraSpec | None, *, rngs: nnx.Rngs, **kwargs) -> nnx.Linear:
    """The projection ``name``: an ``nnx.Linear`` on :func:`dot_general`, adapted when ``lora`` targets it."""
    if lora is not None and name in lora.targets:
        return ScaledLoRALinear(
            in_features, out_features, lora_rank=lora.rank, lora_scale=lora.scale, dot_general=dot_general, rngs=rngs, **kwargs
        )
    return nnx.Linear(in_features, out_features, dot_general=dot_general, rngs=rngs, **kwargs)


class RMSNorm(nnx.Module):
    """``x / rms(x) * weight``, normalised in float32 whatever the activations' dtype."""

    def __init__(self, dim: int, eps: float):
        self.weight = nnx.Param(jnp.ones((dim,), jnp.float32))
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return self.weight[...] * normed.astype(x.dtype)


CHUNKS = 4  # query blocks of a long causal pass (prefill, training), at least
_CHUNK_QUERIES = 512  # and no more queries than this a block: a long prefill's scores stay small
_MIN_CHUNKED = 256  # shorter passes attend in one block


def causal_chunks(t: int, slots: int, cache_index) -> tuple[tuple[int, int, int], ...]:
    """``(first query, end query, key slots it may see)`` blocks of ``t`` causal queries.

    Queries ``lo..hi-1`` sit at slots ``cache_index + lo ..`` and see only key slots below
    ``cache_index + hi``; slicing the keys there skips work that the causal mask would zero
    anyway (scores, softmax, ``p v``): ``n`` blocks do ``(n + 1) / 2n`` of one full block's work
    (four: ``5/8``). A pass of more than ``CHUNKS`` x 512 queries takes blocks of at most 512 (a
    5.7k-token prefill, 12), so that less is computed to be masked and each block's scores stay
    small. Blocks need a static ``cache_index`` (prefill and training); a traced one (decode) is
    one block.
    """
    if not isinstance(cache_index, int) or t < _MIN_CHUNKED:
        return ((0, t, slots),)
    chunks = max(CHUNKS, -(-t // _CHUNK_QUERIES))
    bounds = [t * i // chunks for i in range(chunks + 1)]
    return tuple((lo, hi, min(slots, cache_index + hi)) for lo, hi in zip(bounds, bounds[1:]))


@jax.custom_vjp
def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """Softmax attention of ``q`` ``(B, K, G, T, D)`` over ``k, v`` ``(B, K, S, D)``; ``mask`` ``(B, T, S)``.

    Differentiated by :func:`_attend_backward`, which keeps the softmax's maximum and normaliser,
    not its probabilities, and rebuilds them from the scores (the flash-attention gradient, unblocked):
    the score-sized tensors are XLA:CPU's largest cost in an update, and the gradient's own
    reductions over them give way to one over the output.
    """
    return _attend(q, k, v, mask)[0]


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """The attention, and each query's largest score and softmax normaliser ``(B, K, G, T, 1)``
    (float32; kept apart, as a log-normaliser would lose a query that sees no key)."""
    b, kv, g, t, d = q.shape
    scores = _scores(q, k, mask)  # (B, K, G, T, S)
    top = jnp.max(scores, axis=-1, keepdims=True)
    unnormalized = jnp.exp(scores - top)
    total = jnp.sum(unnormalized, axis=-1, keepdims=True)
    probs = (unnormalized / total).astype(q.dtype).reshape(b, kv, g * t, -1)  # jax.nn.softmax's operations
    out = jnp.einsum("bkqs,bksd->bkqd", probs, v.astype(q.dtype), preferred_element_type=jnp.float32).astype(q.dtype)
    return out.reshape(b, kv, g, t, d), (top, total)


def _scores(q: jax.Array, k: jax.Array, mask: jax.Array) -> jax.Array:
    """Scaled, masked scores ``(B, K, G, T, S)`` in float32 (the scores need it, and XLA:CPU's
    bf16 dots are fast only so, see :func:`dot_general`)."""
    b, kv, g, t, d = q.shape
    scores = jnp.einsum("bkqd,bksd->bkqs", q.reshape(b, kv, g * t, d), k.astype(q.dtype), preferred_element_type=jnp.float32)
    scores = (scores / math.sqrt(d)).reshape(b, kv, g, t, -1)
    return jnp.where(mask[:, None, None], scores, jnp.finfo(jnp.float32).min)


def _attend_forward(q, k, v, mask):
    out, (top, total) = _attend(q, k, v, mask)
    return out, (q, k, v, mask, out, top, total)


def _attend_backward(residuals, d_out):
    """``dS = P * (dP - rowsum(dO * O))``, with ``P`` rebuilt from the scores as the forward built it."""
    q, k, v, mask, out, top, total = residuals
    b, kv, g, t, d = q.shape
    probs = (jnp.exp(_scores(q, k, mask) - top) / total).reshape(b, kv, g * t, -1)  # (B, K, G*T, S)
    d_out32 = d_out.astype(jnp.float32).reshape(b, kv, g * t, d)
    d_v = jnp.einsum("bkqs,bkqd->bksd", probs, d_out32)
    d_probs = jnp.einsum("bkqd,bksd->bkqs", d_out32, v.astype(jnp.float32))
    row = jnp.sum(d_out32 * out.astype(jnp.float32).reshape(b, kv, g * t, d), axis=-1, keepdims=True)
    d_scores = (probs * (d_probs - row) / math.sqrt(d)).reshape(b, kv, g, t, -1)
    d_scores = jnp.where(mask[:, None, None], d_scores, 0.0).reshape(b, kv, g * t, -1)  # a query that sees no key has none
    d_q = jnp.einsum("bkqs,bksd->bkqd", d_scores, k.astype(jnp.float32)).reshape(b, kv, g, t, d)
    d_k = jnp.einsum("bkqs,bkqd->bksd", d_scores, q.astype(jnp.float32).reshape(b, kv, g * t, d))
    return d_q.astype(q.dtype), d_k.astype(k.dtype), d_v.astype(v.dtype), None


attend.defvjp(_attend_forward, _attend_backward)


def row_by_row() -> bool:
    """Whether a long pass attends one row at a time (:func:`attend_by_row`): on a CPU, where a
    row's scores (its heads', a causal block of queries) stay in the core's cache and the whole
    batch's spill to memory. Asked when a pass is traced, so importing sets up no backend."""
    return jax.default_backend() == "cpu"


def _blocks(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, chunks) -> list[tuple[jax.Array, ...]]:
    """Each block of :func:`causal_chunks`' ``(q, k, v, mask)``: its queries and the keys they may see."""
    return [(q[:, :, :, lo:hi], k[:, :, :end], v[:, :, :end], mask[:, lo:hi, :end]) for lo, hi, end in chunks]


def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, chunks: tuple[tuple[int, int, int], ...]) -> jax.Array:
    """:func:`attend` block by block of :func:`causal_chunks`, the blocks' outputs joined: ``(B, K, G, T, D)``."""
    return jnp.concatenate([attend(*block) for block in _blocks(q, k, v, mask, chunks)], axis=3)


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def attend_by_row(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, chunks: tuple[tuple[int, int, int], ...]) -> jax.Array:
    """:func:`causal_attention`, one row at a time (``lax.map``), its gradient too: each row's
    blocks go through :func:`_attend` and :func:`_attend_backward` (a gradient of its own, as
    JAX's transpose of a map compiles slower)."""
    return _by_row_forward(q, k, v, mask, chunks)[0]


def _by_row_forward(q, k, v, mask, chunks):
    def row(args):
        q, k, v, mask = (x[None] for x in args)
        outs, stats = zip(*(_attend(*block) for block in _blocks(q, k, v, mask, chunks)))
        tops, totals = zip(*stats)
        return tuple(jnp.concatenate(parts, axis=3)[0] for parts in (outs, tops, totals))

    out, top, total = jax.lax.map(row, (q, k, v, mask))
    return out, (q, k, v, mask, out, top, total)


def _by_row_backward(chunks, residuals, d_out):
    def row(args):
        q, k, v, mask, out, top, total, d_out = (x[None] for x in args)
        d_q, d_k, d_v = [], jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32)
        for block, (lo, hi, end) in zip(_blocks(q, k, v, mask, chunks), chunks):
            dq, dk, dv, _ = _attend_backward(
                (*block, out[:, :, :, lo:hi], top[:, :, :, lo:hi], total[:, :, :, lo:hi]), d_out[:, :, :, lo:hi]
            )
            d_q.append(dq)
            d_k, d_v = d_k.at[:, :, :end].add(dk), d_v.at[:, :, :end].add(dv)
        return jnp.concatenate(d_q, axis=3)[0], d_k[0].astype(k.dtype), d_v[0].astype(v.dtype)

    q, k, v, mask, out, top, total = residuals
    d_q, d_k, d_v = jax.lax.map(row, (q, k, v, mask, out, top, total, d_out))
    return d_q, d_k, d_v, None


attend_by_row.defvjp(_by_row_forward, _by_row_backward)


class Attention(nnx.Module):
    """Grouped-query self-attention with RoPE, optional q/k/v bias and Qwen3's q/k norm."""

    def __init__(self, config: ModelConfig, *, lora: LoraSpec | None = None, rngs: nnx.Rngs):
        d, h, k, hd = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = h, k, hd
        self.q_proj = linear("q_proj", d, h * hd, lora, use_bias=config.qkv_bias, rngs=rngs)
        self.k_proj = linear("k_proj", d, k * hd, lora, use_bias=config.qkv_bias, rngs=rngs)
        self.v_proj = linear("v_proj", d, k * hd, lora, use_bias=config.qkv_bias, rngs=rngs)
        self.o_proj = linear("o_proj", h * hd, d, lora, use_bias=config.o_bias, rngs=rngs)
        if config.qk_norm:
            self.q_norm = RMSNorm(hd, config.rms_norm_eps)
            self.k_norm = RMSNorm(hd, config.rms_norm_eps)
        self.qk_norm = config.qk_norm

    def __call__(
        self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array, cache: LayerCache | None, cache_index
    ) -> tuple[jax.Array, LayerCache | None]:
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, self.num_heads, self.head_dim)  # (B, T, H, D)
        k = self.k_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)  # (B, T, K, D)
        v = self.v_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # Heads-major layout (B, K, T, D): the attention matmuls then batch over leading axes, which
        # XLA's CPU backend runs ~2x faster (forward and backward) than the token-major einsum.
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
        if cache is not None:
            k = jax.lax.dynamic_update_slice_in_dim(cache[0], k.astype(cache[0].dtype), cache_index, axis=2)
            v = jax.lax.dynamic_update_slice_in_dim(cache[1], v.astype(cache[1].dtype), cache_index, axis=2)
            cache = (k, v)
        groups = self.num_heads // self.num_kv_heads
        # Query head h = k * G + g uses KV head k (HF's repeat_kv order).
        q = q.reshape(b, t, self.num_kv_heads, groups, self.head_dim).transpose(0, 2, 3, 1, 4)  # (B, K, G, T, D)
        chunks = causal_chunks(t, mask.shape[-1], cache_index)
        out: jax.Array
        if len(chunks) > 1 and row_by_row():
            out = attend_by_row(q, k, v, mask, chunks)
        else:
            out = causal_attention(q, k, v, mask, chunks)  # (B, K, G, T, D)
        out = out.transpose(0, 3, 1, 2, 4).reshape(b, t, -1)
        return self.o_proj(out), cache


class MLP(nnx.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: ModelConfig, *, lora: LoraSpec | None = None, rngs: nnx.Rngs):
        d, f, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = linear("gate_proj", d, f, lora, use_bias=bias, rngs=rngs)
        self.up_proj = linear("up_proj", d, f, lora, use_bias=bias, rngs=rngs)
        self.down_proj = linear("down_proj", f, d, lora, use_bias=bias, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nnx.Module):
    """Pre-norm residual block: attention, then the MLP."""

    def __init__(self, config: ModelConfig, *, lora: LoraSpec | None = None, rngs: nnx.Rngs):
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, lora=lora, rngs=rngs)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config, lora=lora, rngs=rngs)

    def __call__(self, x, cos, sin, mask, cache, cache_index):
        h, cache = self.self_attn(self.input_layernorm(x), cos, sin, mask, cache, cache_index)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), cache


class CausalLM(nnx.Module):
    """The decoder with its language-model head.

    Args:
        config: The architecture.
        lora: The layers that get a LoRA adapter, or None for none.
        rngs: Initialisers' keys (weights are normally loaded, see ``params.load_params``).
    """

    def __init__(self, config: ModelConfig, *, lora: LoraSpec | None = None, rngs: nnx.Rngs):
        self.tie_embeddings = config.tie_embeddings
        self.inv_freq = tuple(float(f) for f in rope_inv_freq(config))  # static: folded into the jit
        self.embed_tokens = nnx.Embed(config.vocab_size, config.hidden_size, rngs=rngs)
        self.layers = nnx.List([DecoderLayer(config, lora=lora, rngs=rngs) for _ in range(config.num_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if not config.tie_embeddings:
            self.lm_head = linear(
                "lm_head", config.hidden_size, config.vocab_size, lora, use_bias=False, preferred_element_type=jnp.float32, rngs=rngs
            )

    def __call__(
        self,
        input_ids: jax.Array,
        positions: jax.Array,
        attention_mask: jax.Array,
        cache: tuple[LayerCache, ...] | None = None,
        cache_index: jax.Array | int = 0,
        last_only: bool = False,
    ) -> tuple[jax.Array, tuple[LayerCache, ...] | None]:
        """Logits for ``input_ids``: :meth:`hidden`, then :meth:`head`.

        Args:
            input_ids: ``(B, T)`` tokens, written to key slots ``cache_index .. cache_index+T-1``.
            positions: ``(B, T)`` RoPE positions.
            attention_mask: ``(B, S)`` 1 on key slots that hold real tokens (``S = T`` without a
                cache, the cache length with one).
            cache: Per-layer ``(k, v)`` of shape ``(B, K, S, D)``, or None.
            cache_index: Slot of the first query token.
            last_only: Compute logits for the last position only (prefill needs no others).

        Returns:
            ``(logits (B, T, V) float32 (T = 1 with last_only), updated cache or None)``.
        """
        x, new_cache = self.hidden(input_ids, positions, attention_mask, cache, cache_index)
        return self.head(x[:, -1:] if last_only else x), new_cache

    def hidden(
        self,
        input_ids: jax.Array,
        positions: jax.Array,
        attention_mask: jax.Array,
        cache: tuple[LayerCache, ...] | None = None,
        cache_index: jax.Array | int = 0,
    ) -> tuple[jax.Array, tuple[LayerCache, ...] | None]:
        """The last decoder layer's output ``(B, T, D)`` (before the final norm) and the updated
        cache; the arguments are :meth:`__call__`'s."""
        embedding = self.embed_tokens.embedding[...]
        x = jnp.take(embedding, input_ids, axis=0)  # (B, T, D)
        cos, sin = rope_tables(jnp.asarray(self.inv_freq, jnp.float32), positions, x.dtype)
        q_slot = cache_index + jnp.arange(input_ids.shape[1])
        k_slot = jnp.arange(attention_mask.shape[1])
        mask = (k_slot[None, None, :] <= q_slot[None, :, None]) & (attention_mask[:, None, :] > 0)  # (B, T, S)
        new_cache = []
        for i, layer in enumerate(self.layers):
            x, layer_cache = layer(x, cos, sin, mask, None if cache is None else cache[i], cache_index)
            new_cache.append(layer_cache)
        return x, None if cache is None else tuple(new_cache)

    def head(self, x: jax.Array) -> jax.Array:
        """float32 logits ``(..., V)`` of hidden states ``(..., D)``: the final norm, then the LM head.

        Each position is its own, so running it on a few gathered positions gives their rows of
        the whole sequence's logits (:func:`scored_logprobs`).
        """
        x = self.norm(x)
        if self.tie_embeddings:
            # Contract with the (V, D) table directly; `embedding.T` could materialise a copy per step.
            embedding = self.embed_tokens.embedding[...]
            logits = dot_general(x, embedding.astype(x.dtype), (((x.ndim - 1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        else:
            logits = self.lm_head(x)
        return logits.astype(jnp.float32)


def scored_logprobs(model: CausalLM, hidden: jax.Array, ids: jax.Array, at: jax.Array, temperature: float = 1.0) -> jax.Array:
    """``(B, T)`` logprob of ``ids[:, t]`` from ``hidden[:, t - 1]``, at the tokens ``at`` names, 0 elsewhere.

    The head and the log-softmax run on the ``K`` named positions alone: on multi-turn episodes most
    tokens are the environment's, which no loss reads, and a head over a large vocabulary is a
    large share of a small model's work (SmolLM2's 49k-token head). ``K`` is static, so a caller
    pads ``at`` to a bucket and a jitted step compiles once per bucket.

    Args:
        model: The decoder whose :meth:`CausalLM.head` scores the positions.
        hidden: ``(B, T, D)`` from :meth:`CausalLM.hidden`.
        ids: ``(B, T)`` the tokens.
        at: ``(K,)`` int32 flat indices ``b * T + t - 1`` of the positions whose logits score token
            ``(b, t)`` (``t >= 1``), padded with ``B * T`` (ignored); see :func:`scored_positions`.
        temperature: Divides the logits.
    """
    b, t, d = hidden.shape
    x = jnp.take(hidden.reshape(b * t, d), at, axis=0, mode="clip")  # (K, D); padding reads the last row
    targets = jnp.take(ids.reshape(b * t), at + 1, mode="clip")
    picked = picked_logprobs(model.head(x), targets, temperature)  # (K,)
    return jnp.zeros(b * t, picked.dtype).at[at + 1].set(picked, mode="drop").reshape(b, t)


def scored_positions(scored: np.ndarray, size: int) -> np.ndarray:
    """``(size,)`` int32 ``at`` of :func:`scored_logprobs` for the ``(B, T)`` tokens ``scored``:
    the flat indices of the positions before them (column 0 has none), padded with ``B * T``.

    Example:
        >>> scored_positions(np.array([[0, 1, 1], [1, 0, 1]]), 4).tolist()
        [0, 1, 4, 6]

    Raises:
        ValueError: ``size`` is smaller than the number of tokens to score.
    """
    b, t = scored.shape
    wanted = np.asarray(scored, bool).copy()
    wanted[:, 0] = False
    flat = np.flatnonzero(wanted.reshape(-1)) - 1  # the position before each token
    if flat.size > size:
        raise ValueError(f"expected at least {flat.size} slots for the scored tokens, got {size}")
    return np.pad(flat, (0, size - flat.size), constant_values=b * t).astype(np.int32)


def token_logprobs(logits: jax.Array, input_ids: jax.Array, temperature: float = 1.0) -> jax.Array:
    """``(B, T)`` logprob of ``input_ids[:, t]`` from ``logits[:, t-1]``; column 0 is 0.

    This is the alignment convention of :mod:`textgym.algos.grpo`.
    """
    return jnp.pad(picked_logprobs(logits[:, :-1], input_ids[:, 1:], temperature), ((0, 0), (1, 0)))


def picked_logprobs(logits: jax.Array, ids: jax.Array, temperature: float = 1.0) -> jax.Array:
    """``log_softmax(logits / temperature)`` at ``ids``; both share their leading dims."""
    scaled = logits / temperature
    picked = jnp.take_along_axis(scaled, ids[..., None], axis=-1)[..., 0]
    return picked - jax.nn.logsumexp(scaled, axis=-1)


def empty_cache(model: CausalLM, batch: int, cache_len: int, dtype) -> tuple[LayerCache, ...]:
    """Zeroed per-layer ``(k, v)`` caches of ``cache_len`` slots, each ``(B, K, S, D)``."""
    layer = model.layers[0].self_attn
    shape = (batch, layer.num_kv_heads, cache_len, layer.head_dim)
    return tuple((jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in model.layers)


def positions_from_mask(attention_mask: jax.Array) -> jax.Array:
    """0-based positions counting only real tokens (left or right padding alike)."""
    return jnp.maximum(jnp.cumsum(attention_mask, axis=-1) - 1, 0).astype(jnp.int32)
