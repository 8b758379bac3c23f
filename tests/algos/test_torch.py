"""The torch backend: sampler, logprobs, GRPO loss against the numpy reference, learner, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.algos.tiny_batches import multi_turn_rollouts
from textgym.algos.grpo import GRPOConfig, pack, split_micro_batches
from textgym.algos.grpo import grpo_loss as reference_loss
from textgym.algos.grpo.batch import by_length, pad_rows
from textgym.algos.grpo.learner import BaseLearner
from textgym.algos.grpo.prompts import split_pays, split_prompts
from textgym.algos.models import tiny
from textgym.algos.torch import Learner, grpo_loss, load_model
from textgym.algos.torch.model import continuation_logprobs, sequence_logprobs
from textgym.algos.torch.sampler import sample_token
from textgym.draws import call_uniforms
from textgym.rollout import Rollout

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def random_rollouts(seed: int, n: int = 8, group_size: int = 4, with_logprobs: bool = True) -> list[Rollout]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(6, 40))
        mask = np.zeros(size, np.int8)
        mask[int(rng.integers(2, size - 1)) :] = 1
        lp = np.where(mask > 0, rng.normal(-5.5, 0.3, size), 0.0).astype(np.float32) if with_logprobs else None
        out.append(
            Rollout(
                "e",
                "t",
                i // group_size,
                [],
                float(rng.integers(0, 2)),
                False,
                1,
                True,
                False,
                token_ids=rng.integers(0, 256, size).astype(np.int32),
                loss_mask=mask,
                logprobs=lp,
                group=i // group_size,
            )
        )
    return out


def params(model) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in model.named_parameters()}


# --- sampler and logprobs -------------------------------------------------------------------


def test_generate_is_deterministic_per_seed_and_logprobs_match_a_full_forward(model_dir):
    policy = load_model(model_dir)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 256, n).astype(np.int32) for n in (5, 11, 2)]
    ids, lps = policy.generate(prompts, max_new_tokens=12, temperature=1.0, seed=7)
    again, _ = policy.generate(prompts, max_new_tokens=12, temperature=1.0, seed=7)
    other, _ = policy.generate(prompts, max_new_tokens=12, temperature=1.0, seed=8)
    assert all(np.array_equal(a, b) for a, b in zip(ids, again))
    assert not all(np.array_equal(a, b) for a, b in zip(ids, other))
    for prompt, gen, lp in zip(prompts, ids, lps):
        assert gen.dtype == np.int32 and lp.dtype == np.float32 and gen.shape == lp.shape
        seq = np.concatenate([prompt, gen])[None]
        full = policy.logprobs(seq, np.ones_like(seq))
        np.testing.assert_allclose(full[0, len(prompt) :], lp, atol=1e-5)
        assert full[0, 0] == 0.0


def test_logprobs_ignore_padding_on_either_side(model_dir):
    policy = load_model(model_dir)
    seq = np.random.default_rng(1).integers(0, 256, 9).astype(np.int32)
    alone = policy.logprobs(seq[None], np.ones((1, 9), np.int32))[0]
    right = np.zeros((1, 14), np.int32)
    right[0, :9] = seq
    lp_right = policy.logprobs(right, (np.arange(14) < 9).astype(np.int32)[None])[0]
    left = np.zeros((1, 14), np.int32)
    left[0, 5:] = seq
    lp_left = policy.logprobs(left, (np.arange(14) >= 5).astype(np.int32)[None])[0]
    np.testing.assert_allclose(lp_right[:9], alone, atol=1e-5)
    np.testing.assert_allclose(lp_left[5:], alone, atol=1e-5)
    assert not lp_right[9:].any() and not lp_left[:5].any()


def test_greedy_batch_equals_one_by_one_and_stops_at_eos_or_stop_ids(model_dir):
    policy = load_model(model_dir)
    rng = np.random.default_rng(2)
    prompts = [rng.integers(0, 256, n).astype(np.int32) for n in (3, 8, 13)]
    batched, _ = policy.generate(prompts, max_new_tokens=10, temperature=0.0, seed=0)
    for prompt, ids in zip(prompts, batched):
        alone, _ = policy.generate([prompt], max_new_tokens=10, temperature=0.0, seed=0)
        np.testing.assert_array_equal(alone[0], ids)
    # Declare the first greedy token an end-of-turn id: every row must stop right after it.
    first = int(batched[0][0])
    stopped, _ = policy.generate(prompts[:1], max_new_tokens=10, temperature=0.0, seed=0, eos_ids=[first])
    np.testing.assert_array_equal(stopped[0], [first])
    full = [int(t) for t in batched[1]]
    pair = full[1:3]
    end = next(j for j in range(2, len(full) + 1) if full[j - 2 : j] == pair)  # first occurrence
    cut, _ = policy.generate(prompts[1:2], max_new_tokens=10, temperature=0.0, seed=0, stop_ids=[pair])
    np.testing.assert_array_equal(cut[0], batched[1][:end])


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.5, 1.0), (1.0, 0.7)])
def test_sampled_frequencies_follow_the_tempered_nucleus_distribution(temperature, top_p):
    logits = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1, 0.0]))
    rows = 20000
    tokens, lps = sample_token(logits.repeat(rows, 1), temperature, top_p, torch.from_numpy(call_uniforms(0, None, rows, 1)))
    p = torch.softmax(logits / temperature, -1).numpy()
    np.testing.assert_allclose(lps.numpy(), np.log(p[tokens.numpy()]), rtol=1e-5)
    if top_p < 1:  # the mass before the third token is 0.75 >= 0.7: only the first two survive
        keep = np.cumsum(p) - p < top_p
        p = np.where(keep, p, 0) / p[keep].sum()
    freq = np.bincount(tokens.numpy(), minlength=5) / rows
    np.testing.assert_allclose(freq, p, atol=0.015)
    assert freq[4] == 0


# --- loss ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_torch_loss_equals_the_numpy_reference(mode):
    config = GRPOConfig(group_size=4, loss_aggregation=mode, kl_beta=0.05, clip_eps_high=0.28, micro_batch_size=4, max_length=64)
    batch = pack(random_rollouts(3), config, pad_id=0)
    rng = np.random.default_rng(4)
    current = np.where(batch.loss_mask > 0, batch.old_logprobs + rng.normal(0, 0.3, batch.shape), 0).astype(np.float32)
    ref = (current + rng.normal(0, 0.2, batch.shape)).astype(np.float32)
    want, want_metrics = reference_loss(current, batch, config, ref)
    got, got_metrics = grpo_loss(torch.tensor(current), batch, config, torch.tensor(ref))
    assert float(got) == pytest.approx(want, abs=1e-5)
    for name, value in want_metrics.items():
        assert float(got_metrics[name]) == pytest.approx(value, abs=1e-5), name


@pytest.mark.parametrize("policy_loss", ["clip", "gspo", "cispo"])
def test_torch_loss_with_per_token_advantages_equals_the_numpy_reference(policy_loss):
    config = GRPOConfig(
        group_size=4, kl_beta=0.05, micro_batch_size=4, max_length=64, policy_loss=policy_loss, advantage="turn", turn_advantage_weight=0.6
    )
    batch = pack(multi_turn_rollouts(3), config, pad_id=0)
    assert batch.advantages.ndim == 2
    rng = np.random.default_rng(4)
    current = np.where(batch.loss_mask > 0, batch.old_logprobs + rng.normal(0, 0.3, batch.shape), 0).astype(np.float32)
    ref = (current + rng.normal(0, 0.2, batch.shape)).astype(np.float32)
    want, want_metrics = reference_loss(current, batch, config, ref)
    got, got_metrics = grpo_loss(torch.tensor(current), batch, config, torch.tensor(ref))
    assert float(got) == pytest.approx(want, abs=1e-5)
    for name, value in want_metrics.items():
        assert float(got_metrics[name]) == pytest.approx(value, abs=1e-5), name


# --- learner ---------------------------------------------------------------------------------


def test_two_steps_change_every_trainable_parameter(model_dir):
    policy = load_model(model_dir)
    config = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-3, kl_beta=0.01, max_length=64)
    learner = Learner(policy, config)
    before = params(policy.model)
    for seed in (0, 1):
        metrics = learner.train_step(pack(random_rollouts(seed), config, pad_id=policy.pad_id))
        assert np.isfinite(metrics["loss/total"]) and metrics["stats/grad_norm"] > 0
    after = params(policy.model)
    unchanged = [k for k in before if np.array_equal(before[k], after[k])]
    assert not unchanged
    assert learner.step == 2


def test_the_head_at_trained_positions_takes_a_one_token_row_with_nothing_to_score(model_dir):
    # A data-parallel rank's share of a batch can be this: no token to score, one position wide.
    ids = torch.tensor([[5], [7]])
    out = sequence_logprobs(load_model(model_dir).model, ids, torch.ones_like(ids), scored=torch.zeros_like(ids, dtype=torch.bool))
    assert out.shape == (2, 1) and not out.any()


def test_the_head_at_trained_positions_gives_the_full_heads_loss_and_gradients(model_dir):
    policy, reference = load_model(model_dir), load_model(tiny.create(model_dir.parent / "reference", seed=1, size=SMALL))
    config = GRPOConfig(group_size=4, micro_batch_size=8, max_length=128, kl_beta=0.1, policy_loss="gspo")
    batch = pack(multi_turn_rollouts(3), config, pad_id=policy.pad_id)  # env tokens between the turns
    split = split_prompts(batch, policy.pad_id)
    trained = split.rest.loss_mask > 0
    rows = []
    policy.model.lm_head.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[:-1].numel()))

    def loss_and_grads(scored):
        policy.model.zero_grad()
        rows.clear()
        logprobs = continuation_logprobs(policy.model, split, scored=scored)
        with torch.no_grad():
            ref = continuation_logprobs(reference.model, split, scored=scored)
        loss, _ = grpo_loss(logprobs, split.rest, config, ref)
        loss.backward()
        return loss.item(), logprobs.detach().numpy(), {k: p.grad.numpy().copy() for k, p in policy.model.named_parameters()}, rows[:]

    full, skipped = loss_and_grads(None), loss_and_grads(split.rest.loss_mask)
    assert skipped[3] == [len(split.prompt_ids), int(trained[:, 1:].sum())]  # the prompts' last positions, then the trained ones
    assert full[3][1] == trained.size > 2 * skipped[3][1]
    assert skipped[0] == pytest.approx(full[0], abs=1e-6)
    np.testing.assert_allclose(skipped[1][trained], full[1][trained], atol=1e-6)
    assert not skipped[1][~trained].any()
    for name, grad in full[2].items():
        np.testing.assert_allclose(skipped[2][name], grad, atol=1e-6, err_msg=name)
    # The old-logprob pass (num_iterations > 1, rollout correction) scores the trained tokens alone too.
    every = policy.logprobs(batch.input_ids, batch.attention_mask)
    scored = policy.logprobs(batch.input_ids, batch.attention_mask, scored=batch.loss_mask)
    on = batch.loss_mask > 0
    np.testing.assert_allclose(scored[on], every[on], atol=1e-6)
    assert not scored[~on].any()


def test_whole_rows_without_a_mask_give_the_prompt_splits_loss_and_gradients(model_dir):
    # Multi-turn rows run whole, sorted by length, under causal attention with no mask: the same
    # objective as cutting them at their prompts, in another summation order.
    policy = load_model(model_dir)
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=128, kl_beta=0.1, advantage="turn")
    batch = pack(multi_turn_rollouts(3), config, pad_id=policy.pad_id)
    learner = Learner(policy, config)

    def loss_and_grads(whole_rows):
        learner.network.zero_grad()
        micros = split_micro_batches(by_length(batch) if whole_rows else batch, config.micro_batch_size)
        total = 0.0
        for micro in micros:
            loss, _ = learner._loss(micro, policy.device, whole_rows)
            loss.backward()
            total += loss.item()
        return total, {k: p.grad.numpy().copy() for k, p in learner.network.named_parameters()}

    (split_loss, split_grads), (whole_loss, whole_grads) = loss_and_grads(False), loss_and_grads(True)
    assert whole_loss == pytest.approx(split_loss, abs=1e-6)
    for name, grad in split_grads.items():
        np.testing.assert_allclose(whole_grads[name], grad, atol=1e-6, err_msg=name)


def test_old_logprobs_of_whole_rows_equal_the_masked_forwards(model_dir):
    policy = load_model(model_dir)
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=128, num_iterations=2)
    batch = pack(multi_turn_rollouts(3), config, pad_id=policy.pad_id)
    learner = Learner(policy, config)
    learner.pair_cost = 1.0  # attention dear enough that whole rows pay
    assert not split_pays(batch, config.micro_batch_size, learner.pair_cost)
    want = policy.logprobs(batch.input_ids, batch.attention_mask, scored=batch.loss_mask)
    np.testing.assert_allclose(learner._old_logprobs(batch), want, atol=1e-6)


@pytest.mark.parametrize("whole_rows", [False, True], ids=["prompt-split", "whole-rows"])
def test_the_kl_reference_runs_once_a_batch_and_changes_nothing(model_dir, whole_rows):
    # Two iterations on one batch: the frozen reference's logprobs of a micro-batch are the same at
    # both, so the second reuses the first's, and the step is the one that recomputes them, bit for bit.
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=128, kl_beta=0.1, num_iterations=2, lr=1e-3, advantage="turn")

    def step(keep_references):
        policy = load_model(model_dir)
        batch = pack(multi_turn_rollouts(3), config, pad_id=policy.pad_id)
        learner = Learner(policy, config)
        learner.pair_cost = 1.0 if whole_rows else 0.0  # which layout the micro-batches take
        calls = []
        learner.reference.register_forward_hook(lambda *_: calls.append(1))
        train_step = Learner.train_step if keep_references else BaseLearner.train_step  # the base: no reuse
        metrics = train_step(learner, batch)
        return metrics, params(policy.model), len(calls), len(learner._my_micro_batches(pad_rows(batch, learner.row_multiple))[0])

    (kept, kept_weights, kept_calls, micro_batches), (fresh, fresh_weights, fresh_calls, _) = step(True), step(False)
    assert (kept_calls, fresh_calls) == (micro_batches, 2 * micro_batches)
    assert kept == fresh
    for name, value in fresh_weights.items():
        np.testing.assert_array_equal(kept_weights[name], value, err_msg=name)


def test_micro_batches_of_like_lengths_give_the_step_of_one_micro_batch(model_dir, monkeypatch):
    # Whole rows run in micro-batches cut where lengths differ (length_groups); the gradients of any
    # cut add up to the one batch's, in another float order.
    from textgym.algos.torch import learner as torch_learner

    results = []
    for one_group in (False, True):
        with monkeypatch.context() as patch:
            if one_group:
                patch.setattr(torch_learner, "length_groups", lambda lengths, *_: [np.arange(len(lengths))])
            policy = load_model(model_dir)
            config = GRPOConfig(group_size=4, micro_batch_size=16, max_length=128, kl_beta=0.1, lr=1e-3, advantage="turn")
            batch = pack(multi_turn_rollouts(3, n=16), config, pad_id=policy.pad_id)
            learner = Learner(policy, config)
            learner.pair_cost = 1.0  # whole rows, and attention dear enough to cut them often
            micros, whole_rows = learner._my_micro_batches(pad_rows(batch, learner.row_multiple))
            results.append((learner.train_step(batch), params(policy.model), [m.shape[0] for m in micros], whole_rows))
    (cut, cut_weights, cut_rows, whole), (one, one_weights, one_rows, _) = results
    assert whole and one_rows == [16] and len(cut_rows) > 2 and sum(cut_rows) == 16
    for name in ("loss/total", "loss/kl", "stats/grad_norm"):
        assert cut[name] == pytest.approx(one[name], abs=1e-6)
    for name, value in one_weights.items():
        np.testing.assert_allclose(cut_weights[name], value, atol=2e-5, err_msg=name)


def test_gradient_accumulation_does_not_change_the_step(model_dir):
    results = []
    for micro in (1, 2, 8):
        policy = load_model(model_dir)
        config = GRPOConfig(group_size=4, micro_batch_size=micro, lr=1e-3, max_length=64, loss_aggregation="seq-mean-token-mean")
        batch = pack(random_rollouts(5), config, pad_id=policy.pad_id)
        metrics = Learner(policy, config).train_step(batch)
        results.append((metrics["loss/total"], params(policy.model)))
    for loss, weights in results[1:]:
        assert loss == pytest.approx(results[0][0], abs=1e-6)
        for name, value in weights.items():
            # Adam moves every weight by ~lr = 1e-3; float32 summation order may differ by far less.
            np.testing.assert_allclose(value, results[0][1][name], atol=2e-5, err_msg=name)


def test_a_shared_prompt_runs_once_and_scores_like_a_full_forward(model_dir):
    policy = load_model(model_dir)
    rng = np.random.default_rng(9)
    prompts = [p for n in (4, 9) for p in [rng.integers(0, 256, n).astype(np.int32)] * 4]  # two groups of four
    ids, lps = policy.generate(prompts, max_new_tokens=6, temperature=1.0, seed=3, eos_ids=[])
    assert not np.array_equal(ids[0], ids[1])  # one prefill, yet every row samples on its own
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
            token_ids=np.concatenate([p, o]),
            loss_mask=np.r_[np.zeros(len(p)), np.ones(len(o))].astype(np.int8),
            logprobs=np.r_[np.zeros(len(p)), lp].astype(np.float32),
            group=i // 4,
        )
        for i, (p, o, lp) in enumerate(zip(prompts, ids, lps))
    ]
    config = GRPOConfig(group_size=4, micro_batch_size=5, lr=1e-3, max_length=64)  # the second micro-batch has padding rows
    batch = pack(rollouts, config, pad_id=policy.pad_id)
    assert len(split_prompts(batch, policy.pad_id).prompt_ids) == 3  # two prompts and the padding rows' one
    expected, _ = reference_loss(policy.logprobs(batch.input_ids, batch.attention_mask), batch, config)
    metrics = Learner(policy, config).train_step(batch)
    assert metrics["stats/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # the learner scores what the sampler drew
    assert metrics["loss/total"] == pytest.approx(expected, abs=1e-6)


def test_without_sampler_logprobs_the_first_ratio_is_one(model_dir):
    policy = load_model(model_dir)
    config = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-3, num_iterations=2, max_length=64)
    batch = pack(random_rollouts(6, with_logprobs=False), config, pad_id=policy.pad_id)
    assert batch.old_logprobs is None
    first = Learner(policy, config).update(batch.replace(old_logprobs=policy.logprobs(batch.input_ids, batch.attention_mask)))
    assert first["stats/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    metrics = Learner(load_model(model_dir), config).train_step(batch)
    assert metrics["stats/ratio_mean"] > 0.0 and np.isfinite(metrics["loss/total"])


def test_save_restore_continues_exactly_and_export_loads(model_dir, tmp_path):
    config = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-3, kl_beta=0.02, lr_schedule="linear", total_steps=4, max_length=64)
    batches = [pack(random_rollouts(s), config, pad_id=0) for s in (10, 11)]

    policy = load_model(model_dir)
    learner = Learner(policy, config)
    learner.train_step(batches[0])
    learner.save(tmp_path / "ckpt")
    straight = learner.train_step(batches[1])
    want = params(policy.model)

    resumed_policy = load_model(tmp_path / "ckpt")
    resumed = Learner(resumed_policy, config)
    resumed.restore(tmp_path / "ckpt")
    assert resumed.step == 1
    again = resumed.train_step(batches[1])
    assert again == pytest.approx(straight, abs=1e-6)
    for name, value in params(resumed_policy.model).items():
        np.testing.assert_allclose(value, want[name], atol=1e-6, err_msg=name)

    learner.export(tmp_path / "hf")
    exported = load_model(tmp_path / "hf")
    ids = batches[0].input_ids[:2]
    mask = batches[0].attention_mask[:2]
    np.testing.assert_allclose(exported.logprobs(ids, mask), policy.logprobs(ids, mask), atol=1e-6)


def test_restore_rejects_a_mismatched_checkpoint(model_dir, tmp_path):
    other = tiny.create(tmp_path / "big", size=tiny.TinySize(hidden_size=48, intermediate_size=64, num_hidden_layers=2))
    learner = Learner(load_model(other), GRPOConfig())
    learner.save(tmp_path / "ckpt")
    small = Learner(load_model(model_dir), GRPOConfig())
    with pytest.raises(KeyError, match="mis-shaped"):
        small.restore(tmp_path / "ckpt")
    with pytest.raises(FileNotFoundError):
        small.restore(model_dir)
