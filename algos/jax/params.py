"""Hugging Face safetensors <-> the NNX decoder's parameters, through one declarative table.

Each row of :data:`KEY_MAP` pairs a checkpoint name with a module path (``{layer}`` and
``{name}`` are wildcards) and says whether the matrix is transposed (torch ``Linear`` stores
``(out, in)``, ``nnx.Linear`` ``(in, out)``). Loading is strict: a checkpoint key that no row
maps, a parameter that no key fills and a shape that differs all raise ``ValueError`` naming the
key, so a model is never silently left at its random initialisation. Exporting runs the same table
backwards.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Any

import jax
import numpy as np
from flax import nnx
from safetensors.numpy import load_file, save_file

from textgym.algos.grpo.learner import is_trainable
from textgym.algos.jax.config import ModelConfig
from textgym.algos.jax.transformer import CausalLM

# (HF checkpoint name, NNX parameter path, transpose)
KEY_MAP: tuple[tuple[str, str, bool], ...] = (
    ("model.embed_tokens.weight", "embed_tokens.embedding", False),
    ("model.norm.weight", "norm.weight", False),
    ("lm_head.weight", "lm_head.kernel", True),
    ("model.layers.{layer}.input_layernorm.weight", "layers.{layer}.input_layernorm.weight", False),
    ("model.layers.{layer}.post_attention_layernorm.weight", "layers.{layer}.post_attention_layernorm.weight", False),
    ("model.layers.{layer}.self_attn.{name}_proj.weight", "layers.{layer}.self_attn.{name}_proj.kernel", True),
    ("model.layers.{layer}.self_attn.{name}_proj.bias", "layers.{layer}.self_attn.{name}_proj.bias", False),
    ("model.layers.{layer}.self_attn.{name}_norm.weight", "layers.{layer}.self_attn.{name}_norm.weight", False),
    ("model.layers.{layer}.mlp.{name}_proj.weight", "layers.{layer}.mlp.{name}_proj.kernel", True),
    ("model.layers.{layer}.mlp.{name}_proj.bias", "layers.{layer}.mlp.{name}_proj.bias", False),
)

# Files copied next to exported weights so the directory stays a complete checkpoint.
_SIDE_FILES = (
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "tokenizer.model",
    "added_tokens.json",
)


def _pattern(template: str) -> re.Pattern[str]:
    regex = re.escape(template).replace(r"\{layer\}", r"(?P<layer>\d+)").replace(r"\{name\}", r"(?P<name>[a-z]+)")
    return re.compile(regex + "$")


_FORWARD = [(_pattern(hf), path, t) for hf, path, t in KEY_MAP]
_BACKWARD = [(_pattern(path), hf, t) for hf, path, t in KEY_MAP]


def hf_to_path(name: str) -> tuple[tuple[str | int, ...], bool] | None:
    """``("layers", 0, "self_attn", "q_proj", "kernel"), transpose`` for a checkpoint name, or None."""
    for pattern, template, transpose in _FORWARD:
        m = pattern.match(name)
        if m:
            dotted = template.format(**m.groupdict())
            return tuple(int(p) if p.isdigit() else p for p in dotted.split(".")), transpose
    return None


def path_to_hf(path: tuple[Any, ...]) -> tuple[str, bool]:
    """The checkpoint name (and transpose flag) of a parameter path."""
    dotted = ".".join(str(p) for p in path)
    for pattern, template, transpose in _BACKWARD:
        m = pattern.match(dotted)
        if m:
            return template.format(**m.groupdict()), transpose
    raise ValueError(f"no checkpoint name for parameter {dotted}")


def abstract_model(config: ModelConfig) -> tuple[nnx.GraphDef, dict]:
    """The model's graph and its parameters' shapes, without allocating or initialising them."""
    graphdef, state = nnx.split(nnx.eval_shape(lambda: CausalLM(config, rngs=nnx.Rngs(0))))
    return graphdef, nnx.to_pure_dict(state)


def flat_tree(tree: dict) -> dict[tuple, Any]:
    """A parameter tree as ``{path: leaf}`` (paths as tuples of keys)."""
    return {tuple(k.key for k in path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def unflat_tree(flat: dict[tuple, Any]) -> dict:
    """The nested tree of :func:`flat_tree`'s ``{path: leaf}``."""
    tree: dict = {}
    for path, leaf in flat.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = leaf
    return tree


