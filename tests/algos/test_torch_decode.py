"""The torch sampler's own decode step gives transformers' forward, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.algos.tiny_batches import SMALL
from textgym.algos.models import tiny
from textgym.algos.torch import decode, load_model
from textgym.algos.torch.sampler import generate


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2
    )
    model = LlamaForCausalLM(config).eval()
    model.config._attn_implementation = "sdpa"
    return model


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    return load_model(tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)).model.eval()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("lengths", [(7, 7, 7), (3, 9, 5)], ids=["equal", "padded"])
def test_the_decode_step_samples_what_the_models_forward_samples(arch, lengths, qwen2, monkeypatch):
    model = qwen2 if arch == "qwen2" else llama()
    assert decode.supports(model)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(4, 250, n).astype(np.int32) for n in lengths]

    def sample():
        return generate(model, prompts, 12, 1.0, 5, top_p=1.0, stop_ids=[], eos_ids=[], pad_id=0)

    ours = sample()
    monkeypatch.setattr(decode, "supports", lambda _model: False)  # transformers' forward at every step
    theirs = sample()
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_models_keep_their_own_forward(qwen2):
    qwen2.config._attn_implementation = "eager"
    try:
        assert not decode.supports(qwen2)
    finally:
        qwen2.config._attn_implementation = "sdpa"
