"""Every registered textgym id honours the Gymnasium contract (DESIGN.md, environment contract)."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import textgym
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
