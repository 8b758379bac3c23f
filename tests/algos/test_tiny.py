"""The tiny preset: a deterministic, offline HF directory that transformers loads as a Qwen2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textgym.algos.models import tiny

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path):
    a = tiny.create(tmp_path / "a", seed=3, size=SMALL)
    b = tiny.create(tmp_path / "b", seed=3, size=SMALL)
    c = tiny.create(tmp_path / "c", seed=4, size=SMALL)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (a / name).is_file(), name


def test_config_matches_tokenizer_and_size(tmp_path):
    from textgym.tokenizer import tiny_tokenizer

    path = tiny.create(tmp_path, size=SMALL)
    config = json.loads((path / "config.json").read_text())
    tok = tiny_tokenizer()
    assert config["model_type"] == "qwen2"
    assert config["vocab_size"] == len(tok)
    assert config["eos_token_id"] == tok.convert_tokens_to_ids("<|im_end|>")
    assert config["pad_token_id"] == tok.pad_token_id
    assert config["hidden_size"] == SMALL.hidden_size and config["num_hidden_layers"] == SMALL.num_hidden_layers


def test_transformers_loads_every_weight_and_tokenizer_round_trips(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from safetensors.numpy import load_file

    path = tiny.create(tmp_path, seed=1, size=SMALL)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    saved = load_file(str(path / "model.safetensors"))
    state = model.state_dict()
    assert set(state) - set(saved) == {"lm_head.weight"}  # tied to the embeddings
    for name, value in saved.items():
        np.testing.assert_array_equal(state[name].numpy(), value)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    text = tok.apply_chat_template([{"role": "user", "content": "4x4 sudoku"}], tokenize=False, add_generation_prompt=True)
    assert tok.decode(tok.encode(text)) == text


def test_resolve_creates_tiny_once_and_accepts_hf_dirs(tmp_path):
    first = tiny.resolve("tiny", tmp_path, seed=0, size=SMALL)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert tiny.resolve("tiny", tmp_path, seed=0, size=SMALL) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rewritten
    assert tiny.resolve(first, tmp_path / "other") == first
    with pytest.raises(FileNotFoundError, match="config.json"):
        tiny.resolve(tmp_path / "nope", tmp_path)
