"""Env state and fork: a restored or cloned env continues exactly, at every turn, and a state
refuses an env it does not fit."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import textgym  # noqa: F401  (registers the ids)
from textgym.error import InvalidState, ResetNeeded
from textgym.policies import OraclePolicy, RandomPolicy
from textgym.rollout import collect

ENVS = [
    ("textgym/Sudoku-v0", {"size": 4}),
    ("textgym/Sudoku-v0", {"size": 6, "reward": "dense", "max_turns": 6}),
    ("textgym/Sudoku-v0", {"size": 4, "board": "compact"}),
    ("textgym/Workplace-v0", {"max_turns": 6}),
    ("textgym/Code-v0", {"max_attempts": 2}),
]


def _make(env_id, kwargs):
    return gym.make(env_id, **kwargs).unwrapped


def _oracle(env):
    return env.oracle_action(place=1) if env.spec.id == "textgym/Sudoku-v0" else env.oracle_action()


def _play(env, seed, oracle_turns, policy_seed):
    """Play one episode, each turn the oracle's move or a random one; at every turn before a step,
    keep a restored env and a clone. Returns the actions, the step results and the forks."""
    policy = RandomPolicy(seed=policy_seed)
    obs, info = env.reset(seed=seed)
    actions, results, forks = [], [], []
    turn = 0
    while True:
        restored = _make(env.spec.id, env.spec.kwargs)
        restored.set_state(env.get_state())
        forks.append((turn, restored, env.clone()))
        if oracle_turns[turn % len(oracle_turns)]:
            action = _oracle(env)
        else:
            action = policy.act([obs], [info]).actions[0]
        result = env.step(action)
        actions.append(action)
        results.append(result)
        obs, info = result[0], result[4]
        turn += 1
        if result[2] or result[3]:
            return actions, results, forks


@pytest.mark.parametrize("env_id,kwargs", ENVS, ids=lambda v: v if isinstance(v, str) else repr(v))
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**16),
    oracle_turns=st.lists(st.booleans(), min_size=1, max_size=4),
    policy_seed=st.integers(0, 2**16),
)
def test_restored_and_cloned_envs_continue_exactly(env_id, kwargs, seed, oracle_turns, policy_seed):
    env = _make(env_id, kwargs)
    actions, results, forks = _play(env, seed, oracle_turns, policy_seed)
    for turn, restored, clone in forks:
        for fork in (restored, clone):
            for action, expected in zip(actions[turn:], results[turn:]):
                got = fork.step(action)
                assert got[0] == expected[0] and got[1:4] == expected[1:4] and got[4] == expected[4], f"turn {turn}"


@pytest.mark.parametrize("env_id,kwargs", ENVS, ids=lambda v: v if isinstance(v, str) else repr(v))
def test_state_keys_are_equal_for_equal_states_and_move_with_the_decisions(env_id, kwargs):
    env, twin = _make(env_id, kwargs), _make(env_id, kwargs)
    start = env.reset(seed=5)[1]["state_key"]
    assert twin.reset(seed=5)[1]["state_key"] == start and len(start) == 16
    assert _make(env_id, kwargs).reset(seed=6)[1]["state_key"] != start  # another task
    _, _, terminated, truncated, info = env.step(_oracle(env))
    assert info["state_key"] != start  # the oracle's move changed what the next turn sees
    assert twin.step(_oracle(twin))[4]["state_key"] == info["state_key"]
    if not (terminated or truncated):  # a restored copy is at the same state
        assert _make(env_id, kwargs).reset(options={"state": env.get_state()})[1]["state_key"] == info["state_key"]


def test_a_clone_is_independent_of_its_original():
    env = _make("textgym/Workplace-v0", {})
    env.reset(seed=3)
    clone = env.clone()
    clone.step(env.oracle_action())  # writes a calendar event into the clone's database only
    _, reward, _, _, info = env.step("Done.")
    assert reward == 0.0 and not info["success"]
    _, reward, _, _, _ = clone.step("Done.")
    assert reward == 1.0


def test_state_of_a_fresh_episode_restores_the_generator_too():
    env, twin = _make("textgym/Sudoku-v0", {"size": 4}), _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=5)
    twin.set_state(env.get_state())
    assert env.reset()[0] == twin.reset()[0]  # the next unseeded task is drawn alike


@pytest.mark.parametrize(
    "other,why",
    [
        (("textgym/Workplace-v0", {}), "Sudoku-v0"),
        (("textgym/Sudoku-v0", {"size": 9}), "size=4"),
        (("textgym/Sudoku-v0", {"size": 4, "reward": "dense"}), "reward='binary'"),
    ],
)
def test_a_state_refuses_another_env_id_or_arguments(other, why):
    env = _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=0)
    target = _make(*other)
    target.reset(seed=1)
    before = target.get_state()
    with pytest.raises(InvalidState, match=why):
        target.set_state(env.get_state())
    assert target.get_state() == before  # nothing was changed


def test_the_same_arguments_spelled_otherwise_fit():
    env = _make("textgym/Sudoku-v0", {})
    env.reset(seed=0)
    _make("textgym/Sudoku-v0", {"size": 9, "difficulty": "medium"}).set_state(env.get_state())
    direct = type(env)()  # made without gym.make: the id comes from the class
    direct.set_state(env.get_state())
    assert direct.conversation == env.conversation


def test_a_state_refuses_another_version_and_garbage(monkeypatch):
    env = _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=0)
    state = env.get_state()
    with pytest.raises(InvalidState, match="version"):
        monkeypatch.setattr(type(env), "state_version", 2)
        env.set_state(state)
    monkeypatch.undo()
    for bad in (b"", b"hello", state[:-3], state + b"x", "a str"):
        with pytest.raises(InvalidState):
            env.set_state(bad)


def test_get_state_before_reset_is_misuse():
    with pytest.raises(ResetNeeded):
        _make("textgym/Sudoku-v0", {}).get_state()


def test_reset_from_a_state_starts_there_and_refuses_an_ended_episode():
    env = _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=2)
    env.step(env.oracle_action(place=2))
    obs, info = env.reset(seed=99, options={"state": env.get_state()})
    assert info["turn"] == 1 and len(obs) == 6 and info["tools"]  # system, user, assistant, 2 tool, user
    env.step(env.oracle_action())  # the answer ends it
    with pytest.raises(InvalidState, match="ended"):
        _make("textgym/Sudoku-v0", {"size": 4}).reset(options={"state": env.get_state()})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_grpo_group_from_one_mid_episode_state_with_collect(mode):
    env = _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=4)
    env.step(env.oracle_action(place=3))
    state = env.get_state()
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=4, vectorization_mode=mode, size=4)
    try:
        rollouts = collect(venv, OraclePolicy(venv), episodes=4, group_size=4, options={"state": state})
    finally:
        venv.close()
    assert {r.group for r in rollouts} == {0} and all(r.success for r in rollouts)
    prefix = [dict(m) for m in env.conversation]
    assert all(r.messages[: len(prefix)] == prefix for r in rollouts)
    assert {r.task_id for r in rollouts} == {env.task.id}
    assert np.all([r.turns == rollouts[0].turns for r in rollouts])


def test_a_state_with_a_consistent_header_but_wrong_contents_is_refused():
    from textgym.state import pack, unpack

    env = _make("textgym/Sudoku-v0", {"size": 4})
    env.reset(seed=0)
    header, blobs = unpack(env.get_state())
    header["episode"]["rng"]["bit_generator"] = "seed"  # a name from the state is never looked up in numpy
    before = env.get_state()
    with pytest.raises(InvalidState, match="corrupt"):
        env.set_state(pack(header, blobs))
    assert env.get_state() == before  # the episode it was playing goes on, untouched
    env.step("x")


def test_a_code_state_restored_where_another_task_was_played_is_judged_by_its_own_checks():
    # Checks that are not plain asserts are planned once per task and kept by the env.
    def task(total):
        check = f"def check(c):\n    total = sum(c(i) for i in range(4))\n    assert total == {total}, total\n"
        return {"prompt": "def f(x):\n    '''x'''\n", "entry_point": "f", "test": check}

    env, other = _make("textgym/Code-v0", {}), _make("textgym/Code-v0", {})
    try:
        env.reset(options={"task": task(6)})
        assert env.step("```python\ndef f(x): return x\n```")[1] == 1.0
        other.reset(options={"task": task(10)})
        env.set_state(other.get_state())
        plus_one = "```python\ndef f(x): return x + 1\n```"
        assert env.step(plus_one)[1:4] == other.step(plus_one)[1:4] == (1.0, True, False)
    finally:
        env.close()
        other.close()
