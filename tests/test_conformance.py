"""Every registered textgym id honours the Gymnasium contract (docs/design.md, "Environment contract")."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import textgym
from textgym.error import InvalidTask
from textgym.policies.random import RandomPolicy
from textgym.registration import ENVS

IDS = [entry.id for entry in ENVS]


def test_every_id_is_registered_with_a_string_entry_point():
    for env_id in IDS:
        spec = gym.spec(env_id)
        assert isinstance(spec.entry_point, str) and spec.entry_point.startswith("textgym.envs.")


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_unwrapped(env_id):
    env = gym.make(env_id, render_mode="ansi")
    check_env(env.unwrapped, skip_render_check=False)
    env.close()


def _play(env_id: str, seed: int, policy: str) -> list[tuple]:
    """Every (observation, reward, terminated, truncated, info) of one whole episode, reset included."""
    env = gym.make(env_id)
    random = RandomPolicy(seed)
    obs, info = env.reset(seed=seed)
    steps = [(obs, None, False, False, info)]
    for _ in range(env.unwrapped.max_turns):
        action = env.unwrapped.oracle_action() if policy == "oracle" else random.act([obs], [info]).actions[0]
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    assert isinstance(env.unwrapped, textgym.TextEnv)
    env.close()
    return steps


@pytest.mark.parametrize("policy", ["oracle", "random"])
@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_episode(env_id, policy):
    """Two envs given the same seed and the same actions give the same episode, step by step."""
    for seed in (0, 123):
        first, second = _play(env_id, seed, policy), _play(env_id, seed, policy)
        assert first[-1][2] or first[-1][3], "the episode ended"
        assert len(first) == len(second)
        for turn, (a, b) in enumerate(zip(first, second)):
            for field, x, y in zip(("observation", "reward", "terminated", "truncated", "info"), a, b):
                assert x == y, f"{env_id} seed {seed}, {policy}: the {field} of turn {turn} differs"


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_and_info_contract(env_id):
    env = gym.make(env_id)
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        assert {"task_id", "turn", "error", "tools"} <= set(info)
        for _ in range(env.unwrapped.max_turns):
            obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
            assert obs[-1]["role"] != "assistant", "the last message is always the environment's"
            if terminated or truncated:
                break
        assert terminated and reward == 1.0 and info["success"] is True
        assert "verification" in info


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("env_id", IDS)
def test_a_failed_first_reset_leaves_the_env_usable(env_id, vector):
    """Gymnasium's passive checker broke the first step after a first reset that raised."""
    env = gym.make_vec(env_id, num_envs=1) if vector else gym.make(env_id)
    with pytest.raises(InvalidTask):
        env.reset(options={"task": {"nonsense": 1}})
    env.reset(seed=0)
    actions = env.call("oracle_action") if vector else env.unwrapped.oracle_action()
    *_, info = env.step(list(actions) if vector else actions)
    assert (info["turn"] == [1]).all() if vector else info["turn"] == 1
    env.close()
