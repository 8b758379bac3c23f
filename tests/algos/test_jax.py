"""The JAX backend against transformers and against the numpy GRPO reference.

Checkpoints are tiny random models that transformers creates and saves in the test (torch is
needed only for that and for the parity oracle).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

if "jax" not in sys.modules:  # compile faster: these graphs are tiny, XLA's heavy passes buy nothing
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    )

import numpy as np
import pytest

pytest.importorskip("jax")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax
import jax.numpy as jnp
from safetensors.numpy import load_file, save_file

from tests.algos.tiny_batches import SMALL, multi_turn_rollouts
from textgym.algos.grpo import GRPOConfig, fine_bucket, grpo_loss, pack
from textgym.algos.grpo.prompts import split_prompts
from textgym.algos.jax import Learner, load_model, sampler
from textgym.algos.jax import loss as jax_loss
from textgym.algos.jax.learner import _logprobs, scored_slots
from textgym.algos.jax.transformer import attend, scored_positions
from textgym.algos.models import tiny as textgym_tiny
from textgym.draws import call_uniforms
from textgym.rollout import Rollout

REPO = str(Path(__file__).resolve().parents[2])
VOCAB = 61
SIZES = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    eos_token_id=3,
    pad_token_id=0,
    bos_token_id=1,
)
FAMILIES = {
    # Llama 3.1 RoPE scaling with a short original context, so the scaled bands matter; all biases on.
    "llama": lambda **kw: transformers.LlamaConfig(
        **SIZES | kw,
        attention_bias=True,
        mlp_bias=True,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
    "qwen2": lambda **kw: transformers.Qwen2Config(**SIZES | kw, tie_word_embeddings=True),  # q/k/v bias, tied head
    "qwen3": lambda **kw: transformers.Qwen3Config(**SIZES | kw, head_dim=16),  # q/k norm, head_dim != hidden/heads
}


def save_tiny(family: str, path, seed: int = 0, layers: int = 2):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(FAMILIES[family](num_hidden_layers=layers)).float().eval()
    with torch.no_grad():  # HF's init leaves norms at 1 and biases at 0: perturb so every weight matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(path)
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    return {f: (str(root / f), save_tiny(f, root / f)) for f in FAMILIES}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A one-layer Qwen2 for the sampler and learner tests (compiles twice as fast)."""
    path = tmp_path_factory.mktemp("small")
    return str(path), save_tiny("qwen2", path, seed=1, layers=1)


@pytest.fixture(scope="module")
def tiny(small):
    return small[0]


def hf_logprobs(model, ids, mask):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits
    lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, torch.tensor(ids[:, 1:, None], dtype=torch.long))
    return np.pad(lp[..., 0].numpy() * mask[:, 1:], ((0, 0), (1, 0)))


def random_ids(seed, b=3, t=21):
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, VOCAB, (b, t)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    mask[2, 6:] = 0
    return np.where(mask > 0, ids, 0), mask


# --- model and weights --------------------------------------------------------------------------


def test_importing_the_packages_does_not_import_jax():
    code = "import sys, textgym.algos, textgym.algos.grpo, textgym.algos.jax; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ | {"PYTHONPATH": REPO})


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logprobs_equal_transformers(checkpoints, family):
    path, model = checkpoints[family]
    ids, mask = random_ids(1)
    lp = load_model(path).logprobs(ids, mask)
    assert lp.shape == ids.shape and lp.dtype == np.float32
    np.testing.assert_allclose(lp, hf_logprobs(model, ids, mask), atol=1e-4)
    assert np.all(lp[mask == 0] == 0) and np.all(lp[:, 0] == 0)


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default"},
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    ],
)
def test_rope_frequencies_equal_transformers(rope):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from textgym.algos.jax.config import ModelConfig
    from textgym.algos.jax.transformer import rope_inv_freq

    hf = transformers.LlamaConfig(**SIZES, head_dim=64, rope_parameters=rope | {"rope_theta": 500000.0})
    if rope["rope_type"] == "default":
        expected, _ = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(hf)
    else:
        expected, _ = ROPE_INIT_FUNCTIONS[rope["rope_type"]](hf)
    ours = rope_inv_freq(ModelConfig.from_hf(hf.to_dict()))
    np.testing.assert_allclose(ours, expected.numpy(), rtol=1e-6)


