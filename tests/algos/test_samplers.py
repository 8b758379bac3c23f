"""Both samplers' cached paths against a cache-free reference, and the ``sampler_dtype`` option.

The reference samples one step at a time by running every row's whole sequence so far through
the model, with the same uniform numbers (each row's keyed draws), so any slip in the
prefill, the copied group cache, the slot cache or the last-position head changes a token or a
logprob. bf16 sampling is checked against float32 teacher forcing of the sequences it drew.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from textgym.algos.grpo import GRPOConfig, pack
from textgym.algos.models import tiny
from textgym.algos.torch import Learner, TorchLanguageModel, load_model
from textgym.algos.torch import packed as packing
from textgym.algos.torch.sampler import sample_token
from textgym.draws import call_uniforms
from textgym.rollout import Rollout

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
# bf16 keeps 8 mantissa bits: on this model its logprobs stay this close to float32's (measured
# max 0.0012, mean 0.0004 in both backends; docs/benchmarks.md gives SmolLM2's, ~50x larger).
BF16_MAX, BF16_MEAN = 0.01, 0.003


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def prompts() -> list[np.ndarray]:
    """Ragged prompts, one repeated as in a GRPO group (rows 0, 1 and 3 share it)."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 256, 9).astype(np.int32), rng.integers(0, 256, 4).astype(np.int32)
    return [a, a, b, a, rng.integers(0, 256, 14).astype(np.int32)]


@torch.no_grad()
def reference_sample(model, rows: list[np.ndarray], new_tokens: int, temperature: float, seed: int):
    """No cache, no padding: each step runs every row's full sequence and samples like the sampler."""
    uniforms = torch.from_numpy(call_uniforms(seed, None, len(rows), new_tokens))
    seqs = [torch.as_tensor(r, dtype=torch.long) for r in rows]
    tokens, logps = [], []
    for t in range(new_tokens):
        logits = torch.stack([model(input_ids=s[None]).logits[0, -1] for s in seqs])
        tok, lp = sample_token(logits.float(), temperature, 1.0, uniforms[:, t : t + 1])
        seqs = [torch.cat([s, t[None]]) for s, t in zip(seqs, tok)]
        tokens.append(tok.numpy())
        logps.append(lp.numpy())
    return np.stack(tokens, 1), np.stack(logps, 1)


def bf16_error(policy, rows, ids, lps) -> np.ndarray:
    """|sampler logprob - float32 teacher-forced logprob| of every sampled token."""
    errs = []
    for p, i, lp in zip(rows, ids, lps):
        seq = np.concatenate([p, i])[None]
        errs.append(np.abs(policy.logprobs(seq, np.ones_like(seq))[0, len(p) :] - lp))
    return np.concatenate(errs)


@pytest.mark.parametrize("packed", [True, False])
def test_torch_sampler_equals_the_cache_free_reference_at_float32(model_dir, packed, monkeypatch):
    """The reference runs the plain model: packed weights (and the unpacked fallback) must agree."""
    if not packed:
        monkeypatch.setattr(packing, "can_pack", lambda model: False)
    assert not packed or packing.can_pack(load_model(model_dir).model), "oneDNN packing unavailable here"
    policy = load_model(model_dir)
    rows = prompts()
    ids, lps = policy.generate(rows, 10, temperature=1.0, seed=5, eos_ids=())
    want_ids, want_lps = reference_sample(policy.model.eval(), rows, 10, 1.0, 5)
    np.testing.assert_array_equal(np.stack(ids), want_ids)
    np.testing.assert_allclose(np.stack(lps), want_lps, atol=1e-5)
    assert policy.sampler_model() is policy.model  # float32 samples from the trained module itself


