"""LoRA for the torch learner through peft, with the shared seeded initial adapters
(:mod:`textgym.algos.grpo.lora`), so that both backends start from the same weights."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import numpy as np
import torch

from textgym.algos.grpo import GRPOConfig
from textgym.algos.grpo.lora import MERGED, Adapter, init_adapters, lora_modules


def add_lora(model: torch.nn.Module, config: GRPOConfig) -> tuple[torch.nn.Module, list[str]]:
    """``model`` wrapped by peft with adapters on ``config.lora_targets`` (only they require
    gradients), loaded with :func:`~textgym.algos.grpo.lora.init_adapters`; and the adapted modules' names.

    Raises:
        ValueError: A target names no linear module.
    """
    from peft import LoraConfig, get_peft_model

    linear = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    modules = lora_modules(linear, config.lora_targets)
    peft_config = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules=sorted({m.rsplit(".", 1)[-1] for m in modules}),
    )
    wrapped = get_peft_model(model, peft_config)
    set_adapters(wrapped, init_adapters({m: tuple(linear[m].weight.shape) for m in modules}, config))
    return wrapped, modules


def checkpoint_name(parameter: str) -> str:
    """The name a checkpoint keys a trained parameter by: peft's file name for an adapter weight
    (``named_parameters`` adds the adapter's name, ``.lora_A.default.weight``), else the name as it is.

    Example:
        >>> checkpoint_name("base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight")
        'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight'
    """
    return re.sub(r"\.(lora_[AB])\.default\.weight$", r".\1.weight", parameter)


def get_adapters(model: torch.nn.Module, modules: list[str]) -> dict[str, Adapter]:
    """The adapters' ``(A, B)`` as float32 numpy arrays."""
    out = {}
    for name in modules:
        layer = model.base_model.model.get_submodule(name)
        out[name] = tuple(w["default"].weight.detach().float().cpu().numpy().copy() for w in (layer.lora_A, layer.lora_B))
    return out


def set_adapters(model: torch.nn.Module, adapters: dict[str, Adapter]) -> None:
    """Copy ``adapters`` into the peft model's LoRA weights, in place (the optimiser keeps its tensors)."""
    with torch.no_grad():
        for name, (a, b) in adapters.items():
            layer = model.base_model.model.get_submodule(name)
            layer.lora_A["default"].weight.copy_(torch.from_numpy(np.asarray(a)))
            layer.lora_B["default"].weight.copy_(torch.from_numpy(np.asarray(b)))


def export_merged(model: torch.nn.Module, tokenizer, directory: str | os.PathLike) -> None:
    """``directory/merged``: the adapter folded into a copy of the base weights, as a plain HF directory."""
    merged = copy.deepcopy(model).merge_and_unload()
    out = Path(directory) / MERGED
    merged.save_pretrained(str(out))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(out))