def test_left_and_right_padding_give_the_same_logprobs(checkpoints):
    policy = load_model(checkpoints["qwen3"][0])
    ids, mask = random_ids(2)
    right = policy.logprobs(ids, mask)
    lengths = mask.sum(1)
    left_ids = np.zeros_like(ids)
    left_mask = np.zeros_like(mask)
    for i, n in enumerate(lengths):
        left_ids[i, -n:], left_mask[i, -n:] = ids[i, :n], 1
    left = policy.logprobs(left_ids, left_mask)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(left[i, -n + 1 :], right[i, 1:n], atol=1e-5)


def _corrupt(src, dst, edit):
    os.makedirs(dst)
    for name in ("config.json",):
        with open(os.path.join(src, name)) as a, open(os.path.join(dst, name), "w") as b:
            b.write(a.read())
    tensors = load_file(os.path.join(src, "model.safetensors"))
    edit(tensors)
    save_file(tensors, os.path.join(dst, "model.safetensors"))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda t: t.update({"model.layers.0.self_attn.rotary.weight": np.zeros(3, np.float32)}), "maps to no parameter"),
        (lambda t: t.pop("model.layers.1.mlp.up_proj.weight"), "lacks 1 parameters"),
        (lambda t: t.update({"model.norm.weight": np.zeros(31, np.float32)}), "has shape"),
        (lambda t: t.update({"lm_head.weight": t["model.embed_tokens.weight"] + 1}), "differs from the embedding"),
    ],
)
def test_loader_fails_loudly(checkpoints, tmp_path, edit, message):
    _corrupt(checkpoints["qwen2"][0], tmp_path / "bad", edit)
    with pytest.raises(ValueError, match=message):
        load_model(tmp_path / "bad")


def test_unsupported_architecture_is_rejected(tmp_path):
    transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model_type"):
        load_model(tmp_path)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_export_loads_in_transformers(checkpoints, family, tmp_path):
    path, model = checkpoints[family]
    load_model(path).export(tmp_path / "out")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids, mask = random_ids(3)
    np.testing.assert_allclose(hf_logprobs(reloaded, ids, mask), hf_logprobs(model, ids, mask), atol=1e-6)


# --- sampler ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def policy(tiny):
    return load_model(tiny)


def prompts(seed=0, lengths=(5, 9, 3, 7)):
    rng = np.random.default_rng(seed)
    return [rng.integers(4, VOCAB, n).astype(np.int32) for n in lengths]


def test_generate_is_deterministic_per_seed_and_logprobs_rescore(policy):
    ps = prompts()
    ids, lps = policy.generate(ps, 12, 0.8, 7, eos_ids=())
    again, again_lps = policy.generate(ps, 12, 0.8, 7, eos_ids=())
    other, _ = policy.generate(ps, 12, 0.8, 8, eos_ids=())
    assert all(np.array_equal(a, b) for a, b in zip(ids, again))
    assert all(np.array_equal(a, b) for a, b in zip(lps, again_lps))
    assert any(not np.array_equal(a, b) for a, b in zip(ids, other))
    for p, out, lp in zip(ps, ids, lps):
        assert out.dtype == np.int32 and lp.dtype == np.float32 and len(out) == len(lp) == 12
        full = np.concatenate([p, out])[None]
        rescored = policy.logprobs(full, np.ones_like(full), temperature=0.8)[0, len(p) :]
        np.testing.assert_allclose(lp, rescored, atol=1e-5)


@pytest.mark.parametrize("family", ["small", "llama", "qwen3"])
def test_greedy_matches_transformers_generate(family, small, checkpoints):
    path, model = small if family == "small" else checkpoints[family]
    ps = prompts(1)
    ids, _ = load_model(path).generate(ps, 10, 0.0, 0, eos_ids=())
    for p, out in zip(ps, ids):
        with torch.no_grad():
            ref = model.generate(
                torch.tensor(p[None], dtype=torch.long), max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0
            )
        np.testing.assert_array_equal(out, ref[0, len(p) :].numpy())


