"""Turn-level advantages: anchor groups by state key, the mix with the episode's, and per-token batches."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from tests.algos.tiny_batches import multi_turn_rollouts
from textgym.algos.grpo import GRPOConfig, drop_zero_std_groups, grpo_loss, pack, policy_prefix, split_micro_batches
from textgym.algos.grpo.credit import rollout_advantages
from textgym.algos.grpo.prompts import split_prompts
from textgym.algos.grpo.turns import turn_returns
from textgym.cli import main
from textgym.rollout import Rollout


def episode(group: int, keys: list[str], rewards: list[float]) -> Rollout:
    """An episode of one token per turn after a two-token prompt."""
    turns = len(rewards)
    ids = np.arange(2 + 2 * turns, dtype=np.int32)
    mask = np.r_[0, 0, np.tile([1, 0], turns)].astype(np.int8)
    spans = [(2 + 2 * t, 3 + 2 * t) for t in range(turns)]
    return Rollout(
        "e", "t", group, [], float(sum(rewards)), False, turns, True, False,
        token_ids=ids, loss_mask=mask, logprobs=-0.5 * mask.astype(np.float32), turn_spans=spans, group=group,
        turn_rewards=rewards, turn_state_keys=keys,
    )  # fmt: skip


# Group 0: three episodes leave from state "s"; the second is refused there twice (same state),
# the first moves on to "a" (met once). Group 1 also has an "s", which is not group 0's.
HAND = [
    episode(0, ["s", "a"], [0.0, 1.0]),
    episode(0, ["s", "s"], [0.0, 0.0]),
    episode(0, ["s"], [1.0]),
    episode(1, ["s"], [0.0]),
    episode(1, ["s"], [1.0]),
]


def test_turn_returns_discount_the_later_rewards():
    assert turn_returns([0.0, 1.0], 1.0).tolist() == [1.0, 1.0]
    assert turn_returns([1.0, 0.0, 1.0], 0.5).tolist() == [1.25, 0.5, 1.0]
    assert turn_returns([1.0, 0.0, 1.0], 0.0).tolist() == [1.0, 0.0, 1.0]


def test_a_hand_made_group_gets_the_anchor_groups_advantages():
    got = rollout_advantages(HAND, GRPOConfig(group_size=3, advantage="turn", turn_advantage_weight=1.0))
    # Anchor (0, "s"): returns 1, 0, 0, 1 -> +-1; (0, "a") is met once -> 0; (1, "s"): 0 and 1 -> -1, +1.
    want = [[1.0, 0.0], [-1.0, -1.0], [1.0], [-1.0], [1.0]]
    for turns, expected in zip(got.turns, want):
        np.testing.assert_allclose(turns, expected, atol=1e-5)
    assert got.anchors.metrics() == {
        "turn/anchor_groups": 3.0,
        "turn/anchor_group_size_mean": pytest.approx(7 / 3),
        "turn/singleton_fraction": pytest.approx(1 / 7),
        "turn/credited_fraction": pytest.approx(6 / 7),
    }


def test_the_mix_weighs_the_episode_and_the_turn_and_the_discount_shortens_the_return():
    config = GRPOConfig(group_size=3, advantage="turn", turn_advantage_weight=0.25, turn_discount=0.5)
    got = rollout_advantages(HAND, config)
    episode_adv = np.array([1.0, 0.0, 1.0]) - 2 / 3
    episode_adv /= episode_adv.std() + 1e-6
    anchor = np.array([0.5, 0.0, 0.0, 1.0])  # group 0's turns at "s": returns with gamma 0.5
    anchor = (anchor - anchor.mean()) / (anchor.std() + 1e-6)
    want = [
        [0.75 * episode_adv[0] + 0.25 * anchor[0], 0.75 * episode_adv[0]],
        [0.75 * episode_adv[1] + 0.25 * anchor[1], 0.75 * episode_adv[1] + 0.25 * anchor[2]],
        [0.75 * episode_adv[2] + 0.25 * anchor[3]],
    ]
    for turns, expected in zip(got.turns, want):
        np.testing.assert_allclose(turns, expected, atol=1e-5)
    np.testing.assert_allclose(got.episodes[:3], episode_adv, atol=1e-5)  # the episode's own advantage is kept
    assert got.turns[3][0] == -got.turns[4][0] != 0  # group 1: its own group statistics


def test_negative_advantage_scale_applies_to_the_mixed_token_advantage():
    config = GRPOConfig(group_size=3, advantage="turn", turn_advantage_weight=0.5)
    full = rollout_advantages(HAND, config).turns
    positive_only = rollout_advantages(HAND, dataclasses.replace(config, negative_advantage_scale=0.0)).turns
    for a, b in zip(full, positive_only):
        np.testing.assert_array_equal(b, np.where(a < 0, 0.0, a))
    assert any((a < 0).any() for a in full)


def test_env_error_episodes_get_zero_and_leave_the_anchor_groups():
    failed = [dataclasses.replace(HAND[2], end_reason="env_error"), *HAND[:2]]
    got = rollout_advantages(failed, GRPOConfig(group_size=3, advantage="turn")).turns
    assert got[0].tolist() == [0.0]
    # Without the third episode, "s" in group 0 holds returns 1, 0, 0.
    anchor = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose([got[1][0], got[2][0], got[2][1]], (anchor - anchor.mean()) / anchor.std(), atol=1e-5)


def test_the_zero_std_filter_keeps_a_group_whose_turns_differ():
    # Both episodes of group 1 score 1 in all; at their shared start one turn paid and one did not.
    same_total = [episode(1, ["s", "b"], [1.0, 0.0]), episode(1, ["s", "c"], [0.0, 1.0])]
    rollouts = [*HAND[:3], *same_total]
    config = GRPOConfig(group_size=3, filter_zero_std_groups=True, turn_discount=0.0)
    assert drop_zero_std_groups(rollouts, config) == (HAND[:3], 1)
    assert drop_zero_std_groups(rollouts, dataclasses.replace(config, advantage="turn")) == (rollouts, 0)
    no_turns = dataclasses.replace(config, advantage="turn", turn_advantage_weight=0.0)
    assert drop_zero_std_groups(rollouts, no_turns) == (HAND[:3], 1)


def move(action: list[int], reward: float) -> Rollout:
    """A one-turn episode of group 0 from state "s": a two-token prompt, then ``action``."""
    ids = np.array([90, 91, *action], dtype=np.int32)
    mask = np.r_[0, 0, np.ones(len(action))].astype(np.int8)
    return Rollout(
        "e", "t", 0, [], reward, reward > 0, 1, True, False, token_ids=ids, loss_mask=mask,
        turn_spans=[(2, 2 + len(action))], group=0, turn_rewards=[reward], turn_state_keys=["s"],
    )  # fmt: skip


def test_prefix_credit_gives_each_choice_its_own_credit():
    # Every move writes token 5 (the format), then a cell (7 or 8), then a digit: only 7 then 1 pays.
    moves = [move([5, 7, 1], 1.0), move([5, 7, 2], 0.0), move([5, 8, 1], 0.0), move([5, 8, 1], 0.0)]
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=16, advantage="turn", advantage_scaling="none")
    prefix = pack(moves, dataclasses.replace(config, turn_token_credit="prefix"), pad_id=0).advantages
    # Mean return 0.25; cell 7's moves average 0.5 (+0.25), cell 8's 0 (-0.25); then each digit.
    want = [[0.0, 0.25, 0.5], [0.0, 0.25, -0.5], [0.0, -0.25, 0.0], [0.0, -0.25, 0.0]]
    np.testing.assert_allclose(prefix[:, 2:5], want, atol=1e-6)
    # The wrong digit at the right cell no longer pushes the cell down; a move's credits sum to its turn's.
    whole = pack(moves, config, pad_id=0).advantages
    np.testing.assert_allclose(whole[:, 2:5], [[0.75] * 3, [-0.25] * 3, [-0.25] * 3, [-0.25] * 3], atol=1e-6)
    np.testing.assert_allclose(prefix.sum(axis=1), whole[:, 2], atol=1e-6)
    assert not prefix[:, :2].any()


def test_prefix_credit_scales_as_the_turn_and_is_zero_for_a_state_met_once():
    moves = [move([5, 7, 1], 1.0), move([5, 7, 2], 0.0), move([5, 8, 1], 0.0)]
    config = GRPOConfig(group_size=3, advantage="turn", turn_token_credit="prefix")
    got = rollout_advantages(moves, config)
    for turn, tokens in zip(got.turns, got.tokens):
        np.testing.assert_allclose(tokens[0].sum(), turn[0], atol=1e-5)  # each action is unique here
    alone = rollout_advantages([dataclasses.replace(moves[0], group=1), *moves[1:]], config).tokens
    assert not alone[0][0].any()


def test_turn_advantages_need_per_turn_records():
    old = dataclasses.replace(HAND[0], turn_rewards=None)
    with pytest.raises(ValueError, match="turn_rewards and turn_state_keys"):
        pack([old, *HAND[1:3]], GRPOConfig(group_size=3, advantage="turn"), pad_id=0)


def test_pack_writes_each_turns_advantage_onto_its_tokens():
    rollouts = multi_turn_rollouts(2, n=8)
    config = GRPOConfig(group_size=4, micro_batch_size=3, max_length=64, advantage="turn", turn_advantage_weight=0.5)
    batch = pack(rollouts, config, pad_id=0)
    turns = rollout_advantages(rollouts, config).turns
    assert batch.advantages.shape == batch.shape and batch.shape[0] == 9  # padded to a multiple of 3 rows
    assert not batch.advantages[8].any() and not batch.advantages[batch.loss_mask == 0].any()
    for row, r in enumerate(rollouts):
        for t, (start, end) in enumerate(r.turn_spans):
            np.testing.assert_array_equal(batch.advantages[row, start:end], turns[row][t])
    # The episode mode's batch trains the same tokens with one advantage per row.
    flat = pack(rollouts, dataclasses.replace(config, advantage="episode"), pad_id=0)
    assert flat.advantages.shape == (9,)
    np.testing.assert_array_equal(flat.loss_weights, batch.loss_weights)


def test_samples_cut_prefixes_and_long_episodes_keep_each_tokens_turn():
    r = multi_turn_rollouts(7, n=4)
    r = [dataclasses.replace(x, turn_spans=list(x.turn_spans)) for x in r]
    three = next(i for i, x in enumerate(r) if len(x.turn_spans) >= 2)
    middle = r[three].turn_spans[1][0]
    r[three] = dataclasses.replace(r[three], sample_spans=[(0, middle), (0, len(r[three].token_ids))])
    config = GRPOConfig(group_size=4, micro_batch_size=2, max_length=12, advantage="turn")
    batch = pack([policy_prefix(x) for x in r], config, pad_id=0)
    turns = rollout_advantages(r, config).turns
    rows = [(i, a) for i, x in enumerate(r) for a, _ in (x.sample_spans or [(0, 0)])]
    for row, (i, a) in enumerate(rows):
        for t, (start, end) in enumerate(r[i].turn_spans):
            lo, hi = max(start - a, 0), min(end - a, 12)
            if lo < hi:
                np.testing.assert_array_equal(batch.advantages[row, lo:hi], turns[i][t] * batch.loss_mask[row, lo:hi])


def test_split_prompts_and_micro_batches_carry_the_token_advantages():
    rollouts = multi_turn_rollouts(3, n=8)
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=64, advantage="turn", turn_advantage_weight=0.7)
    batch = pack(rollouts, config, pad_id=0)
    rng = np.random.default_rng(0)
    logprobs = (batch.old_logprobs + rng.normal(0, 0.3, batch.shape) * batch.loss_mask).astype(np.float32)
    whole, _ = grpo_loss(logprobs, batch, config)
    parts = 0.0
    for start, micro in zip(range(0, batch.shape[0], 4), split_micro_batches(batch, 4)):
        split = split_prompts(micro, pad_id=0)
        assert split.rest.advantages.shape == split.rest.shape
        cut = np.where(micro.loss_mask.any(1), (micro.loss_mask > 0).argmax(1), 0)
        for row in range(micro.shape[0]):
            width = int(split.rest.attention_mask[row].sum())
            np.testing.assert_array_equal(split.rest.advantages[row, :width], micro.advantages[row, cut[row] : cut[row] + width])
        parts += grpo_loss(logprobs[start : start + 4], micro, config)[0]
    assert parts == pytest.approx(whole, abs=1e-9)


# Computed by the episode-level code before turn-level advantages existed, on the same batch:
# the advantages' sha256 and the loss as float.hex(). The loss matched bit for bit on the numpy
# that computed it; numpy releases reorder their float sums (2.4 moves one case's last bit), so it
# is held to 1e-12 relative, far below any change of the objective.
BEFORE = [
    ({}, "7dcc3ed4c3d788bc", "-0x1.ed9c7b197e83cp-4"),
    ({"policy_loss": "gspo", "negative_advantage_scale": 0.5}, "9c41d32eb1111a1b", "-0x1.53a2f5726895cp-2"),
    ({"policy_loss": "cispo", "advantage_scaling": "none"}, "dede0562309b8505", "0x1.d3bdd641d3adcp-2"),
    ({"advantage_scaling": "batch", "loss_aggregation": "seq-mean-token-mean"}, "b6d93006b0451b6b", "0x1.1462034ef9ec4p-9"),
]


@pytest.mark.parametrize(("changes", "advantages_sha", "loss_hex"), BEFORE)
@pytest.mark.parametrize("turn_fields", [True, False])
def test_episode_advantages_give_the_loss_of_before(changes, advantages_sha, loss_hex, turn_fields):
    rollouts = multi_turn_rollouts(5, n=12, turn_fields=turn_fields)
    rollouts[3] = dataclasses.replace(rollouts[3], end_reason="env_error")
    config = GRPOConfig(group_size=4, micro_batch_size=4, max_length=64, kl_beta=0.1, clip_eps_high=0.28, **changes)
    batch = pack(rollouts, config, pad_id=0)
    rng = np.random.default_rng(1)
    logprobs = (batch.old_logprobs + rng.normal(0, 0.3, batch.shape) * batch.loss_mask).astype(np.float32)
    ref = (logprobs + rng.normal(0, 0.2, batch.shape) * batch.loss_mask).astype(np.float32)
    loss, _ = grpo_loss(logprobs, batch, config, ref)
    assert batch.advantages.shape == (12,)
    assert hashlib.sha256(batch.advantages.tobytes()).hexdigest()[:16] == advantages_sha
    assert float(loss) == pytest.approx(float.fromhex(loss_hex), rel=1e-12, abs=0)


def test_config_validates_the_turn_fields_and_the_flags_set_them(capsys):
    for bad in ({"advantage": "step"}, {"turn_advantage_weight": 1.5}, {"turn_discount": -0.1}, {"turn_token_credit": "cell"}):
        with pytest.raises(ValueError):
            GRPOConfig(**bad)
    argv = ["train", "--preset", "sudoku-tiny", "--advantage", "turn", "--turn-advantage-weight", "0.5", "--turn-discount", "0"]
    assert main([*argv, "--print-config"]) == 0
    grpo = json.loads(capsys.readouterr().out)["grpo"]
    assert (grpo["advantage"], grpo["turn_advantage_weight"], grpo["turn_discount"]) == ("turn", 0.5, 0.0)


class _Recorder:
    """A learner that keeps the batch it is given."""

    def __init__(self):
        self.batches = []

    def train_step(self, batch):
        self.batches.append(batch)
        return {"loss": 0.0}


def test_rejection_sampling_is_an_sft_step_on_the_accepted_turns():
    """Each turn whose return is above 0 is trained with advantage 1 and nothing else is; an
    episode without one is left out, and a group without one is counted."""
    from types import SimpleNamespace

    from textgym.algos.train.step import learn_from, logged_advantages

    rollouts = [*HAND, episode(2, ["s"], [0.0])]  # group 2 has no accepted turn
    config = GRPOConfig(group_size=3, advantage="rejection-sampling", turn_discount=0.0, max_length=64)
    learner = _Recorder()
    update = learn_from(config, SimpleNamespace(pad_id=0), learner, rollouts)
    (batch,) = learner.batches
    # Accepted: the second turn of episode 0 and the only turns of episodes 2 and 4.
    assert len(update.kept) == 3 and batch.attention_mask[:3].sum(axis=1).tolist() == [5, 3, 3]  # cut after the last accepted turn
    assert batch.num_sequences == 3 and batch.token_count == 3 and batch.old_logprobs is None
    for row, position in enumerate([4, 2, 2]):
        assert np.flatnonzero(batch.loss_mask[row]).tolist() == [position]
        assert batch.advantages[row] == 1.0
    assert update.zero_std == 1
    episodes, turns = logged_advantages(config, rollouts, update)
    assert episodes == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert turns == [[0.0, 1.0], [0.0, 0.0], [1.0], [0.0], [1.0], [0.0]]
    # With the full return every turn before a paid one is accepted too: episode 0's first turn.
    full = learn_from(dataclasses.replace(config, turn_discount=1.0), SimpleNamespace(pad_id=0), _Recorder(), rollouts)
    assert full.kept[0].loss_mask.tolist() == [0, 0, 1, 0, 1, 0]


def test_the_flag_selects_rejection_sampling(capsys):
    argv = ["train", "--preset", "sudoku-moves-tiny", "--advantage", "rejection-sampling", "--turn-discount", "0"]
    assert main([*argv, "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["grpo"]["advantage"] == "rejection-sampling"
