"""A GGUF checkpoint dequantised into a float32 Hugging Face directory by transformers, which
reads GGUF files into torch modules (:func:`textgym.algos.models.convert_gguf` calls it once per file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers


def write_hf(gguf: Path, out: Path, progress: bool, say: Any) -> None:
    """Write ``gguf`` into ``out`` as a float32 HF directory: weights, tokenizer and chat template."""
    from_gguf = {"gguf_file": gguf.name}
    say("reading the tokenizer and chat template")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), **from_gguf)
    say("dequantising the weights to float32")
    bars = transformers.utils.logging
    shown = bars.is_progress_bar_enabled()
    (bars.enable_progress_bar if progress else bars.disable_progress_bar)()  # the dequantisation bar only
    try:
        loaded = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.float32, **from_gguf)
    finally:
        bars.disable_progress_bar()
    try:
        model = without_quantization(transformers, loaded)
        say(f"writing safetensors ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)")
        model.save_pretrained(str(out))
        tokenizer.save_pretrained(str(out))
    finally:
        (bars.enable_progress_bar if shown else bars.disable_progress_bar)()


def without_quantization(transformers: Any, loaded: Any) -> Any:
    """The loaded model rebuilt from its config minus ``quantization_config``, same weights."""
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a model carrying it cannot be saved; the weights are plain floats now
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    return model
