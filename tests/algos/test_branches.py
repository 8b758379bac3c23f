"""Branched GRPO groups: where they start, that they continue the saved context exactly, and that
a run with them trains, records them and resumes exactly."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import textgym  # noqa: F401  (registers the ids)
from textgym.algos.grpo.seeds import SeedTree
from textgym.algos.models import tiny
from textgym.algos.rollouts.branches import demonstrator_starts, play_branches, rollout_starts, state_digest
from textgym.rollout import Rollout, rollout_schema

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.algos.test_train import SMALL, TWO_TURN_ID, comparable, config, weights
from textgym.algos import train as train_module
from textgym.algos.train.report import read_metrics

SUDOKU = {"size": 4, "blanks": 3, "max_turns": 8, "board": "compact", "reward": "dense"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def episode(group: int, reward: float, states: list[bytes]) -> Rollout:
    return Rollout("e", "t", 0, [], reward, False, len(states), True, False, group=group, turn_states=states)


def logged(run, step: str) -> list[dict]:
    """A step's logged episodes, without their timings."""
    lines = (run / "rollouts" / step).read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in ("timing", "turn_timing")} for line in lines]


def test_start_states_come_from_disagreeing_groups_first_and_never_twice():
    rollouts = [
        episode(0, 0.0, [b"a0", b"a1"]),
        episode(0, 0.0, [b"a0", b"a1"]),  # the same episode twice: the same states
        episode(1, 1.0, [b"b0", b"b1", b"b2"]),
        episode(1, 0.0, [b"b0", b"c1"]),
    ]
    picked = rollout_starts(rollouts, 3, np.random.default_rng(0))
    assert {s.state for s in picked} <= {b"b0", b"b1", b"b2", b"c1"}  # group 1 disagreed, group 0 did not
    everything = rollout_starts(rollouts, 10, np.random.default_rng(0))
    assert sorted(s.state for s in everything) == [b"a0", b"a1", b"b0", b"b1", b"b2", b"c1"]  # each state once
    assert [s.state for s in everything[:4]] == [s.state for s in rollout_starts(rollouts, 4, np.random.default_rng(0))]
    assert {(s.state, s.start_turn) for s in everything} >= {(b"b2", 2), (b"a0", 0)}
    assert all(s.source == "rollouts" for s in everything)


