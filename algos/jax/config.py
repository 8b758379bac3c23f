"""The decoder's architecture, read from a Hugging Face ``config.json``.

One record covers the three families because they differ only in a few switches: Qwen2 always
biases q/k/v, Llama biases all four projections when ``attention_bias`` is set, and Qwen3 adds an
RMSNorm on each query and key head.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Family = Literal["llama", "qwen2", "qwen3"]
FAMILIES: tuple[str, ...] = ("llama", "qwen2", "qwen3")
_ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """What the Flax decoder needs to know; built by :meth:`from_hf`.

    Attributes:
        family: ``model_type`` of the checkpoint.
        vocab_size, hidden_size, intermediate_size, num_layers: Sizes.
        num_heads, num_kv_heads, head_dim: Attention shape (GQA when ``num_kv_heads < num_heads``).
        rms_norm_eps: Epsilon of every RMSNorm.
        rope: ``rope_parameters`` (transformers 5) or ``rope_scaling`` + ``rope_theta`` (older),
            normalised to one dict with ``rope_type`` and ``rope_theta``.
        tie_embeddings: The output projection is the input embedding's transpose.
        qkv_bias: Bias on q/k/v projections; ``o_bias`` on the output projection.
        mlp_bias: Bias on the SwiGLU projections (Llama's ``mlp_bias``).
        qk_norm: Qwen3's per-head RMSNorm on queries and keys.
        hf_config: The raw ``config.json``, written back unchanged on export.
    """

    family: Family
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: Mapping[str, Any]
    tie_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    hf_config: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_hf(cls, hf: Mapping[str, Any]) -> ModelConfig:
        """Parse a ``config.json`` dict.

        Raises:
            ValueError: An unsupported ``model_type``, RoPE type, activation or sliding window.
        """
        family = hf.get("model_type")
        if family not in FAMILIES:
            raise ValueError(f"model_type must be one of {FAMILIES}, got {family!r}")
        if hf.get("hidden_act", "silu") != "silu":
            raise ValueError(f"only SwiGLU (hidden_act='silu') is supported, got {hf['hidden_act']!r}")
        if hf.get("use_sliding_window"):
            raise ValueError("sliding-window attention is not supported")
        rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
        rope.setdefault("rope_type", rope.pop("type", "default"))
        rope.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
        if rope["rope_type"] not in _ROPE_TYPES:
            raise ValueError(f"rope_type must be one of {_ROPE_TYPES}, got {rope['rope_type']!r}")
        heads = int(hf["num_attention_heads"])
        attention_bias = bool(hf.get("attention_bias", False))
        return cls(
            family=family,
            vocab_size=int(hf["vocab_size"]),
            hidden_size=int(hf["hidden_size"]),
            intermediate_size=int(hf["intermediate_size"]),
            num_layers=int(hf["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or heads),
            head_dim=int(hf.get("head_dim") or hf["hidden_size"] // heads),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            rope=rope,
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            qkv_bias=family == "qwen2" or attention_bias,
            o_bias=family != "qwen2" and attention_bias,
            mlp_bias=bool(hf.get("mlp_bias", False)),
            qk_norm=family == "qwen3",
            hf_config=dict(hf),
        )

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> ModelConfig:
        """Read ``<path>/config.json``."""
        with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
            return cls.from_hf(json.load(fh))