def test_stops_on_eos_and_stop_sequences(policy):
    ps = prompts(2)
    free, _ = policy.generate(ps, 16, 0.0, 0, eos_ids=())
    # Stop on the (greedy, so reproducible) 4th-5th tokens of the first output, and EOS on another's 3rd.
    stop = free[0][3:5].tolist()
    eos = int(free[1][2])
    ids, lps = policy.generate(ps, 16, 0.0, 0, stop_ids=[stop], eos_ids=[eos])
    first = next(i for i in range(1, 16) if free[0][i - 1 : i + 1].tolist() == stop or free[0][i] == eos)
    np.testing.assert_array_equal(ids[0], free[0][: first + 1])
    assert int(ids[1][-1]) == eos and len(ids[1]) <= 3
    for out, full in zip(ids, free):
        np.testing.assert_array_equal(out, full[: len(out)])
        assert len(out) == 16 or int(out[-1]) == eos or out[-2:].tolist() == stop
    assert all(len(a) == len(b) for a, b in zip(ids, lps))


def test_stop_matrix_right_aligns_sequences_and_single_ids():
    m = sampler.stop_matrix([[5, 6, 7], 9, []], eos_ids=[3])
    np.testing.assert_array_equal(m, [[5, 6, 7], [-2, -2, 9], [-2, -2, 3]])


def test_batching_and_top_p_keep_greedy_results(policy):
    ps = prompts(3)
    batched, _ = policy.generate(ps, 8, 0.0, 0, eos_ids=())
    for p, out in zip(ps, batched):
        alone, _ = policy.generate([p], 8, 0.0, 0, eos_ids=())
        np.testing.assert_array_equal(out, alone[0])
    nucleus, _ = policy.generate(ps, 8, 1.0, 5, top_p=1e-6, eos_ids=())  # only the top token survives
    assert all(np.array_equal(a, b) for a, b in zip(batched, nucleus))


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.5, 1.0), (1.0, 0.7)])
def test_sampled_frequencies_follow_the_tempered_nucleus_distribution(temperature, top_p):
    logits = jnp.log(jnp.array([0.5, 0.25, 0.15, 0.1, 0.0]))
    rows = 20000
    tokens, lps = sampler.sample_token(
        jnp.tile(logits, (rows, 1)), call_uniforms(0, None, rows, 1), jnp.float32(temperature), jnp.float32(top_p), top_p < 1
    )
    p = np.exp(np.asarray(jax.nn.log_softmax(logits / temperature)))
    np.testing.assert_allclose(np.asarray(lps), np.log(p[np.asarray(tokens)]), rtol=1e-5)
    if top_p < 1:  # the mass before the third token is 0.75 >= 0.7: only the first two survive
        keep = np.cumsum(p) - p < top_p
        p = np.where(keep, p, 0) / p[keep].sum()
    freq = np.bincount(np.asarray(tokens), minlength=5) / rows
    np.testing.assert_allclose(freq, p, atol=0.015)
    assert freq[4] == 0


def test_two_level_inverse_cdf_equals_the_one_level_one():
    """Blocks of 256 over a vocabulary that is not a multiple of it, with zero-mass entries and
    whole zero blocks (what top-p leaves): the same token as numpy's one cumulative sum, never a
    zero-probability one."""
    rng = np.random.default_rng(0)
    probs = rng.random((64, 1000)) ** 4
    probs[:, 256:512] = 0  # a whole block without mass
    probs[rng.random(probs.shape) < 0.5] = 0
    probs /= probs.sum(-1, keepdims=True)
    u = rng.random((64, 1))
    got = np.asarray(sampler.inverse_cdf(jnp.asarray(probs, jnp.float32), jnp.asarray(u, jnp.float32)))
    cdf = np.cumsum(probs, -1)
    np.testing.assert_array_equal(got, (cdf <= u * cdf[:, -1:]).sum(-1))
    assert (probs[np.arange(64), got] > 0).all()


def test_sampler_does_not_recompile_within_buckets(policy):
    policy.generate(prompts(4, (3, 5)), 9, 1.0, 0, eos_ids=())
    sizes = (sampler.prefill._cache_size(), sampler.decode._cache_size())
    for seed, lengths, new in [(5, (6, 2), 12), (6, (9, 4), 16), (7, (1, 16), 10)]:
        policy.generate(prompts(seed, lengths), new, 0.7, seed, eos_ids=())
    assert (sampler.prefill._cache_size(), sampler.decode._cache_size()) == sizes


