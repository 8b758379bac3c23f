"""LoRA adapters as both backends share them: which modules get one, their seeded initial
weights, and peft's on-disk format.

An adapter on a linear layer with weight ``W`` ``(out, in)`` is ``A`` ``(r, in)`` and ``B``
``(out, r)``; the layer computes ``x @ (W + s * B @ A).T`` with ``s = lora_alpha / r``. The initial
weights come from numpy (``A`` uniform in ``±1/sqrt(in)``, peft's Kaiming bound, from the run's
seed tree; ``B = 0``, so training starts at the base model), and each backend loads the same
arrays: from one ``GRPOConfig.seed`` the JAX and torch learners start from identical adapters.

Files (peft's layout, so ``PeftModel.from_pretrained(base, directory)`` loads what either backend
writes)::

    adapter_config.json          {"peft_type": "LORA", "r", "lora_alpha", "target_modules", ...}
    adapter_model.safetensors    base_model.model.<module>.lora_A.weight / .lora_B.weight
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.seeds import SeedTree
from textgym.error import CheckpointMismatch

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"
_PREFIX = "base_model.model."

# One adapter: (A (r, in), B (out, r)), float32.
Adapter = tuple[np.ndarray, np.ndarray]


def lora_modules(linear_modules: Iterable[str], targets: Iterable[str]) -> list[str]:
    """The modules (Hugging Face names such as ``model.layers.0.self_attn.q_proj``) whose last name is a target.

    Raises:
        ValueError: A target names no module of the model (one line, naming it).

    Example:
        >>> lora_modules(["model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up_proj", "lm_head"], ["q_proj"])
        ['model.layers.0.self_attn.q_proj']
    """
    linear_modules = list(linear_modules)
    targets = list(targets)
    found = [m for m in linear_modules if m.rsplit(".", 1)[-1] in targets]
    names = {m.rsplit(".", 1)[-1] for m in linear_modules}
    unknown = [t for t in targets if t not in names]
    if unknown:
        raise ValueError(f"lora target {', '.join(unknown)} names no linear module of the model (it has {', '.join(sorted(names))})")
    return found


def init_adapters(shapes: dict[str, tuple[int, int]], config: GRPOConfig) -> dict[str, Adapter]:
    """Seeded initial adapters for modules with weight shapes ``(out, in)``: ``A`` uniform in
    ``±1/sqrt(in)`` (peft's ``kaiming_uniform_(a=sqrt(5))`` bound), ``B = 0``."""
    rng = np.random.default_rng(SeedTree(config.seed).seed("lora_init"))
    adapters = {}
    for module in sorted(shapes):
        out, fan_in = shapes[module]
        bound = 1.0 / np.sqrt(fan_in)
        a = rng.uniform(-bound, bound, (config.lora_rank, fan_in)).astype(np.float32)
        adapters[module] = (a, np.zeros((out, config.lora_rank), np.float32))
    return adapters


def adapter_names(module: str) -> tuple[str, str]:
    """peft's tensor names of ``module``'s ``A`` and ``B`` (the names a checkpoint keys them by).

    Example:
        >>> adapter_names("model.layers.0.self_attn.q_proj")[0]
        'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'
    """
    return f"{_PREFIX}{module}.lora_A.weight", f"{_PREFIX}{module}.lora_B.weight"


def save_adapter(directory: str | os.PathLike, adapters: dict[str, Adapter], config: GRPOConfig, base: str | os.PathLike) -> None:
    """Write ``adapters`` in peft's format; ``base`` is recorded as ``base_model_name_or_path``."""
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for module, (a, b) in adapters.items():
        tensors |= {name: np.ascontiguousarray(x, np.float32) for name, x in zip(adapter_names(module), (a, b))}
    save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    peft_config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(base),
        "r": config.lora_rank,
        "lora_alpha": config.lora_alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": sorted({m.rsplit(".", 1)[-1] for m in adapters}),
        "inference_mode": True,
    }
    (directory / ADAPTER_CONFIG).write_text(json.dumps(peft_config, indent=2) + "\n", encoding="utf-8")


def load_adapter(directory: str | os.PathLike, expected: dict[str, Adapter]) -> dict[str, Adapter]:
    """Read a peft adapter; it must hold exactly ``expected``'s modules and shapes.

    Raises:
        CheckpointMismatch: Missing, unexpected or mis-shaped adapter weights.
    """
    from safetensors.numpy import load_file

    path = Path(directory) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise CheckpointMismatch(f"lora_rank > 0 but {str(directory)!r} holds no {ADAPTER_WEIGHTS}")
    tensors = load_file(str(path))
    keys = {name: x.shape for m, pair in expected.items() for name, x in zip(adapter_names(m), pair)}
    missing, unexpected = sorted(keys.keys() - tensors.keys()), sorted(tensors.keys() - keys.keys())
    shapes = sorted(k for k in keys.keys() & tensors.keys() if tuple(tensors[k].shape) != tuple(keys[k]))
    if missing or unexpected or shapes:
        raise CheckpointMismatch(
            f"adapter in {str(directory)!r} does not match: missing={missing[:3]}, unexpected={unexpected[:3]}, mis-shaped={shapes[:3]}"
        )
    return {m: (tensors[adapter_names(m)[0]], tensors[adapter_names(m)[1]]) for m in expected}