def test_packed_linears_match_the_plain_layers_and_are_put_back_after_an_error(model_dir):
    model = load_model(model_dir).model.eval()
    assert packing.can_pack(model), "oneDNN packing unavailable here"
    before = dict(model.named_modules())
    ids = torch.as_tensor(prompts()[4][None], dtype=torch.long)
    with torch.no_grad():
        want = model(input_ids=ids).logits
        with pytest.raises(RuntimeError, match="inside"), packing.packed_linears(model, rows=1):
            assert sum(isinstance(m, packing.PackedLinear) for m in model.modules()) == 2 * 7 + 1  # q k v o gate up down, head
            got = model(input_ids=ids).logits
            raise RuntimeError("inside")
    assert dict(model.named_modules()) == before  # the very same modules are back
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_packed_weights_are_kept_across_calls_until_a_weight_changes(model_dir):
    policy = load_model(model_dir)
    rows = prompts()

    def packed_now():
        stamp = tuple((p.data_ptr(), p._version) for p in policy.model.parameters())
        return list(policy._packed.get(policy.model, len(rows), stamp).values())

    first = policy.generate(rows, 6, temperature=1.0, seed=5, eos_ids=())
    kept = packed_now()
    again = policy.generate(rows, 6, temperature=1.0, seed=5, eos_ids=())
    assert len(kept) == 15 and all(a is b for a, b in zip(packed_now(), kept, strict=True))  # no packing the second time
    np.testing.assert_array_equal(np.stack(again[0]), np.stack(first[0]))
    with torch.no_grad():
        next(policy.model.parameters()).mul_(2.0)  # an optimiser step: the version counter moves
    moved = policy.generate(rows, 6, temperature=1.0, seed=5, eos_ids=())
    want = TorchLanguageModel(copy.deepcopy(policy.model), None).generate(rows, 6, temperature=1.0, seed=5, eos_ids=())
    np.testing.assert_array_equal(np.stack(moved[0]), np.stack(want[0]))
    np.testing.assert_allclose(np.stack(moved[1]), np.stack(want[1]), atol=1e-6)


def test_torch_bf16_sampler_stays_close_and_leaves_the_weights_float32(model_dir):
    policy = load_model(model_dir, sampler_dtype="bfloat16")
    rows = prompts()
    ids, lps = policy.generate(rows, 12, temperature=1.0, seed=1, eos_ids=())
    sampler = policy.sampler_model()
    assert sampler is not policy.model and next(sampler.parameters()).dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())
    err = bf16_error(policy, rows, ids, lps)
    assert err.max() < BF16_MAX and err.mean() < BF16_MEAN, (err.max(), err.mean())
    assert err.max() > 1e-6  # it did compute in bf16
    again, _ = policy.generate(rows, 12, temperature=1.0, seed=1, eos_ids=())
    assert all(np.array_equal(a, b) for a, b in zip(ids, again)) and policy.sampler_model() is sampler


@pytest.mark.parametrize("native", [True, False])
def test_bf16_sampling_on_a_cpu_without_native_bf16_says_it_is_slower(model_dir, monkeypatch, native):
    monkeypatch.setattr(packing, "native_bf16", lambda: native)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model(model_dir, sampler_dtype="bfloat16")
        load_model(model_dir)  # float32 never warns
    said = [w for w in caught if "native bfloat16" in str(w.message)]
    assert len(said) == (0 if native else 1)


def test_torch_bf16_sampler_follows_a_learner_step(model_dir):
    policy = load_model(model_dir, sampler_dtype="bfloat16")
    rows = prompts()
    before, _ = policy.generate(rows, 8, temperature=1.0, seed=2, eos_ids=())
    rng = np.random.default_rng(0)
    rollouts = [
        Rollout(
            "e",
            "t",
            i // 4,
            [],
            float(i % 2),
            False,
            1,
            True,
            False,
            token_ids=rng.integers(0, 256, 16).astype(np.int32),
            loss_mask=(np.arange(16) >= 6).astype(np.int8),
            group=i // 4,
        )
        for i in range(8)
    ]
    config = GRPOConfig(group_size=4, micro_batch_size=8, lr=5e-2, max_length=32)
    Learner(policy, config).train_step(pack(rollouts, config, pad_id=policy.pad_id))
    after = policy.generate(rows, 8, temperature=1.0, seed=2, eos_ids=())
    fresh = TorchLanguageModel(copy.deepcopy(policy.model), None, sampler_dtype="bfloat16").generate(
        rows, 8, temperature=1.0, seed=2, eos_ids=()
    )
    for a, b, c, d in zip(after[0], fresh[0], after[1], fresh[1]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, d)
    assert not all(np.array_equal(a, b) for a, b in zip(before, after[0]))