# --- GRPO loss and learner ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant"])
def test_jax_loss_equals_the_numpy_reference(mode):
    rng = np.random.default_rng(0)
    cfg = GRPOConfig(group_size=4, micro_batch_size=8, loss_aggregation=mode, kl_beta=0.3, clip_eps_high=0.28)
    rollouts = []
    for i in range(8):
        n = int(rng.integers(4, 20))
        mask = (np.arange(n) >= int(rng.integers(1, n))).astype(np.int8)
        rollouts.append(
            Rollout(
                "e",
                "t",
                0,
                [],
                float(rng.random()),
                False,
                1,
                True,
                False,
                token_ids=rng.integers(1, 50, n),
                loss_mask=mask,
                logprobs=-rng.random(n) * mask,
                group=i // 4,
            )
        )
    b = pack(rollouts, cfg, pad_id=0)
    lp = (b.old_logprobs + rng.normal(0, 0.4, b.shape) * b.loss_mask).astype(np.float32)
    ref = (b.old_logprobs + rng.normal(0, 0.4, b.shape) * b.loss_mask).astype(np.float32)
    loss, metrics = grpo_loss(lp, b, cfg, ref)
    jloss, jmetrics = jax_loss.grpo_loss(jnp.asarray(lp), b, cfg, jnp.asarray(ref))
    assert float(jloss) == pytest.approx(loss, abs=1e-6)
    assert metrics["stats/clip_frac"] > 0
    for key, value in metrics.items():
        assert float(jmetrics[key]) == pytest.approx(value, abs=1e-6), key


@pytest.mark.parametrize("policy_loss", ["clip", "gspo", "cispo"])
def test_jax_loss_with_per_token_advantages_equals_the_numpy_reference(policy_loss):
    rng = np.random.default_rng(0)
    cfg = GRPOConfig(
        group_size=4,
        micro_batch_size=8,
        kl_beta=0.3,
        clip_eps_high=0.28,
        policy_loss=policy_loss,
        advantage="turn",
        turn_advantage_weight=0.6,
    )
    b = pack(multi_turn_rollouts(5), cfg, pad_id=0)
    assert b.advantages.ndim == 2
    lp = (b.old_logprobs + rng.normal(0, 0.4, b.shape) * b.loss_mask).astype(np.float32)
    ref = (b.old_logprobs + rng.normal(0, 0.4, b.shape) * b.loss_mask).astype(np.float32)
    loss, metrics = grpo_loss(lp, b, cfg, ref)
    jloss, jmetrics = jax_loss.grpo_loss(jnp.asarray(lp), b, cfg, jnp.asarray(ref))
    assert float(jloss) == pytest.approx(loss, abs=1e-6)
    for key, value in metrics.items():
        assert float(jmetrics[key]) == pytest.approx(value, abs=1e-6), key


def rollouts_from(policy, seed, n_groups=2, group_size=4, new=6):
    rng = np.random.default_rng(seed)
    ps = [p for p in prompts(seed, tuple(rng.integers(2, 8, n_groups))) for _ in range(group_size)]
    ids, lps = policy.generate(ps, new, 1.0, seed, eos_ids=())
    out = []
    for i, (p, o, lp) in enumerate(zip(ps, ids, lps)):
        out.append(
            Rollout(
                "e",
                "t",
                0,
                [],
                float(o[0] % 2),
                False,
                1,
                True,
                False,
                token_ids=np.concatenate([p, o]),
                loss_mask=np.r_[np.zeros(len(p)), np.ones(len(o))].astype(np.int8),
                logprobs=np.r_[np.zeros(len(p)), lp].astype(np.float32),
                group=i // group_size,
            )
        )
    return out


def flat_params(learner):
    return [np.asarray(x) for x in jax.tree.leaves(learner.params)]


def test_train_step_matches_the_reference_and_moves_every_parameter(tiny):
    policy = load_model(tiny)
    cfg = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-3, kl_beta=0.1, max_length=32)
    batch = pack(rollouts_from(policy, 0), cfg, pad_id=policy.pad_id)
    assert np.ptp(batch.advantages) > 0
    lp = policy.logprobs(batch.input_ids, batch.attention_mask)
    expected, expected_metrics = grpo_loss(lp, batch, cfg, lp)  # the reference starts at the policy
    learner = Learner(policy, cfg)
    before = flat_params(learner)
    metrics = learner.train_step(batch)
    assert metrics["loss/total"] == pytest.approx(expected, abs=1e-5)
    assert metrics["stats/ratio_mean"] == pytest.approx(expected_metrics["stats/ratio_mean"], abs=1e-5)
    assert {"loss/policy", "loss/kl", "stats/clip_frac", "stats/grad_norm", "stats/lr"} <= metrics.keys()
    metrics = learner.train_step(batch)
    assert metrics["loss/kl"] > 0  # the policy has left the reference
    assert all(not np.array_equal(a, b) for a, b in zip(before, flat_params(learner)))
    after = policy.logprobs(batch.input_ids, batch.attention_mask)  # the policy sees the new weights
    assert np.abs(after - lp).max() > 1e-4


