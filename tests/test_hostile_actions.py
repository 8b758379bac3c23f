"""Hostile assistant turns in every registered env: feedback for the agent, never an exception.

Each attack is one that once crashed or stalled an env: JSON nested past the decoder's recursion
limit, a number past Python's int-string limit, the same inside a dict action's arguments, and
values JSON cannot hold. The episode must go on, with the error in ``info["error"]`` (in an env
without tools, text is no tool call: Code-v0 grades it as a program that does not load).
"""

import gymnasium as gym
import pytest

from textgym.registration import ENVS

IDS = [e.id for e in ENVS]


def dict_call(arguments, name="place"):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


ATTACKS = {
    "deep text call": ("<tool_call>" + "[" * 30000 + "</tool_call>", "nested too deeply"),
    "deep object": ('<tool_call>{"name": "place", "arguments": ' + '{"a": ' * 30000 + "</tool_call>", "nested too deeply"),
    "long number": ('<tool_call>{"name": "place", "arguments": {"row": 1' + "0" * 5000 + "}}</tool_call>", "too many digits"),
    "deep dict arguments": (dict_call("[" * 20000), "nested too deeply"),
    "long number in dict arguments": (dict_call('{"row": 1' + "0" * 5000 + "}"), "too many digits"),
    "bytes in dict arguments": (dict_call({"row": b"1"}), "JSON cannot represent"),
    "set in dict arguments": (dict_call({"row": {1, 2}}), "JSON cannot represent"),
    "huge int object": (dict_call({"row": 10**5000}), "too many digits"),
    "non-string key": (dict_call({1: "x"}), "non-string key"),
    "nested deeper than allowed": (dict_call({"a": nested(40)}), "deeper than"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("env_id", IDS)
def test_attack_is_feedback_and_the_episode_goes_on(env_id, attack):
    action, fragment = ATTACKS[attack]
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    after, reward, terminated, truncated, info = env.step(action)
    if isinstance(action, str) and env.unwrapped.tools is None:  # no tools (Code-v0): the text is a program
        assert fragment not in (info["error"] or "")  # a submission (or an over-long one), not a tool call
    else:
        assert fragment in info["error"]
    assert not terminated and reward == 0.0
    assert info["turn"] == 1 and len(after) > len(obs) and after[-1]["role"] != "assistant"
    _, _, _, _, info = env.step(env.unwrapped.oracle_action())
    assert info["turn"] == 2
    env.close()


def test_rejected_dict_actions_count_turns_and_change_the_conversation():
    env = gym.make("textgym/Sudoku-v0", size=4)
    obs, _ = env.reset(seed=0)
    for turn in (1, 2, 3):
        obs, _, _, _, info = env.step(dict_call({"row": b"1", "col": 1, "digit": 1}))
        assert info["turn"] == turn and "JSON cannot represent" in info["error"]
    assert len(obs) == 2 + 3 * 2  # each turn: the assistant's message and the env's answer
    assert env.unwrapped.board == env.unwrapped.puzzle


def test_async_vector_env_survives_a_hostile_action():
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=2, vectorization_mode="async", size=4)
    try:
        venv.reset(seed=[0, 1])
        hostile = ATTACKS["deep dict arguments"][0]
        _, _, terminated, _, infos = venv.step([hostile, "<tool_call>" + "[" * 30000 + "</tool_call>"])
        assert not terminated.any() and all("nested too deeply" in e for e in infos["error"])
        _, rewards, terminated, _, _ = venv.step(list(venv.call("oracle_action")))
        assert terminated.all() and rewards.tolist() == [1.0, 1.0]
    finally:
        venv.close()
