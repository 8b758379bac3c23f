"""textgym envs as OpenEnv Environment classes: in-process, loaded by dotted path, and under OpenEnv's create_app."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
import urllib.request

import gymnasium as gym
import pytest

import textgym
from textgym.messages import thaw
from textgym.serve.protocol import json_safe

pytest.importorskip("openenv")
from textgym.integrations.openenv import (
    SudokuEnvironment,
    TextGymAction,
    TextGymObservation,
    environment_class,
)


def load(dotted: str):
    """What NeMo Gym's OpenEnv resources server does with ``env_class``/``action_class``."""
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0", "textgym/Code-v0"])
def test_environment_by_dotted_path_plays_like_in_process(env_id):
    name = env_id.split("/")[1].split("-")[0]
    env_class = load(f"textgym.integrations.openenv.{name}Environment")
    action_class = load("textgym.integrations.openenv.TextGymAction")
    env, local = env_class(), gym.make(env_id)
    conversation, info = local.reset(seed=2)
    obs = env.reset(seed=2, episode_id="e1")
    assert isinstance(obs, TextGymObservation) and obs.messages == thaw(list(conversation))
    assert obs.tools == json_safe(info["tools"]) and not obs.done
    total = 0.0
    while not obs.done:
        action = local.unwrapped.oracle_action()
        conversation, reward, terminated, truncated, info = local.step(action)
        body = {"content": action} if isinstance(action, str) else {k: v for k, v in thaw(action).items() if k != "role"}
        obs = env.step(action_class(**body))
        total += obs.reward
        assert obs.messages == thaw(list(conversation)) and obs.info == json_safe(info)
        assert (obs.reward, obs.terminated, obs.truncated) == (reward, terminated, truncated)
    assert total == 1.0 and env.state.episode_id == "e1" and env.state.step_count == info["turn"]
    assert env.get_metadata().name == env_id
    env.close()


def test_bad_input_raises_for_the_host():
    env = SudokuEnvironment()
    with pytest.raises(Exception, match="step before reset"):
        env.step(TextGymAction(content="hi"))
    env.reset(seed=0)
    with pytest.raises(Exception, match="string 'content'"):
        env.step(TextGymAction())
    assert environment_class("textgym/Sudoku-v0").ENV_ID == "textgym/Sudoku-v0"


@pytest.mark.slow  # importing OpenEnv's server stack (gradio) alone takes ~9 s here
def test_openenv_create_app_serves_it_to_remote_env(tmp_path):
    """OpenEnv's own server, hosting the textgym Environment behind the Guard: RemoteEnv plays it
    like in-process with the token, and a foreign origin or a missing token is refused."""
    from tests.serve.conftest import free_port

    port = free_port()
    script = tmp_path / "app.py"
    script.write_text(
        "import uvicorn\n"
        "from textgym.integrations.openenv import create_app\n"
        "app = create_app('textgym/Sudoku-v0', token='t0ken', max_concurrent_envs=4)\n"
        f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
                time.sleep(0.2)
        with pytest.raises(textgym.error.RemoteError, match="401"):
            textgym.RemoteEnv(url).reset(seed=5)
        with pytest.raises(textgym.error.RemoteError, match="403"):
            env = textgym.RemoteEnv(url, token="t0ken")
            env._headers["Origin"] = "https://evil.example"
            env.reset(seed=5)
        local, remote = gym.make("textgym/Sudoku-v0"), textgym.RemoteEnv(url, token="t0ken")
        obs_l, info_l = local.reset(seed=5)
        obs_r, info_r = remote.reset(seed=5)
        assert obs_r == obs_l and info_r == json_safe(info_l)
        action = local.unwrapped.oracle_action()
        out_l, out_r = local.step(action), remote.step(action)
        assert out_r[0] == out_l[0] and out_r[1:4] == out_l[1:4] == (1.0, True, False)
        assert out_r[4] == json_safe(out_l[4])
        remote.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_create_app_refuses_an_empty_token_instead_of_serving_without_one():
    from textgym.integrations.openenv import create_app

    with pytest.raises(ValueError, match="token"):
        create_app("textgym/Sudoku-v0", token="")