def test_jax_bf16_sampler_stays_close_and_follows_new_params(model_dir):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    from textgym.algos.jax import load_model as load_jax

    policy = load_jax(model_dir, sampler_dtype="bfloat16")
    rows = prompts()
    ids, lps = policy.generate(rows, 12, temperature=1.0, seed=1, eos_ids=())
    assert jax.tree.leaves(policy.params)[0].dtype == jnp.float32
    assert jax.tree.leaves(policy.sampler_params())[0].dtype == jnp.bfloat16
    err = bf16_error(policy, rows, ids, lps)
    assert err.max() < BF16_MAX and err.mean() < BF16_MEAN and err.max() > 1e-6, (err.max(), err.mean())
    cast = policy.sampler_params()
    assert policy.sampler_params() is cast  # cast once per parameter tree
    policy.params = jax.tree.map(lambda p: p * 1.5, policy.params)  # what a learner's update does: a new tree
    moved = policy.sampler_params()
    assert moved is not cast
    np.testing.assert_array_equal(
        np.asarray(jax.tree.leaves(moved)[0], np.float32), np.asarray(jax.tree.leaves(policy.params)[0].astype(jnp.bfloat16), np.float32)
    )


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_an_unknown_sampler_dtype_is_refused(model_dir, backend):
    from textgym.algos.backends import load_backend

    with pytest.raises(ValueError, match="sampler_dtype"):
        load_backend(backend).load_model(model_dir, sampler_dtype="float16")
    with pytest.raises(ValueError, match="sampler_dtype"):
        GRPOConfig(sampler_dtype="float16")


def test_jax_causal_blocks_of_a_long_pass_match_transformers(model_dir):
    """Passes of >= 256 queries attend in causal blocks (model.causal_chunks): scoring (no cache)
    and a left-padded prefill must still equal transformers' logprobs and greedy tokens."""
    pytest.importorskip("jax")
    from textgym.algos.jax import load_model as load_jax
    from textgym.algos.jax.transformer import causal_chunks

    assert len(causal_chunks(300, 300, 0)) > 1 and len(causal_chunks(1, 400, 0)) == 1
    long = causal_chunks(5693, 6000, 300)  # a long prefill after 300 cached slots: blocks of at most 512 queries
    assert len(long) == 12 and max(hi - lo for lo, hi, _ in long) <= 512
    assert long[0][0] == 0 and long[-1][1] == 5693 and all(a[1] == b[0] for a, b in zip(long, long[1:]))
    assert all(end == min(6000, 300 + hi) for _, hi, end in long)
    jax_policy, torch_policy = load_jax(model_dir), load_model(model_dir)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 256, (2, 300)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, :37] = 0  # left padding inside a block
    scored = mask * np.pad(mask[:, :-1], ((0, 0), (1, 0)))  # the first real token has no logprob (torch: 0)
    np.testing.assert_allclose(jax_policy.logprobs(ids, mask) * scored, torch_policy.logprobs(ids, mask) * scored, atol=1e-4)
    rows = [ids[0], ids[1, 37:]]
    got, got_lp = jax_policy.generate(rows, 6, temperature=0.0, seed=0, eos_ids=())
    want, want_lp = torch_policy.generate(rows, 6, temperature=0.0, seed=0, eos_ids=())
    for a, b, c, d in zip(got, want, got_lp, want_lp):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(c, d, atol=1e-4)
