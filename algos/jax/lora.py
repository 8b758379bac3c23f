"""LoRA for the JAX learner through Flax NNX: the decoder is built with
:class:`~textgym.algos.jax.transformer.ScaledLoRALinear` (``nnx.LoRALinear``) on ``config.lora_targets``,
and the ``nnx.LoRAParam`` variables are all the learner differentiates and optimises.

An adapter's ``lora_a`` ``(in, r)`` and ``lora_b`` ``(r, out)`` are peft's ``A.T`` and ``B.T``; the
scale ``lora_alpha / r`` multiplies the adapter's output inside the layer, as in peft. The initial
weights and the file format are shared with torch (:mod:`textgym.algos.grpo.lora`).
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from textgym.algos.grpo import GRPOConfig
from textgym.algos.grpo.lora import Adapter, init_adapters, lora_modules
from textgym.algos.jax.config import ModelConfig
from textgym.algos.jax.params import flat_tree, path_to_hf, unflat_tree
from textgym.algos.jax.transformer import CausalLM, LoraSpec

_FACTORS = ("lora_a", "lora_b")  # nnx.LoRA's names of peft's A and B (each stored transposed)


def linear_shapes(params: dict) -> dict[str, tuple[int, int]]:
    """Every linear layer's Hugging Face module name and torch weight shape ``(out, in)``."""
    shapes = {}
    for path, leaf in flat_tree(params).items():
        if path[-1] == "kernel":
            shapes[path_to_hf(path)[0].removesuffix(".weight")] = tuple(np.shape(leaf))[::-1]
    return shapes


def adapter_module(path: tuple) -> tuple[str, int]:
    """The Hugging Face module and the factor (0: ``A``, 1: ``B``) of an adapter's parameter path.

    Example:
        >>> adapter_module(("layers", 0, "self_attn", "q_proj", "lora", "lora_b"))
        ('model.layers.0.self_attn.q_proj', 1)
    """
    return path_to_hf((*path[:-2], "kernel"))[0].removesuffix(".weight"), _FACTORS.index(path[-1])


def add_lora(model_config: ModelConfig, params: dict, config: GRPOConfig) -> tuple[nnx.GraphDef, dict]:
    """The decoder's graph with adapters on ``config.lora_targets``, and their seeded initial
    weights (the ``nnx.LoRAParam`` tree; ``params``, the base tree, fills the rest of the graph).

    Raises:
        ValueError: A target names no linear module.
    """
    shapes = linear_shapes(params)
    adapters = init_adapters({m: shapes[m] for m in lora_modules(shapes, config.lora_targets)}, config)
    spec = LoraSpec(config.lora_rank, config.lora_scale, tuple(config.lora_targets))
    model = nnx.eval_shape(lambda: CausalLM(model_config, lora=spec, rngs=nnx.Rngs(0)))
    graphdef, lora, _ = nnx.split(model, nnx.LoRAParam, ...)
    return graphdef, from_peft(adapters, nnx.to_pure_dict(lora))


def from_peft(adapters: dict[str, Adapter], like: dict) -> dict:
    """peft's ``{module: (A, B)}`` as a tree shaped like the ``nnx.LoRAParam`` tree ``like`` (float32 numpy)."""
    flat = {}
    for path in flat_tree(like):
        module, factor = adapter_module(path)
        flat[path] = np.asarray(adapters[module][factor], np.float32).T
    return unflat_tree(flat)


def to_peft(lora: dict) -> dict[str, Adapter]:
    """The ``nnx.LoRAParam`` tree as peft's ``{module: (A (r, in), B (out, r))}``."""
    adapters: dict[str, list] = {}
    for path, leaf in flat_tree(lora).items():
        module, factor = adapter_module(path)
        adapters.setdefault(module, [None, None])[factor] = np.asarray(leaf).T
    return {m: tuple(pair) for m, pair in adapters.items()}


def merge_lora(base: dict, lora: dict, scale: float) -> dict:
    """``base`` with each adapter folded into its kernel, ``kernel + scale * lora_a @ lora_b``
    (peft's ``merge_and_unload``; float32 numpy): the plain weights of a merged export."""
    flat = {path: np.asarray(leaf, np.float32) for path, leaf in flat_tree(base).items()}
    adapters = {path: np.asarray(leaf, np.float32) for path, leaf in flat_tree(lora).items()}
    for path, a in adapters.items():
        if path[-1] == "lora_a":
            kernel = (*path[:-2], "kernel")
            flat[kernel] = flat[kernel] + scale * (a @ adapters[(*path[:-1], "lora_b")])
    return unflat_tree(flat)
