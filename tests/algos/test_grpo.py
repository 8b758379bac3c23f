"""The framework-free GRPO core: config, advantages, packing, aggregation and the loss."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textgym.algos.grpo import (
    GRPOConfig,
    bucket_length,
    fine_bucket,
    group_advantages,
    group_ids,
    grpo_loss,
    pack,
    split_micro_batches,
)
from textgym.algos.grpo.batch import by_length, length_groups, take_rows, trimmed
from textgym.algos.grpo.prompts import split_pays
from textgym.rollout import Rollout

MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant"]


def rollout(ids, mask, reward=0.0, logprobs=None, group=None, truncated=False):
    return Rollout(
        env_id="e",
        task_id="t",
        seed=0,
        messages=[],
        reward=reward,
        success=reward > 0,
        turns=1,
        terminated=not truncated,
        truncated=truncated,
        token_ids=np.asarray(ids, dtype=np.int32),
        loss_mask=np.asarray(mask, dtype=np.int8),
        logprobs=None if logprobs is None else np.asarray(logprobs, dtype=np.float32),
        group=group,
    )


def random_rollouts(rng, n, max_len=20):
    out = []
    for i in range(n):
        size = int(rng.integers(3, max_len))
        mask = np.zeros(size, dtype=np.int8)
        mask[int(rng.integers(1, size)) :] = 1
        lp = np.where(mask > 0, -rng.random(size), 0.0)
        out.append(rollout(rng.integers(1, 50, size), mask, float(rng.integers(0, 2)), lp, group=i // 4))
    return out


# --- config ---------------------------------------------------------------------------------


def test_config_is_frozen_keyword_only_and_validates_literals():
    with pytest.raises(TypeError):
        GRPOConfig(8)  # type: ignore[misc]
    cfg = GRPOConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="loss_aggregation"):
        GRPOConfig(loss_aggregation="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="advantage_scaling"):
        GRPOConfig(advantage_scaling="std")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig(group_size=0)
    assert GRPOConfig(max_length=77).dr_grpo_constant == 77
    assert GRPOConfig(loss_constant=5).dr_grpo_constant == 5


# --- advantages ------------------------------------------------------------------------------


def test_group_advantages_are_standardised_within_each_group():
    rewards = np.array([1.0, 0.0, 0.0, 0.0, 3.0, 1.0])
    groups = np.array([0, 0, 0, 0, 1, 1])
    adv = group_advantages(rewards, groups, "group", eps=0.0)
    np.testing.assert_allclose(adv[:4], [np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3)], rtol=1e-6)
    np.testing.assert_allclose(adv[4:], [1.0, -1.0], rtol=1e-6)
    for g in (0, 1):
        assert abs(adv[groups == g].sum()) < 1e-5


def test_uniform_group_gets_zero_advantage_in_every_scaling():
    rewards = np.array([1.0, 1.0, 0.0, 1.0])
    groups = np.array([0, 0, 1, 1])
    for scaling in ("group", "batch", "none"):
        adv = group_advantages(rewards, groups, scaling)
        assert adv[0] == 0 and adv[1] == 0


def test_batch_and_none_scaling():
    rewards = np.array([2.0, 0.0, 1.0, 1.0])
    groups = np.array([0, 0, 1, 1])
    np.testing.assert_allclose(group_advantages(rewards, groups, "none"), [1, -1, 0, 0])
    np.testing.assert_allclose(group_advantages(rewards, groups, "batch", eps=0.0), np.array([1, -1, 0, 0]) / rewards.std(), rtol=1e-6)


@pytest.mark.parametrize("scale", [0.0, 0.25, 1.0])
def test_negative_advantage_scale_shrinks_only_the_below_average_episodes(scale):
    rollouts = [rollout([1, 2, 3], [0, 1, 1], reward, [0.0, -1.0, -1.0], group=0) for reward in (1.0, 1.0, 0.0, 0.0)]
    full = pack(rollouts, GRPOConfig(group_size=4), pad_id=0).advantages[:4]  # rows past 4 pad the bucket
    scaled = pack(rollouts, GRPOConfig(group_size=4, negative_advantage_scale=scale), pad_id=0).advantages[:4]
    np.testing.assert_allclose(full, [1, 1, -1, -1], atol=1e-5)
    np.testing.assert_allclose(scaled, np.where(full < 0, scale * full, full))
    with pytest.raises(ValueError, match="negative_advantage_scale"):
        GRPOConfig(negative_advantage_scale=-1.0)


def test_group_ids_from_records_or_consecutive_chunks():
    np.testing.assert_array_equal(group_ids([None] * 6, 3), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(group_ids([7, 3, 7, 3], 2), [1, 0, 1, 0])
    with pytest.raises(ValueError):
        group_ids([1, None], 2)


# --- packing ---------------------------------------------------------------------------------


def test_pack_shapes_buckets_and_padding():
    cfg = GRPOConfig(group_size=2, micro_batch_size=4, max_length=64)
    rs = [
        rollout([1, 2, 3, 4, 5], [0, 0, 1, 1, 1], 1.0, [0, 0, -1, -2, -3], group=0),
        rollout([1, 2, 3, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], [0, 0, 0] + [1] * 15, 0.0, [0.0] * 3 + [-0.5] * 15, group=0),
    ]
    b = pack(rs, cfg, pad_id=0)
    assert b.shape == (4, 32)  # rows padded to micro_batch_size, 18 tokens bucketed to 32
    assert b.input_ids.dtype == np.int32 and b.loss_mask.dtype == np.float32
    np.testing.assert_array_equal(b.input_ids[0, :6], [1, 2, 3, 4, 5, 0])
    np.testing.assert_array_equal(b.attention_mask[0, :6], [1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(b.positions[0, :7], [0, 1, 2, 3, 4, 4, 4])
    np.testing.assert_array_equal(b.old_logprobs[0, :5], [0, 0, -1, -2, -3])
    assert b.loss_mask[2:].sum() == 0 and b.advantages[2:].sum() == 0 and b.attention_mask[2:].sum() == 0
    assert b.num_sequences == 2 and b.token_count == 18
    np.testing.assert_allclose(b.advantages[:2], [1.0, -1.0], atol=1e-5)
    np.testing.assert_allclose(b.loss_weights.sum(), 1.0, rtol=1e-6)


def test_pack_cuts_long_sequences_masks_first_token_and_truncated_episodes():
    cfg = GRPOConfig(group_size=2, micro_batch_size=2, max_length=8, mask_truncated=True)
    rs = [rollout(np.arange(1, 13), [1] * 12, 1.0, group=0), rollout([1, 2, 3], [0, 1, 1], 0.0, group=0, truncated=True)]
    b = pack(rs, cfg, pad_id=0)
    assert b.shape == (2, 8)
    np.testing.assert_array_equal(b.input_ids[0], np.arange(1, 9))
    assert b.loss_mask[0, 0] == 0 and b.loss_mask[0, 1:].sum() == 7
    assert b.loss_mask[1].sum() == 0 and b.loss_weights[1].sum() == 0
    assert b.advantages[1] != 0  # the truncated episode still informs its group's statistics
    assert b.old_logprobs is None


def test_pack_rejects_text_rollouts_and_mixed_logprobs():
    cfg = GRPOConfig(group_size=2)
    text = dataclasses.replace(rollout([1, 2], [0, 1]), token_ids=None)
    with pytest.raises(ValueError, match="TokenObservation"):
        pack([text], cfg, pad_id=0)
    with pytest.raises(ValueError, match="logprobs"):
        pack([rollout([1, 2], [0, 1], logprobs=[0, -1]), rollout([1, 2], [0, 1])], cfg, pad_id=0)


def test_bucket_length_limits_the_number_of_shapes():
    shapes = {bucket_length(n, 1024) for n in range(1, 1025)}
    assert shapes == {16, 32, 64, 128, 256, 512, 1024}


def test_fine_bucket_wastes_little_and_keeps_shapes_few():
    sizes = {n: fine_bucket(n) for n in range(1, 4097)}
    assert all(n <= b for n, b in sizes.items())
    assert all(b - n < max(16, n / 8) for n, b in sizes.items())  # a sixteenth of the power of two above n
    for low in (256, 512, 1024, 2048):  # 8 shapes per doubling (16 steps of 16 below 256)
        assert len({b for n, b in sizes.items() if low < n <= 2 * low}) == 8
    assert fine_bucket(450) == 480  # the sampler benchmark's 450-token prompts: 512 would pad them by 14%


# --- aggregation -----------------------------------------------------------------------------


def two_sequence_batch(mode):
    """Sequence A: 1 policy token, advantage -1; sequence B: 3 policy tokens, advantage +1."""
    cfg = GRPOConfig(group_size=2, micro_batch_size=2, max_length=16, loss_aggregation=mode, loss_constant=10, advantage_scaling="none")
    rs = [rollout([1, 2], [0, 1], 0.0, [0, 0], group=0), rollout([1, 2, 3, 4], [0, 1, 1, 1], 2.0, [0, 0, 0, 0], group=0)]
    return cfg, pack(rs, cfg, pad_id=0)  # advantages -1 and +1; with ratio 1, token loss = -A


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("token-mean", (1 - 3) / 4),  # sum over 4 tokens / 4
        ("seq-mean-token-mean", (1 + -1) / 2),  # mean per seq, mean over 2 seqs
        ("seq-mean-token-sum", (1 - 3) / 2),
        ("constant", (1 - 3) / (2 * 10)),
    ],
)
def test_loss_aggregation_modes(mode, expected):
    cfg, b = two_sequence_batch(mode)
    loss, metrics = grpo_loss(b.old_logprobs, b, cfg)
    assert loss == pytest.approx(expected, abs=1e-6)
    assert metrics["loss/policy"] == pytest.approx(expected, abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), mode=st.sampled_from(MODES), beta=st.sampled_from([0.0, 0.1]))
def test_micro_batching_never_changes_the_loss(seed, mode, beta):
    rng = np.random.default_rng(seed)
    cfg = GRPOConfig(group_size=4, micro_batch_size=8, max_length=32, loss_aggregation=mode, kl_beta=beta)
    b = pack(random_rollouts(rng, 8), cfg, pad_id=0)
    logprobs = b.old_logprobs + rng.normal(0, 0.3, b.shape).astype(np.float32)
    ref = b.old_logprobs + rng.normal(0, 0.3, b.shape).astype(np.float32)
    total, metrics = grpo_loss(logprobs, b, cfg, ref)
    for mbs in (1, 2, 4):
        parts = [
            grpo_loss(logprobs[i : i + mbs], micro, cfg, ref[i : i + mbs])
            for i, micro in zip(range(0, 8, mbs), split_micro_batches(b, mbs))
        ]
        assert sum(p[0] for p in parts) == pytest.approx(total, rel=1e-6, abs=1e-9)
        for key, value in metrics.items():
            assert sum(p[1][key] for p in parts) == pytest.approx(value, rel=1e-6, abs=1e-9)


def test_split_micro_batches_rejects_a_size_that_does_not_divide():
    cfg = GRPOConfig(group_size=2, micro_batch_size=4)
    b = pack(random_rollouts(np.random.default_rng(0), 4), cfg, pad_id=0)
    with pytest.raises(ValueError):
        split_micro_batches(b, 3)


# --- clipping and KL -------------------------------------------------------------------------


def one_token_batch(advantage, cfg):
    b = pack([rollout([1, 2], [0, 1], 0.0, [0.0, 0.0], group=0)], cfg, pad_id=0)
    return b.replace(advantages=np.array([advantage], dtype=np.float32))


def second_token(b, x):
    """Logprobs for a one-token batch: ``x`` at the policy token, 0 elsewhere."""
    lp = np.zeros(b.shape)
    lp[0, 1] = x
    return lp


def numeric_grad(logprob, b, cfg, h=1e-5):
    def f(x):
        return grpo_loss(second_token(b, x), b, cfg)[0]

    return (f(logprob + h) - f(logprob - h)) / (2 * h)


@pytest.mark.parametrize(
    "advantage,log_ratio,clipped",
    [
        (1.0, np.log(1.5), True),  # good action already much more likely: no push further
        (1.0, np.log(1.1), False),
        (1.0, np.log(0.5), False),  # good action less likely: always pushed up
        (-1.0, np.log(0.5), True),  # bad action already much less likely: no push further
        (-1.0, np.log(0.9), False),
        (-1.0, np.log(1.5), False),  # bad action more likely: always pushed down
    ],
)
def test_clip_removes_exactly_the_gradient_ppo_says(advantage, log_ratio, clipped):
    cfg = GRPOConfig(group_size=1, micro_batch_size=1, clip_eps_low=0.2, clip_eps_high=0.2)
    b = one_token_batch(advantage, cfg)
    _, metrics = grpo_loss(second_token(b, log_ratio), b, cfg)
    assert metrics["stats/clip_frac"] == float(clipped)
    grad = numeric_grad(log_ratio, b, cfg)
    if clipped:
        assert grad == 0.0
    else:  # d/dx of -exp(x) * A
        assert grad == pytest.approx(-np.exp(log_ratio) * advantage, rel=1e-4)


def test_clip_higher_is_asymmetric():
    cfg = GRPOConfig(group_size=1, micro_batch_size=1, clip_eps_low=0.2, clip_eps_high=0.28)
    b = one_token_batch(1.0, cfg)
    assert grpo_loss(second_token(b, np.log(1.25)), b, cfg)[1]["stats/clip_frac"] == 0.0
    assert grpo_loss(second_token(b, np.log(1.3)), b, cfg)[1]["stats/clip_frac"] == 1.0
    neg = one_token_batch(-1.0, cfg)
    assert grpo_loss(second_token(neg, np.log(0.79)), neg, cfg)[1]["stats/clip_frac"] == 1.0


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    cfg = GRPOConfig(group_size=1, micro_batch_size=1, kl_beta=0.5)
    b = one_token_batch(0.0, cfg)
    lp = second_token(b, -1.0)
    assert grpo_loss(lp, b, cfg, ref_logprobs=lp)[1]["loss/kl"] == 0.0
    loss, m = grpo_loss(lp, b, cfg, ref_logprobs=second_token(b, -1.5))
    d = -0.5
    assert m["loss/kl"] == pytest.approx(np.exp(d) - d - 1)
    assert loss == pytest.approx(0.5 * m["loss/kl"])
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(lp, b, cfg)


def test_padding_garbage_never_leaks_into_the_loss():
    cfg = GRPOConfig(group_size=2, micro_batch_size=4, kl_beta=0.1)
    b = pack(random_rollouts(np.random.default_rng(1), 2), cfg, pad_id=0)
    lp = np.where(b.loss_mask > 0, b.old_logprobs - 0.1, 0.0)
    noisy = np.where(b.loss_mask > 0, lp, 1e3)
    ref = np.where(b.loss_mask > 0, lp + 0.2, -1e3)
    a = grpo_loss(lp, b, cfg, np.where(b.loss_mask > 0, ref, 0.0))
    c = grpo_loss(noisy, b, cfg, ref)
    assert a[0] == pytest.approx(c[0]) and np.isfinite(c[0])


def test_env_error_episodes_leave_the_loss_and_the_group_statistics():
    cfg = GRPOConfig(group_size=4, micro_batch_size=4, advantage_scaling="none")
    ids, mask = [1, 2, 3, 4], [0, 0, 1, 1]
    rollouts = [rollout(ids, mask, reward, group=0) for reward in (1.0, 0.0, 0.0, 0.0)]
    failed = dataclasses.replace(rollouts[1], end_reason="env_error")
    batch = pack([rollouts[0], failed, rollouts[2], rollouts[3]], cfg, pad_id=0)
    assert batch.env_errors == 1
    assert batch.loss_mask[1].sum() == 0 and batch.advantages[1] == 0.0
    # the group mean is over the three real episodes: 1/3, not 1/4
    np.testing.assert_allclose(batch.advantages[[0, 2, 3]], [2 / 3, -1 / 3, -1 / 3], rtol=1e-6)
    assert batch.token_count == 6
    clean = pack(rollouts, cfg, pad_id=0)
    assert clean.env_errors == 0 and clean.advantages[0] == pytest.approx(0.75)


def test_trainable_layers_is_validated_and_names_what_trains():
    from textgym.algos.grpo.learner import is_trainable

    with pytest.raises(ValueError, match="trainable_layers"):
        GRPOConfig(trainable_layers=-1)
    assert GRPOConfig(trainable_layers=0).trainable_layers == 0
    assert is_trainable("model.embed_tokens.weight", 4, None)
    # Zero layers: only what sits above the last layer (final norm, an untied head) trains.
    assert [is_trainable(n, 4, 0) for n in ("model.layers.3.mlp.up_proj.weight", "model.norm.weight", "lm_head.weight")] == [
        False,
        True,
        True,
    ]
    assert is_trainable("model.layers.0.self_attn.q_proj.weight", 4, 4) and not is_trainable("model.embed_tokens.weight", 4, 4)


def test_the_prompt_split_pays_where_rows_are_mostly_a_shared_prompt():
    cfg = GRPOConfig(group_size=4, max_length=2048, micro_batch_size=4)
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 100, 400).astype(np.int32)
    one_turn = [rollout(np.r_[prompt, rng.integers(0, 100, 20)], [0] * 400 + [1] * 20, reward=i % 2, group=0) for i in range(4)]
    # Multi-turn: a short shared prompt, then long turns of each episode's own (env tokens between).
    turns = [np.r_[prompt[:30], rng.integers(0, 100, n)] for n in (300, 700, 1000, 1500)]
    multi_turn = [rollout(ids, [0] * 30 + [1, 0] * ((len(ids) - 30) // 2), reward=i % 2, group=0) for i, ids in enumerate(turns)]
    pair_cost = 1 / 578  # the 4-layer tiny model's
    assert split_pays(pack(one_turn, cfg, pad_id=0), 4, pair_cost)
    assert not split_pays(pack(multi_turn, cfg, pad_id=0), 4, pair_cost)


def test_rows_sorted_by_length_and_trimmed_keep_every_rows_arrays():
    cfg = GRPOConfig(group_size=2, max_length=64, micro_batch_size=2)
    rows = [rollout(np.arange(n) + 1, [0] * 2 + [1] * (n - 2), reward=float(n % 3 == 0), group=0) for n in (9, 3, 6, 4)]
    batch = pack(rows, cfg, pad_id=0)
    ordered = by_length(batch)
    assert ordered.attention_mask.sum(1).tolist() == [3, 4, 6, 9]
    short = trimmed(take_rows(ordered, slice(0, 2)))
    assert short.shape == (2, 4) and short.num_sequences == batch.num_sequences
    np.testing.assert_array_equal(short.input_ids, batch.input_ids[[1, 3], :4])
    np.testing.assert_array_equal(short.loss_mask, batch.loss_mask[[1, 3], :4])
    np.testing.assert_array_equal(short.advantages, batch.advantages[[1, 3]])


def _group_cost(lengths, groups, pair_cost, call_cost):
    return sum(len(g) * lengths[g].max() * (1 + pair_cost * lengths[g].max() / 2) + call_cost for g in groups)


@pytest.mark.parametrize("seed", range(5))
def test_length_groups_cover_every_row_once_and_cost_least(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 900, int(rng.integers(1, 70)))
    pair_cost, call_cost = 0.0017, 256
    groups = length_groups(lengths, 16, pair_cost, call_cost)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
    assert all(1 <= len(g) <= 16 for g in groups)
    # contiguous in length: no group's rows interleave with another's
    ranges = sorted((lengths[g].min(), lengths[g].max()) for g in groups)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(ranges, ranges[1:]))
    fixed = np.array_split(np.argsort(lengths, kind="stable"), range(16, len(lengths), 16))
    assert _group_cost(lengths, groups, pair_cost, call_cost) <= _group_cost(lengths, fixed, pair_cost, call_cost)
    # exhaustive over every cut of a few rows: nothing cheaper
    few = lengths[:7]
    order = np.argsort(few, kind="stable")
    best = min(
        _group_cost(few, np.split(order, [c for c, keep in zip(range(1, len(few)), mask) if keep]), pair_cost, call_cost)
        for mask in itertools.product([False, True], repeat=len(few) - 1)
    )
    assert _group_cost(few, length_groups(few, 16, pair_cost, call_cost), pair_cost, call_cost) == pytest.approx(best)


def test_length_groups_keep_like_rows_together_and_split_a_spread():
    assert [len(g) for g in length_groups(np.full(32, 300), 16, 0.0017)] == [16, 16]
    spread = np.array([71] * 8 + [500] * 8)
    groups = length_groups(spread, 16, 0.0017)
    assert [sorted(set(spread[g].tolist())) for g in groups] == [[71], [500]]
