"""The ``tiny`` preset: a small random Qwen2-style model and the built-in tokenizer, saved offline.

``create(path)`` writes an ordinary Hugging Face directory (``config.json``,
``model.safetensors``, tokenizer files) that transformers' ``AutoModelForCausalLM`` and the JAX
backend both load, so the whole pipeline (SFT warm start, GRPO, evaluation) runs on a laptop CPU
with nothing downloaded. Weights are drawn with numpy from a seeded generator, so the same seed
gives byte-identical weights on any machine and no deep-learning framework is imported here.

Example:
    >>> import tempfile, json, pathlib
    >>> path = create(tempfile.mkdtemp(), seed=0)
    >>> json.loads((path / "config.json").read_text())["model_type"]
    'qwen2'
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from textgym.error import require

NAME = "tiny"


def compact_chat_template() -> str:
    """The tiny tokenizer's chat template without its system turn and tool list.

    A tiny random model learns a task from demonstrations, not from reading its rules, and the
    rules and tool schemas are most of a prompt (a 4x4 Sudoku prompt is ~2,200 byte tokens with
    them and ~110 without). Every later turn renders exactly as in the full template.
    """
    from textgym.tokenizer import COMPACT_CHAT_TEMPLATE

    return COMPACT_CHAT_TEMPLATE


@dataclass(frozen=True, kw_only=True)
class TinySize:
    """The shape of the tiny model (~0.3M parameters besides the 270 x 128 embedding).

    Two wide-ish layers rather than more narrow ones, and a low RoPE base: the model's first job on
    a grid task is to copy digits from a prompt ~130 tokens back, which needs attention that
    tells offsets apart sharply; ``rope_theta=100`` spreads RoPE's frequencies over exactly those
    distances (with 10,000 a 64-wide model was still at chance on copying after 800 SFT steps,
    with 100 it began copying after ~200).

    Attributes:
        hidden_size: Width of the residual stream.
        intermediate_size: Width of the SwiGLU MLP.
        num_hidden_layers: Decoder layers.
        num_attention_heads: Query heads (head_dim = hidden_size / num_attention_heads).
        num_key_value_heads: Key/value heads (grouped-query attention when fewer than query heads).
        max_position_embeddings: Longest context the RoPE tables are sized for.
        rope_theta: RoPE base frequency.
        init_std: Standard deviation of the normal init of every matrix (Qwen2's 0.02).
    """

    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    rope_theta: float = 100.0
    init_std: float = 0.02


def config_dict(size: TinySize, tokenizer: Any) -> dict[str, Any]:
    """The ``config.json`` of a tiny Qwen2 model for ``tokenizer`` (tied embeddings, float32)."""
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    bos = tokenizer.bos_token_id
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": len(tokenizer),
        "hidden_size": size.hidden_size,
        "intermediate_size": size.intermediate_size,
        "num_hidden_layers": size.num_hidden_layers,
        "num_attention_heads": size.num_attention_heads,
        "num_key_value_heads": size.num_key_value_heads,
        "hidden_act": "silu",
        "max_position_embeddings": size.max_position_embeddings,
        "initializer_range": size.init_std,
        "rms_norm_eps": 1e-6,
        "rope_theta": size.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": size.rope_theta},
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos if bos is not None else eos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def init_weights(config: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights under Hugging Face's Qwen2 key names (normal matrices, unit norms).

    Biases start at zero and norms at one, as transformers' own ``_init_weights`` does, so a
    freshly created model is a plain random Qwen2 and not something only textgym can read.
    """
    rng = np.random.default_rng(seed)
    std = float(config["initializer_range"])
    d, f = config["hidden_size"], config["intermediate_size"]
    head_dim = d // config["num_attention_heads"]
    q_dim = config["num_attention_heads"] * head_dim
    kv_dim = config["num_key_value_heads"] * head_dim

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    weights = {"model.embed_tokens.weight": normal(config["vocab_size"], d)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        weights |= {
            p + "input_layernorm.weight": np.ones(d, np.float32),
            p + "self_attn.q_proj.weight": normal(q_dim, d),
            p + "self_attn.q_proj.bias": np.zeros(q_dim, np.float32),
            p + "self_attn.k_proj.weight": normal(kv_dim, d),
            p + "self_attn.k_proj.bias": np.zeros(kv_dim, np.float32),
            p + "self_attn.v_proj.weight": normal(kv_dim, d),
            p + "self_attn.v_proj.bias": np.zeros(kv_dim, np.float32),
            p + "self_attn.o_proj.weight": normal(d, q_dim),
            p + "post_attention_layernorm.weight": np.ones(d, np.float32),
            p + "mlp.gate_proj.weight": normal(f, d),
            p + "mlp.up_proj.weight": normal(f, d),
            p + "mlp.down_proj.weight": normal(d, f),
        }
    weights["model.norm.weight"] = np.ones(d, np.float32)
    return weights


def create(path: str | os.PathLike, seed: int = 0, size: TinySize | None = None, vocab: str = "bytes") -> Path:
    """Write a random tiny Qwen2 model and the built-in tokenizer to ``path``; return the path.

    Args:
        path: Directory to write (created if missing; existing model files are overwritten).
        seed: Seed of the weight init; the same seed gives identical weights everywhere.
        size: Model shape; ``TinySize()`` by default.
        vocab: The tokenizer: ``"bytes"`` or ``"bpe"`` (:func:`textgym.tokenizer.tiny_tokenizer`).
    """
    from textgym.tokenizer import tiny_tokenizer

    safetensors_numpy = require("safetensors.numpy", "tokens")
    size = size or TinySize()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_tokenizer(vocab)
    config = config_dict(size, tokenizer)
    safetensors_numpy.save_file(init_weights(config, seed), str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"], "pad_token_id": config["pad_token_id"]}
    (path / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n", encoding="utf-8")
    (path / "textgym_tiny.json").write_text(json.dumps(_stamp(seed, size, vocab), indent=2) + "\n", encoding="utf-8")
    tokenizer.save_pretrained(str(path))
    return path


def _stamp(seed: int, size: TinySize, vocab: str) -> dict[str, Any]:
    """What a created tiny model was made from (the byte vocabulary is left out, as before it had a name)."""
    return {"seed": seed, "size": asdict(size)} | ({} if vocab == "bytes" else {"vocab": vocab})


def resolve(
    model: str | os.PathLike, workdir: str | os.PathLike, seed: int = 0, size: TinySize | None = None, vocab: str = "bytes"
) -> Path:
    """The checkpoint directory a ``--model`` argument names: ``"tiny"`` is created under ``workdir``.

    A tiny model that already exists there (same seed and size) is reused, so a resumed run starts
    from the very weights the interrupted one started from.
    """
    if str(model) != NAME:
        path = Path(model)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"expected a Hugging Face model directory with config.json, got {str(model)!r}")
        return path
    path = Path(workdir) / "tiny-init"
    stamp = path / "textgym_tiny.json"
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == _stamp(seed, size or TinySize(), vocab):
        return path
    return create(path, seed=seed, size=size, vocab=vocab)
