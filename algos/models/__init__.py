"""Model files: what ``--model`` names, resolved to a Hugging Face directory
(:mod:`~textgym.algos.models.resolve`), the offline ``tiny`` preset (:mod:`~textgym.algos.models.tiny`),
pinned downloads (:mod:`~textgym.algos.models.fetch`) and the checks that make a broken file one
clear line (:mod:`~textgym.algos.models.files`)."""

from textgym.algos.models.resolve import (
    PRESETS,
    SMOLLM2,
    SMOLLM2_GGUF,
    cache_dir,
    convert_gguf,
    has_tokenizer,
    load_tokenizer,
    quiet_transformers,
    resolve,
    smollm2_gguf,
)

__all__ = [
    "PRESETS",
    "SMOLLM2",
    "SMOLLM2_GGUF",
    "cache_dir",
    "convert_gguf",
    "has_tokenizer",
    "load_tokenizer",
    "quiet_transformers",
    "resolve",
    "smollm2_gguf",
]
