"""collect for branched groups: per-group start states, a turn limit, and the states saved before each turn."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import textgym  # noqa: F401  (registers the ids)
from textgym.policies.base import PolicyOutput
from textgym.rollout import Rollout, collect
from textgym.tokenizer import tiny_tokenizer
from textgym.wrappers import TokenObservation

SUDOKU = {"size": 4, "blanks": 3, "max_turns": 8, "board": "compact", "reward": "dense"}


class NoisyMoves:
    """Sudoku's noisy demonstrator, one move a turn: a deterministic function of each slot's state."""

    def __init__(self, venv):
        self.venv = venv

    def act(self, observations, infos=None):
        return PolicyOutput(list(self.venv.unwrapped.call("oracle_action", place=1, noise=0.5)))


def sudoku_venv(num_envs: int, tokens: bool = False) -> gym.vector.VectorEnv:
    wrappers = [partial(TokenObservation, tokenizer=tiny_tokenizer())] if tokens else None
    return gym.make_vec("textgym/Sudoku-v0", num_envs=num_envs, wrappers=wrappers, **SUDOKU)


def test_keep_states_saves_the_state_before_every_policy_turn():
    venv = sudoku_venv(3)
    rollouts = collect(venv, NoisyMoves(venv), seeds=[4, 5], group_size=2, keep_states=True)
    env = gym.make("textgym/Sudoku-v0", **SUDOKU).unwrapped
    for r in rollouts:
        assert len(r.turn_states) == r.turns > 1
        assert "turn_states" not in r.to_dict()  # bytes for branching, not a record field
        for k, state in enumerate(r.turn_states):
            env.reset(options={"state": state})
            assert env.turn == k
            assert list(env.conversation) == r.messages[: len(env.conversation)]  # the episode's own prefix
    env.reset(seed=4)
    assert rollouts[0].turn_states[0] == env.get_state() == rollouts[1].turn_states[0]  # a group shares its start


def test_each_group_starts_from_its_own_state_and_stops_after_the_turn_limit():
    venv = sudoku_venv(4)
    source = collect(venv, NoisyMoves(venv), seeds=[4, 5], group_size=1, keep_states=True)
    starts = [source[0].turn_states[1], source[1].turn_states[2]]
    branches = collect(venv, NoisyMoves(venv), seeds=[4, 5], group_size=3, group_options=[{"state": s} for s in starts], turn_limit=1)
    assert [r.group for r in branches] == [0, 0, 0, 1, 1, 1]
    for r in branches:
        src, k = source[r.group], (1, 2)[r.group]
        assert r.turns == 1 and not r.terminated and not r.truncated and r.end_reason is None  # stopped, not ended
        # It continued its source: the same move on the same state answers the same.
        assert r.messages == src.messages[: len(r.messages)]
        assert r.reward == pytest.approx(_step_reward(starts[r.group], src.messages, k))


def test_an_episode_the_env_ends_within_the_limit_is_recorded_as_it_ended():
    venv = sudoku_venv(2)
    source = collect(venv, NoisyMoves(venv), seeds=[4], group_size=1, keep_states=True)[0]
    last = source.turn_states[-1]
    r = collect(venv, NoisyMoves(venv), seeds=[4], group_size=2, group_options=[{"state": last}], turn_limit=3)[0]
    assert r.turns == 1 and r.end_reason == source.end_reason and r.success == source.success


def test_token_branches_start_from_the_saved_token_prefix():
    venv = sudoku_venv(3, tokens=True)
    source = collect(venv, NoisyMoves(venv), seeds=[4], group_size=1, keep_states=True)[0]
    for k in range(source.turns):
        prefix = source.token_ids[: source.turn_spans[k][0]]
        options = [{"state": source.turn_states[k], "prompt_ids": prefix}, {"state": source.turn_states[k]}]
        exact, rendered = collect(venv, NoisyMoves(venv), seeds=[4, 4], group_size=1, group_options=options, turn_limit=1)
        for r in (exact, rendered):  # the tiny tokenizer encodes the rendering to the same ids
            start = r.turn_spans[0][0]
            np.testing.assert_array_equal(r.token_ids[:start], prefix)
            assert not r.loss_mask[:start].any()  # the saved prefix is the prompt
        end = source.turn_spans[k + 1][0] if k + 1 < source.turns else source.token_ids.size
        np.testing.assert_array_equal(exact.token_ids, source.token_ids[:end])  # the same move, the same tokens


def test_prompt_ids_are_the_prompt_even_where_the_rendering_differs():
    env = TokenObservation(gym.make("textgym/Sudoku-v0", **SUDOKU), tiny_tokenizer())
    ids, _ = env.reset(seed=4)
    state = env.unwrapped.get_state()
    other = ids.copy()
    other[5] = (other[5] + 1) % 200
    got, _ = env.reset(options={"state": state, "prompt_ids": other})
    np.testing.assert_array_equal(got, other)
    with pytest.raises(ValueError, match="prompt_ids"):
        env.reset(options={"state": state, "prompt_ids": np.array([[1, 2]])})


def test_bad_branch_arguments_are_refused():
    venv = sudoku_venv(2)
    with pytest.raises(ValueError, match="group_options"):
        collect(venv, NoisyMoves(venv), seeds=[1, 2], group_options=[None])
    with pytest.raises(ValueError, match="turn_limit"):
        collect(venv, NoisyMoves(venv), seeds=[1], turn_limit=0)


def test_the_branch_key_round_trips_through_records():
    r = Rollout("e", "t", 0, [], 0.5, False, 1, False, False, branch={"start_turn": 2, "source": "rollouts", "cut": True})
    assert Rollout.from_dict(r.to_dict()).branch == r.branch
    jsonschema = pytest.importorskip("jsonschema")
    from textgym.rollout import rollout_schema

    jsonschema.validate(r.to_dict(), rollout_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(r.to_dict() | {"branch": {"start_turn": -1, "source": "rollouts", "cut": True}}, rollout_schema())


def _step_reward(state: bytes, messages: list, k: int) -> float:
    """The reward of replaying the source's move ``k`` from ``state``."""
    env = gym.make("textgym/Sudoku-v0", **SUDOKU).unwrapped
    env.reset(options={"state": state})
    move = [m for m in messages if m["role"] == "assistant"][k]["content"]
    return env.step(move)[1]


def test_branched_records_reverify_by_their_own_turns():
    from textgym.reverify import reverify

    venv = sudoku_venv(4)
    source = collect(venv, NoisyMoves(venv), seeds=[4], group_size=1, keep_states=True)[0]
    records = []
    for limit in (1, None):  # cut after one turn, and played to the end
        got = collect(venv, NoisyMoves(venv), seeds=[4], group_size=2, group_options=[{"state": source.turn_states[1]}], turn_limit=limit)
        marks = [{"start_turn": 1, "source": "rollouts", "cut": not (r.terminated or r.truncated)} for r in got]
        records += [r.to_dict() | {"branch": mark} for r, mark in zip(got, marks)]
    assert [r["branch"]["cut"] for r in records] == [True, True, False, False]
    assert {r.status for r in reverify(records)} == {"unchanged"}
    assert {r.status for r in reverify([records[0] | {"reward": records[0]["reward"] + 1}])} == {"changed"}