def test_demonstrator_starts_are_distinct_reproducible_states_of_oracle_episodes():
    tree = SeedTree(3)
    starts = demonstrator_starts("textgym/Sudoku-v0", SUDOKU, {"place": 1, "noise": 0.5}, 6, tree, step=2)
    again = demonstrator_starts("textgym/Sudoku-v0", SUDOKU, {"place": 1, "noise": 0.5}, 6, tree, step=2)
    later = demonstrator_starts("textgym/Sudoku-v0", SUDOKU, {"place": 1, "noise": 0.5}, 6, tree, step=3)
    assert len(starts) == 6 and len({state_digest(s.state) for s in starts}) == 6
    assert [s.state for s in starts] == [s.state for s in again]
    assert [s.state for s in starts] != [s.state for s in later]
    env = gym.make("textgym/Sudoku-v0", **SUDOKU).unwrapped
    for s in starts:
        env.reset(options={"state": s.state})  # a live episode of the env the run trains on
        assert env.turn == s.start_turn and s.source == "demonstrator" and s.prompt_ids is None
    assert len({s.start_turn for s in starts}) > 1  # a curriculum over the episode, not its start alone


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_branched_group_continues_the_saved_token_context_exactly(model_dir, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    from textgym.algos import backends
    from textgym.algos.models import load_tokenizer
    from textgym.algos.rollouts import seeded, token_envs
    from textgym.rollout import collect

    model = backends.load_backend(backend).load_model(model_dir)
    venv = token_envs.token_venv(TWO_TURN_ID, {}, load_tokenizer(model_dir), tiny.compact_chat_template(), 6)
    sampler = lambda phase: seeded.SeededModelPolicy(model, SeedTree(0), phase, 0, max_new_tokens=4, temperature=1.0)
    try:
        source = collect(venv, sampler("train_sampler"), seeds=[1, 2], group_size=3, keep_states=True, env_id=TWO_TURN_ID)
        starts = rollout_starts(source, 3, np.random.default_rng(0))
        branches = play_branches(venv, sampler("branch_sampler"), starts, 2, turns=1)
    finally:
        venv.close()
    assert len(branches) == 6 and [r.group for r in branches] == [0, 0, 1, 1, 2, 2]
    for r in branches:
        start = starts[r.group]
        of = next(e for e in source if e.turn_states[start.start_turn] is start.state)
        prompt = r.token_ids[: r.turn_spans[0][0]]
        np.testing.assert_array_equal(prompt, of.token_ids[: of.turn_spans[start.start_turn][0]])  # the saved prefix, token for token
        assert not r.loss_mask[: prompt.size].any() and r.loss_mask[prompt.size :].any()  # only the continuation trains
        assert r.turns == 1 and r.branch == {"start_turn": start.start_turn, "source": "rollouts", "cut": start.start_turn == 0}


def test_training_with_branches_records_them_and_resumes_exactly(model_dir, tmp_path):
    run = lambda out, **k: config(model_dir, out, env=TWO_TURN_ID, steps=2, branch_groups=2, log_rollouts_every=1, **k)
    train_module.train(run(tmp_path / "straight"))
    train_module.train(run(tmp_path / "split", stop_after=1))
    train_module.train(run(tmp_path / "split"))
    straight, split = (read_metrics(tmp_path / d / "metrics.jsonl") for d in ("straight", "split"))
    timeless = lambda records: [{k: v for k, v in r.items() if k != "branch/seconds"} for r in comparable(records)]
    assert timeless(split) == timeless(straight)
    a, b = weights(tmp_path / "straight" / "final"), weights(tmp_path / "split" / "final")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for step in ("step_000001.jsonl", "step_000002.jsonl"):  # the step after the resume sampled the same branches
        assert logged(tmp_path / "straight", step) == logged(tmp_path / "split", step)

    record = straight[-1]
    assert record["branch/groups"] == 2 and record["branch/episodes"] == 8
    assert {"branch/success", "branch/reward_mean", "branch/zero_std_groups", "branch/seconds"} <= record.keys()
    lines = logged(tmp_path / "straight", "step_000002.jsonl")
    schema = pytest.importorskip("jsonschema").Draft202012Validator(rollout_schema())
    assert not [e.message for r in lines for e in schema.iter_errors(r)]
    ordinary, branched = [r for r in lines if r.get("branch") is None], [r for r in lines if r.get("branch")]
    assert len(ordinary) == 8 and len(branched) == 8
    assert {r["group"] for r in ordinary} == {0, 1} and {r["group"] for r in branched} == {2, 3}
    assert all(r["branch"]["source"] == "rollouts" and r["turns"] == 1 for r in branched)
    for g in (2, 3):
        assert sum(r["advantage"] for r in branched if r["group"] == g) == pytest.approx(0.0, abs=1e-4)


def test_demonstrator_branches_train(model_dir, tmp_path):
    out = tmp_path / "demo"
    train_module.train(config(model_dir, out, env=TWO_TURN_ID, steps=1, branch_groups=2, branch_turns=0, branch_source="demonstrator"))
    branched = [r for r in logged(out, "step_000001.jsonl") if r.get("branch")]
    assert len(branched) == 8 and all(r["branch"]["source"] == "demonstrator" and not r["branch"]["cut"] for r in branched)
    assert all(r["end_reason"] in ("success", "failure", "length") for r in branched)  # played to the end (branch_turns=0)


def test_branch_flags_reach_the_config(capsys):
    from textgym.cli import main

    argv = ["train", "--env", TWO_TURN_ID, "--branch-groups", "4", "--branch-turns", "0", "--branch-source", "demonstrator"]
    assert main([*argv, "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["branch_groups"], printed["branch_turns"], printed["branch_source"]) == (4, 0, "demonstrator")
    assert main(["train", "--env", TWO_TURN_ID, "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["branch_groups"], printed["branch_turns"], printed["branch_source"]) == (0, 1, "rollouts")
    assert main(["train", "--env", TWO_TURN_ID, "--branch-turns", "-1", "--print-config"]) == 2  # one clear line, no traceback
    assert "branch_turns" in capsys.readouterr().err
