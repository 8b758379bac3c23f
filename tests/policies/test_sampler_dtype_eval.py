"""``textgym eval --sampler-dtype bfloat16``: a ``model:`` policy samples from a bf16 cast of its
weights in either backend, and the logprobs it records stay close to float32's on the same tokens."""

import json

import numpy as np
import pytest

from textgym.cli import main
from textgym.rollout import Rollout

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # a backend import and the tiny model per case

SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
# bf16 keeps 8 mantissa bits: on this small tiny model, eval's bf16 logprobs stay this close to
# float32 teacher forcing of the same tokens (tests/algos/test_samplers.py states the same bound).
BF16_MAX, BF16_MEAN = 0.01, 0.003


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_eval_samples_in_bfloat16_within_a_stated_distance_of_float32(tmp_path, capsys, backend):
    pytest.importorskip(backend)
    from textgym.algos.backends import load_backend
    from textgym.algos.models import tiny

    model, out = tiny.create(tmp_path / "tiny", seed=0, size=tiny.TinySize(**SMALL)), tmp_path / "bf16.jsonl"
    kwargs = '{"size": 4, "blanks": 1, "max_turns": 2}'
    argv = ["eval", "textgym/Sudoku-v0", "--policy", f"model:{model}", "--episodes", "2", "--num-envs", "2", "--env-kwargs", kwargs]
    argv += ["--backend", backend, "--threads", "1", "--max-tokens", "12", "--sampler-dtype", "bfloat16", "--out", str(out)]
    assert main(argv) == 0
    rollouts = [Rollout.from_dict(json.loads(line)) for line in out.read_text().splitlines()]
    float32 = load_backend(backend).load_model(model)
    errors = []
    for r in rollouts:
        sampled = r.loss_mask.astype(bool)
        scored = float32.logprobs(r.token_ids[None], np.ones((1, r.token_ids.size), np.int32))[0]
        errors.append(np.abs(scored[sampled] - r.logprobs[sampled]))
    error = np.concatenate(errors)
    assert error.size > 0 and error.max() < BF16_MAX and error.mean() < BF16_MEAN, (error.max(), error.mean())
    assert error.max() > 1e-6  # it did sample in bf16


def test_an_unknown_sampler_dtype_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "textgym/Sudoku-v0", "--policy", "model:tiny", "--sampler-dtype", "float16"])
    assert exit_.value.code == 2 and "--sampler-dtype" in capsys.readouterr().err