@pytest.mark.parametrize("head", ["tied", "untied"])
def test_the_head_at_trained_positions_gives_the_full_heads_loss_and_gradients(head, checkpoints, tmp_path):
    path = str(textgym_tiny.create(tmp_path, seed=0, size=SMALL)) if head == "tied" else checkpoints["llama"][0]
    policy = load_model(path)
    vocab = policy.config.vocab_size
    rollouts = [dataclasses.replace(r, token_ids=r.token_ids % vocab) for r in multi_turn_rollouts(3)]  # env tokens between turns
    config = GRPOConfig(group_size=4, micro_batch_size=8, max_length=128, kl_beta=0.1, policy_loss="gspo")
    batch = pack(rollouts, config, pad_id=policy.pad_id)
    split = split_prompts(batch, policy.pad_id)
    trained = split.rest.loss_mask > 0
    at = scored_positions(trained, fine_bucket(int(trained[:, 1:].sum())))  # padded, as the learner pads it
    assert int(trained[:, 1:].sum()) < at.size < trained.size / 2
    reference = jax.tree.map(lambda p: 0.9 * p, policy.params)

    def loss(params, at):
        logprobs = _logprobs(policy.graphdef, config, params, split, at)
        ref = _logprobs(policy.graphdef, config, reference, split, at)
        return jax_loss.grpo_loss(logprobs, split.rest, config, ref)[0], logprobs

    (full, every), full_grads = jax.value_and_grad(loss, has_aux=True)(policy.params, None)
    (skipped, some), skipped_grads = jax.value_and_grad(loss, has_aux=True)(policy.params, at)
    assert float(skipped) == pytest.approx(float(full), abs=1e-6)
    np.testing.assert_allclose(np.asarray(some)[trained], np.asarray(every)[trained], atol=1e-6)
    assert not np.asarray(some)[~trained].any()
    for a, b in zip(jax.tree.leaves(skipped_grads), jax.tree.leaves(full_grads), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    # The old-logprob pass (num_iterations > 1, rollout correction) scores the trained tokens alone too.
    every = policy.logprobs(batch.input_ids, batch.attention_mask)
    scored = policy.logprobs(batch.input_ids, batch.attention_mask, scored=batch.loss_mask)
    on = batch.loss_mask > 0
    np.testing.assert_allclose(scored[on], every[on], atol=1e-6)
    assert not scored[~on].any()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_attention_gradient_equals_autodiff_of_the_softmax(dtype):
    """``attend``'s own gradient (probabilities rebuilt from the log-normaliser) equals autodiff of
    the plain softmax attention, with padded keys, a fully masked query and a causal mask."""
    b, kv, g, t, d, slots = 2, 2, 3, 5, 8, 7
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v = (
        jax.random.normal(key, shape).astype(dtype) for key, shape in zip(keys, [(b, kv, g, t, d), (b, kv, slots, d), (b, kv, slots, d)])
    )
    weights = jax.random.normal(keys[3], (b, kv, g, t, d))
    mask = (jnp.arange(slots)[None, None, :] <= jnp.arange(t)[None, :, None] + 2) & (jnp.arange(slots) >= jnp.array([[0], [3]]))[:, None, :]
    mask = mask.at[1, 0].set(False)  # a query that sees no key: uniform, as a plain softmax gives

    def plain(q, k, v):
        scores = jnp.einsum("bkgtd,bksd->bkgts", q, k, preferred_element_type=jnp.float32) / np.sqrt(d)
        scores = jnp.where(mask[:, None, None], scores, jnp.finfo(jnp.float32).min)
        probs = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
        return jnp.einsum("bkgts,bksd->bkgtd", probs, v, preferred_element_type=jnp.float32).astype(q.dtype)

    def loss(fn):
        return lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) * weights)

    ours = jax.grad(loss(lambda q, k, v: attend(q, k, v, mask)), argnums=(0, 1, 2))(q, k, v)
    want = jax.grad(loss(plain), argnums=(0, 1, 2))(q, k, v)
    tol = 1e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(np.asarray(attend(q, k, v, mask), np.float32), np.asarray(plain(q, k, v), np.float32), atol=tol)
    for a, w in zip(ours, want, strict=True):
        assert a.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(w, np.float32), atol=tol, rtol=tol)


