"""LoRA for the JAX learner: adapters kept apart from the frozen base tree and folded into the
kernels inside the jitted forward (``kernel + s * A.T @ B.T``, the same function as a LoRA layer's
``x @ kernel + s * x @ A.T @ B.T``), so the decoder, its compilation and the sampler stay as they
are. Gradients reach only the adapters; the initial weights and the file format are shared with
torch (:mod:`textgym.algos.grpo.lora`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from textgym.algos.grpo import GRPOConfig
from textgym.algos.grpo.lora import Adapter, init_adapters, lora_modules
from textgym.algos.jax.params import flat_tree, hf_to_path, path_to_hf, unflat_tree


def linear_shapes(params: dict) -> dict[str, tuple[int, int]]:
    """Every linear layer's Hugging Face module name and torch weight shape ``(out, in)``."""
    shapes = {}
    for path, leaf in flat_tree(params).items():
        if path[-1] == "kernel":
            shapes[path_to_hf(path)[0].removesuffix(".weight")] = tuple(np.shape(leaf))[::-1]
    return shapes


def initial_adapters(params: dict, config: GRPOConfig) -> dict[str, Adapter]:
    """The seeded adapters of ``config.lora_targets`` (the ones the torch backend starts from too).

    Raises:
        ValueError: A target names no linear module.
    """
    shapes = linear_shapes(params)
    return init_adapters({m: shapes[m] for m in lora_modules(shapes, config.lora_targets)}, config)


def apply_lora(base: dict, adapters: dict, scale: float) -> dict:
    """``base`` with each adapted kernel ``W`` ``(in, out)`` replaced by ``W + scale * A.T @ B.T``."""
    flat = flat_tree(base)
    for module, (a, b) in adapters.items():
        path = hf_to_path(module + ".weight")[0]
        flat[path] = flat[path] + scale * jnp.matmul(a.T, b.T, precision=jax.lax.Precision.HIGHEST)
    return unflat_tree(flat)
