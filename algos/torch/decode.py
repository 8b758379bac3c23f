"""One decode step of a Qwen2 or Llama model without transformers' per-call machinery.

A sampler's decode step runs one token a row through the model. For a small model on a CPU the
kernels of that step are a fraction of its time: the rest is transformers' generic forward
(output-capturing and deprecation wrappers, the mask builder, the cache's bookkeeping, a module
call per norm and projection). :func:`decode_step` runs the same operations in the same order on
the model's own modules and weights (the packed linears of :mod:`textgym.algos.torch.packed`
included), so its logits are the forward's, bit for bit (tested), at a smaller cost a call.

Only the architectures whose forward it repeats take it (:func:`supports`); any other model, a
peft-wrapped one, another attention implementation or a sliding window keeps transformers'
forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

_ARCHITECTURES = ("Qwen2ForCausalLM", "LlamaForCausalLM")


def supports(model: torch.nn.Module) -> bool:
    """Whether :func:`decode_step` repeats ``model``'s forward: a Qwen2 or Llama causal LM under SDPA, full attention only."""
    if type(model).__name__ not in _ARCHITECTURES:
        return False
    config: Any = model.config
    return config._attn_implementation == "sdpa" and all(
        t == "full_attention" for t in getattr(config, "layer_types", None) or ["full_attention"]
    )


def _rms_norm(norm: Any, x: torch.Tensor) -> torch.Tensor:
    """The model's RMSNorm, its own operations in their order."""
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    return norm.weight * (x * torch.rsqrt(variance + norm.variance_epsilon)).to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def decode_step(model: Any, layers: list, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=...).logits`` for one token a row.

    Args:
        model: A model :func:`supports`.
        layers: The cache's layers, one per decoder layer (``update(keys, values)`` appends this
            step's and returns every slot's).
        ids: ``(B, 1)`` the tokens fed.
        mask: ``(B, S)`` 1 on the key slots that hold real tokens, this step's included.
        positions: ``(B, 1)`` their positions.

    Returns:
        ``(B, 1, V)`` logits.
    """
    decoder = model.model
    x = decoder.embed_tokens(ids)
    cos, sin = decoder.rotary_emb(x, positions)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    # transformers' mask for one query: none when no slot is padding, else which slots it sees.
    keys_mask = None if bool(mask.all()) else mask.bool()[:, None, None, :]
    batch = ids.shape[0]
    for layer, cache in zip(decoder.layers, layers, strict=True):
        attn = layer.self_attn
        h = _rms_norm(layer.input_layernorm, x)
        shape = (batch, 1, -1, attn.head_dim)
        q = attn.q_proj(h).view(shape).transpose(1, 2)
        k = attn.k_proj(h).view(shape).transpose(1, 2)
        v = attn.v_proj(h).view(shape).transpose(1, 2)
        q, k = (q * cos) + (_rotate_half(q) * sin), (k * cos) + (_rotate_half(k) * sin)
        k, v = cache.update(k, v)
        out, _ = sdpa_attention_forward(attn, q, k, v, keys_mask, dropout=0.0, scaling=attn.scaling)
        x = x + attn.o_proj(out.reshape(batch, 1, -1).contiguous())
        mlp = layer.mlp
        h = _rms_norm(layer.post_attention_layernorm, x)
        x = x + mlp.down_proj(mlp.act_fn(mlp.gate_proj(h)) * mlp.up_proj(h))
    return model.lm_head(_rms_norm(decoder.norm, x))


def decoder_for(model: torch.nn.Module, cache) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """A function of ``(ids, mask, positions)`` giving one decode step's logits over ``cache``:
    :func:`decode_step` where the model allows, else the model's own forward."""
    if supports(model):
        return lambda ids, mask, positions: decode_step(model, cache.layers, ids, mask, positions)
    return lambda ids, mask, positions: (
        model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True).logits
    )