def load_params(path: str | os.PathLike, config: ModelConfig) -> dict:
    """Read every ``*.safetensors`` file of ``path`` into the decoder's parameter tree (float32 numpy).

    Raises:
        FileNotFoundError: No safetensors file in ``path``.
        ValueError: An unmapped, duplicate, missing or mis-shaped key.
    """
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"no *.safetensors file in {path}")
    _, shapes = abstract_model(config)
    expected = {p: tuple(s.shape) for p, s in flat_tree(shapes).items()}
    loaded: dict[tuple, np.ndarray] = {}
    tied_head = None
    for file in files:
        for name, tensor in load_file(file).items():
            if config.tie_embeddings and name == "lm_head.weight":
                tied_head = tensor  # some exporters write the tied head out; it must equal the embedding
                continue
            mapped = hf_to_path(name)
            if mapped is None or mapped[0] not in expected:
                raise ValueError(f"checkpoint key {name!r} ({os.path.basename(file)}) maps to no parameter of this {config.family} model")
            target, transpose = mapped
            array = np.asarray(tensor, dtype=np.float32)
            array = array.T if transpose else array
            if target in loaded:
                raise ValueError(f"checkpoint key {name!r} appears twice")
            if array.shape != expected[target]:
                raise ValueError(f"checkpoint key {name!r} has shape {array.shape}, the model expects {expected[target]}")
            loaded[target] = np.ascontiguousarray(array)
    missing = sorted(".".join(map(str, p)) for p in expected.keys() - loaded.keys())
    if missing:
        raise ValueError(f"checkpoint {path} lacks {len(missing)} parameters, e.g. {missing[:5]}")
    if tied_head is not None and not np.array_equal(np.asarray(tied_head, np.float32), loaded[("embed_tokens", "embedding")]):
        raise ValueError("tie_word_embeddings is set but lm_head.weight differs from the embedding")
    return unflat_tree(loaded)


def split_trainable(params: dict, trainable_layers: int | None) -> tuple[dict, dict]:
    """``(trained, frozen)``: the parameter tree cut by :func:`~textgym.algos.grpo.learner.is_trainable`
    (``trainable_layers=None``: all of it trained); :func:`merge_trees` puts the halves back together.

    The learner differentiates and optimises only ``trained``, so XLA never builds the frozen
    weights' gradients nor the backward pass below the lowest trained layer.
    """
    if trainable_layers is None:
        return params, {}
    flat = flat_tree(params)
    layers = len(params["layers"])
    keep = {p: is_trainable(path_to_hf(p)[0], layers, trainable_layers) for p in flat}
    return unflat_tree({p: x for p, x in flat.items() if keep[p]}), unflat_tree({p: x for p, x in flat.items() if not keep[p]})


def merge_trees(a: dict, b: dict) -> dict:
    """The union of two parameter trees with disjoint leaves (the inverse of :func:`split_trainable`)."""
    out = dict(a)
    for key, value in b.items():
        out[key] = merge_trees(out[key], value) if key in out else value
    return out


def export_params(params: dict, config: ModelConfig, out_dir: str | os.PathLike, source_dir: str | os.PathLike | None = None) -> None:
    """Write a Hugging Face directory: ``config.json``, ``model.safetensors`` (float32) and side files.

    Args:
        params: The decoder's parameter tree.
        config: Its architecture (``config.json`` is written from ``config.hf_config``).
        out_dir: Created if needed; safetensors files already there are replaced.
        source_dir: Where tokenizer and generation files are copied from, if given.
    """
    os.makedirs(out_dir, exist_ok=True)
    for stale in glob.glob(os.path.join(out_dir, "*.safetensors")) + glob.glob(os.path.join(out_dir, "*.safetensors.index.json")):
        os.remove(stale)  # an older export's shards would otherwise be loaded alongside the new file
    tensors = {}
    for path, leaf in flat_tree(params).items():
        name, transpose = path_to_hf(path)
        array = np.asarray(jax.device_get(leaf), dtype=np.float32)
        tensors[name] = np.ascontiguousarray(array.T if transpose else array)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    hf = dict(config.hf_config) | {"torch_dtype": "float32", "dtype": "float32"}
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(hf, fh, indent=2, sort_keys=True)
    if source_dir is not None:
        copy_side_files(source_dir, out_dir)


def copy_side_files(source_dir: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    """Copy the tokenizer and generation files of ``source_dir`` into ``out_dir``."""
    if os.path.abspath(source_dir) != os.path.abspath(out_dir):
        for name in _SIDE_FILES:
            src = os.path.join(source_dir, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(out_dir, name))
