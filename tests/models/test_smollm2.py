"""SmolLM2-135M-Instruct end to end: GGUF -> cached HF directory -> both backends, train and eval.

Slow: the conversion dequantises 134.5M parameters (~30 s) once per session, and every test
loads the model in a backend (~1-3 min of CPU each on two shared cores).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from textgym.algos import models
from textgym.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:the chat template")]
SUDOKU = ["--env", "textgym/Sudoku-v0", "--env-kwargs", json.dumps({"size": 4, "blanks": 1, "max_turns": 1})]


def batch(tokenizer):
    texts = ["<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n2 + 3 = 5", "Hello"]
    rows = [tokenizer.encode(t) for t in texts]
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), np.int32)
    mask = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1  # right padding
    return ids, mask


def reference_logprobs(smollm2_gguf, ids, mask):
    """transformers' own model, loaded from the GGUF file (not from textgym's conversion)."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, dtype=torch.float32)
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(ids, dtype=torch.long), attention_mask=torch.as_tensor(mask)).logits
    lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, torch.as_tensor(ids[:, 1:], dtype=torch.long)[..., None])[..., 0]
    out = np.zeros(ids.shape, np.float64)
    out[:, 1:] = lp.numpy()
    return out * mask * np.pad(mask[:, :-1], ((0, 0), (1, 0)))


def test_the_converted_directory_matches_transformers_in_both_backends(smollm2_gguf, smollm2_dir, tmp_path):
    names = {p.name for p in smollm2_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "generation_config.json"} <= names
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    stamp = (smollm2_dir / "model.safetensors").stat().st_mtime_ns
    assert models.resolve(models.SMOLLM2, progress=False) == smollm2_dir  # cached: not converted again
    assert (smollm2_dir / "model.safetensors").stat().st_mtime_ns == stamp

    from textgym.algos import jax as jax_backend
    from textgym.algos import torch as torch_backend

    tokenizer = models.load_tokenizer(smollm2_dir)
    ids, mask = batch(tokenizer)
    want = reference_logprobs(smollm2_gguf, ids, mask)
    bare = tmp_path / "weights-only"  # the same weights without tokenizer files load in both backends
    bare.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (bare / name).symlink_to(smollm2_dir / name)
    for backend in (torch_backend, jax_backend):
        for path in (smollm2_dir, bare):
            got = backend.load_model(path).logprobs(ids, mask)
            assert np.abs(got - want).max() < 1e-4, (backend.__name__, path.name)


def test_greedy_answers_like_the_model_card(smollm2_dir):
    from textgym.algos import torch as torch_backend

    tokenizer = models.load_tokenizer(smollm2_dir)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], tokenize=False, add_generation_prompt=True)
    ids, _ = torch_backend.load_model(smollm2_dir).generate([np.asarray(tokenizer.encode(prompt), np.int32)], 16, temperature=0.0)
    assert "5" in tokenizer.decode(ids[0].tolist())


@pytest.mark.timeout(1800)  # two SFT steps of 16 demonstrations and two GRPO steps of 135M parameters on a CPU
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_two_step_train_from_the_preset(backend, smollm2_cache, tmp_path, capsys):
    out = tmp_path / "run"
    # The compact template (no system turn) keeps the sequences at ~200 tokens instead of ~750.
    args = [
        "train",
        *SUDOKU,
        "--model",
        "smollm2-135m",
        "--backend",
        backend,
        "--output-dir",
        str(out),
        "--steps",
        "2",
        "--chat-template",
        "compact",
        "--prompts-per-step",
        "1",
        "--group-size",
        "2",
        "--max-new-tokens",
        "4",
        "--max-length",
        "1024",
        "--micro-batch-size",
        "2",
        "--eval-episodes",
        "1",
        "--eval-every",
        "2",
        "--sft-steps",
        "2",
        "--sft-demos",
        "16",  # the preset's demonstrator guesses each blank: 2 demos could all be wrong, and the warm start refuses that
        "--threads",
        "1",
        "--no-plot",
        "--no-progress",
    ]
    assert main(args) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["after"]["step"] == 2
    from safetensors.numpy import load_file

    start, final = load_file(str(models.resolve(models.SMOLLM2) / "model.safetensors")), load_file(str(out / "final" / "model.safetensors"))
    assert any(not np.array_equal(start[k], final[k]) for k in start)  # the SFT steps moved the weights
    assert models.has_tokenizer(out / "final")


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_two_episode_eval_of_the_preset(backend, smollm2_cache, tmp_path, capsys):
    jsonl = tmp_path / "rollouts.jsonl"
    args = [
        "eval",
        "textgym/Sudoku-v0",
        "--env-kwargs",
        json.dumps({"size": 4, "blanks": 1, "max_turns": 1}),
        "--policy",
        "random",
        "--policy",
        "model:smollm2-135m",
        "--backend",
        backend,
        "--episodes",
        "2",
        "--num-envs",
        "2",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--threads",
        "1",
        "--out",
        str(jsonl),
    ]
    assert main(args) == 0, capsys.readouterr().err
    assert "model:smollm2-135m" in capsys.readouterr().out
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    mine = [r for r in records if r["policy"] == "model:smollm2-135m"]
    assert len(mine) == 2 and all(1 <= sum(r["loss_mask"]) <= 8 for r in mine)
    assert {r["seed"] for r in mine} == {r["seed"] for r in records if r["policy"] == "random"}