def test_a_long_pass_attends_row_by_row_as_the_whole_batch_does(tiny, monkeypatch):
    """On a CPU a pass in causal blocks attends one row at a time (``transformer.row_by_row``):
    its logits and their gradient equal those of the whole batch's attention."""
    from flax import nnx

    from textgym.algos.jax import transformer

    policy = load_model(tiny)
    ids, mask = random_ids(5, b=3, t=300)
    assert len(transformer.causal_chunks(300, 300, 0)) > 1 and transformer.row_by_row()

    def loss(params):
        logits, _ = nnx.merge(policy.graphdef, params)(ids, transformer.positions_from_mask(mask), mask)
        return jnp.sum(jnp.where(mask[..., None] > 0, logits, 0.0) ** 2), logits

    by_row = jax.jit(jax.value_and_grad(loss, has_aux=True))(policy.params)  # each jit traces anew
    monkeypatch.setattr(transformer, "row_by_row", lambda: False)
    batched = jax.jit(jax.value_and_grad(loss, has_aux=True))(policy.params)
    np.testing.assert_allclose(by_row[0][1], batched[0][1], atol=1e-5)
    for a, b in zip(jax.tree.leaves(by_row[1]), jax.tree.leaves(batched[1]), strict=True):  # float32 sums in other orders
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))


