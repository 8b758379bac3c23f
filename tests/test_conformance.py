"""Every registered textgym id honours the Gymnasium contract (DESIGN.md, environment contract)."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import textgym
from textgym.error import InvalidTask
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


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_observation(env_id):
    a, b = gym.make(env_id), gym.make(env_id)
    obs_a, info_a = a.reset(seed=123)
    obs_b, info_b = b.reset(seed=123)
    assert obs_a == obs_b and info_a == info_b
    assert isinstance(a.unwrapped, textgym.TextEnv) and a.unwrapped.task == b.unwrapped.task


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