def test_the_heads_positions_hold_every_trained_token_in_four_shapes():
    """A micro-batch's ``K`` is one of four shares of its positions, whatever its trained count:
    each shape is a compilation of the update."""
    positions = 16 * 352
    slots = [scored_slots(trained, positions) for trained in range(positions + 1)]
    assert all(k >= trained for trained, k in enumerate(slots))
    assert sorted(set(slots)) == [positions // 8, positions // 4, positions // 2, positions]
    assert scored_slots(0, 16) == 2 and scored_slots(0, 4) == 1  # never empty
    assert all(k <= max(2 * trained, positions // 8) for trained, k in enumerate(slots))  # at most twice the need


@pytest.mark.slow  # 14-25 s on 2 cores (measured with --durations); runs with -m slow
def test_gradient_accumulation_does_not_change_the_update(tiny):
    rollouts = rollouts_from(load_model(tiny), 1)
    results = []
    for mbs in (3, 8):  # 3: micro-batches with one and two prompts, and a padding row
        policy = load_model(tiny)
        cfg = GRPOConfig(group_size=4, micro_batch_size=mbs, lr=1e-3, max_length=32, loss_aggregation="seq-mean-token-mean")
        learner = Learner(policy, cfg)
        results.append((learner.train_step(pack(rollouts, cfg, pad_id=policy.pad_id)), flat_params(learner)))
    (m3, p3), (m8, p8) = results
    assert m3["loss/total"] == pytest.approx(m8["loss/total"], abs=1e-6)
    assert m3["stats/grad_norm"] == pytest.approx(m8["stats/grad_norm"], rel=1e-4)
    for a, b in zip(p3, p8):
        np.testing.assert_allclose(a, b, atol=1e-5)  # Adam magnifies float noise in near-zero gradients


def test_save_restore_resumes_exactly_and_exports(tiny, tmp_path):
    cfg = GRPOConfig(group_size=4, micro_batch_size=8, lr=1e-3, max_length=32, lr_schedule="cosine", warmup_steps=1, total_steps=4)
    batches = [pack(rollouts_from(load_model(tiny), s), cfg, pad_id=0) for s in (2, 3)]
    straight = Learner(load_model(tiny), cfg)
    for b in batches:
        straight.train_step(b)
    first = Learner(load_model(tiny), cfg)
    first.train_step(batches[0])
    first.save(tmp_path / "ckpt")
    resumed = Learner(load_model(tiny), cfg)
    resumed.restore(tmp_path / "ckpt")
    assert resumed.step == 1
    metrics = resumed.train_step(batches[1])
    assert metrics["stats/lr"] == pytest.approx(float(straight.schedule(1)))
    for a, b in zip(flat_params(straight), flat_params(resumed)):
        np.testing.assert_array_equal(a, b)
    resumed.export(tmp_path / "hf")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids, mask = random_ids(4)
    np.testing.assert_allclose(hf_logprobs(model, ids, mask), resumed.model.logprobs(ids, mask), atol=1e-4)


@pytest.mark.slow  # 14-25 s on 2 cores (measured with --durations); runs with -m slow
def test_bfloat16_compute_and_multiple_iterations(tiny):
    policy = load_model(tiny)
    cfg = GRPOConfig(group_size=4, micro_batch_size=8, lr=5e-2, max_length=32, compute_dtype="bfloat16", num_iterations=3)
    batch = pack(rollouts_from(policy, 4), cfg, pad_id=0).replace(old_logprobs=None)
    learner = Learner(policy, cfg)
    metrics = learner.train_step(batch)
    assert learner.step == 3
    assert np.isfinite(metrics["loss/total"]) and metrics["stats/clip_frac"] > 0  # later iterations move off-policy
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(learner.params))


def test_the_kl_reference_runs_once_a_step_and_changes_nothing(tiny, monkeypatch):
    """With ``num_iterations > 1`` the frozen reference's logprobs are kept for the step's later
    updates: the step equals one that runs the reference again at each update."""
    from textgym.algos.jax import learner as jax_learner

    cfg = GRPOConfig(group_size=4, micro_batch_size=8, lr=5e-2, max_length=32, kl_beta=0.1, num_iterations=2)
    batch = pack(rollouts_from(load_model(tiny), 4), cfg, pad_id=0).replace(old_logprobs=None)
    calls: list[int] = []
    reference = jax_learner.reference_logprobs
    monkeypatch.setattr(jax_learner, "reference_logprobs", lambda *args: calls.append(1) or reference(*args))

    kept = Learner(load_model(tiny), cfg)
    kept_metrics = kept.train_step(batch)
    assert len(calls) == 1 and kept_metrics["loss/kl"] > 0  # the second update moved off the reference

    again = Learner(load_model(tiny), cfg)
    cached = again._prepare

    def every_time(*args):
        again._prepared = None
        return cached(*args)

    monkeypatch.setattr(again, "_prepare", every_time)
    assert again.train_step(batch) == kept_metrics and len(calls) == 3
    for a, b in zip(jax.tree.leaves(kept.params), jax.tree.leaves(again.params), strict=True):
        np.testing.assert_array_equal(a, b)


_SHARDED = textwrap.dedent(
    """
    import sys, numpy as np, jax
    from textgym.algos.grpo import GRPOConfig, Batch
    from textgym.algos.jax import Learner, load_model, make_mesh
    assert jax.device_count() == 4
    path = sys.argv[1]
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 61, (8, 16)).astype(np.int32)
    mask = np.ones((8, 16), np.float32); mask[:, :5] = 0
    batch = Batch(input_ids=ids, attention_mask=np.ones_like(ids), positions=np.tile(np.arange(16, dtype=np.int32), (8, 1)),
                  loss_mask=mask, old_logprobs=None, advantages=rng.normal(size=8).astype(np.float32),
                  loss_weights=mask / mask.sum(), rewards=np.zeros(8, np.float32), num_sequences=8, token_count=int(mask.sum()))
    lora = dict(lora_rank=4, lora_targets=("q_proj", "down_proj")) if sys.argv[2] == "lora" else {}
    cfg = GRPOConfig(micro_batch_size=4, lr=1e-3, kl_beta=0.1, **lora)
    out = []
    for mesh in (None, make_mesh(data=2, fsdp=2)):
        learner = Learner(load_model(path), cfg, mesh=mesh)
        metrics = [learner.train_step(batch)]
        out.append((metrics, [np.asarray(x) for x in jax.tree.leaves(learner.params)]))
    emb = (learner.params["base"] if lora else learner.params)["embed_tokens"]["embedding"]
    assert len(emb.sharding.device_set) == 4 and emb.addressable_shards[0].data.size < emb.size, emb.sharding
    (m1, p1), (m4, p4) = out
    for a, b in zip(m1, m4):
        for k in a:
            assert abs(a[k] - b[k]) <= 1e-5 * max(1.0, abs(a[k])), (k, a[k], b[k])
    for a, b in zip(p1, p4):
        np.testing.assert_allclose(a, b, atol=1e-5)
    print("OK")
    """
)


@pytest.mark.slow  # 20 CPU-seconds measured: two compilations of the sharded train step
@pytest.mark.parametrize("weights", ["full", "lora"])
def test_sharded_step_equals_single_device_step(tiny, weights):
    env = os.environ | {
        "PYTHONPATH": REPO,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run([sys.executable, "-c", _SHARDED, tiny, weights], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]
