"""``textgym.RemoteEnv`` against a real server: the in-process contract, over the wire."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import textgym
from textgym.error import RemoteError, ResetNeeded
from textgym.policies import RandomPolicy
from textgym.rollout import collect, read_rollouts
from textgym.serve.protocol import json_safe


def lockstep(env_id, url, seeds):
    """Play the in-process env's oracle on both; every return value must agree."""
    local, remote = gym.make(env_id), textgym.RemoteEnv(url)
    try:
        for seed in seeds:
            obs_l, info_l = local.reset(seed=seed)
            obs_r, info_r = remote.reset(seed=seed)
            assert obs_r == obs_l and info_r == json_safe(info_l)
            done = False
            while not done:
                action = local.unwrapped.oracle_action()
                out_l, out_r = local.step(action), remote.step(action)
                assert out_r[0] == out_l[0] and out_r[1:4] == out_l[1:4] and out_r[4] == json_safe(out_l[4])
                done = out_l[2] or out_l[3]
            assert out_r[1] == 1.0 and out_r[4]["success"]
    finally:
        remote.close()


def test_remote_env_matches_in_process(sudoku_server, workplace_server):
    lockstep("textgym/Sudoku-v0", sudoku_server.url, [0, 1])
    lockstep("textgym/Workplace-v0", workplace_server.url, [0, 3])


def test_check_env_and_gym_make(sudoku_server):
    env = gym.make("textgym/Remote-v0", url=sudoku_server.url, render_mode="ansi")
    check_env(env.unwrapped, skip_render_check=False)
    env.reset(seed=0)
    assert "[system]" in env.render()
    env.close()


def test_vector_envs_and_collect_over_the_wire(sudoku_server):
    seeds = [3, 4, 5]
    runs = {}
    for name, make in (
        ("local", lambda mode: gym.make_vec("textgym/Sudoku-v0", num_envs=2, vectorization_mode=mode)),
        ("remote", lambda mode: gym.make_vec("textgym/Remote-v0", num_envs=2, vectorization_mode=mode, url=sudoku_server.url)),
    ):
        for mode in ("sync", "async"):
            venv = make(mode)
            try:
                runs[name, mode] = collect(venv, RandomPolicy(seed=0), seeds=seeds, group_size=2)
            finally:
                venv.close()
    reference = runs["local", "sync"]
    assert len(reference) == 6
    for key, rollouts in runs.items():
        for a, b in zip(reference, rollouts):
            assert (a.messages, a.reward, a.turns, a.success, a.tools, a.task_id) == (
                b.messages,
                b.reward,
                b.turns,
                b.success,
                b.tools,
                b.task_id,
            ), key


def test_token_observation_over_the_wire(sudoku_server):
    from textgym.tokenizer import tiny_tokenizer
    from textgym.wrappers import TokenObservation

    tok = tiny_tokenizer()
    local = TokenObservation(gym.make("textgym/Sudoku-v0"), tok)
    remote = TokenObservation(textgym.RemoteEnv(sudoku_server.url), tok)
    ids_l, _ = local.reset(seed=2)
    ids_r, _ = remote.reset(seed=2)
    np.testing.assert_array_equal(ids_l, ids_r)
    action = tok.encode(local.unwrapped.oracle_action(), add_special_tokens=False) + [tok.eos_token_id]
    out_l, out_r = local.step(action), remote.step(action)
    np.testing.assert_array_equal(out_l[0], out_r[0])
    assert out_l[1:4] == out_r[1:4] and out_r[4]["trajectory"] == out_l[4]["trajectory"]
    remote.close()


def test_textgym_eval_against_a_server(sudoku_server, tmp_path):
    def run_eval(env_id, out, *extra):
        cmd = [
            sys.executable,
            "-m",
            "textgym.cli",
            "eval",
            env_id,
            "--policy",
            "random",
            "--episodes",
            "3",
            "--num-envs",
            "2",
            "--out",
            str(out),
            *extra,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return read_rollouts(out)

    remote = run_eval("textgym/Remote-v0", tmp_path / "remote.jsonl", "--env-kwargs", json.dumps({"url": sudoku_server.url}))
    local = run_eval("textgym/Sudoku-v0", tmp_path / "local.jsonl")
    assert [(r.messages, r.reward, r.seed) for r in remote] == [(r.messages, r.reward, r.seed) for r in local]
    oracle = subprocess.run(
        [
            sys.executable,
            "-m",
            "textgym.cli",
            "eval",
            "textgym/Remote-v0",
            "--policy",
            "oracle",
            "--episodes",
            "1",
            "--env-kwargs",
            json.dumps({"url": sudoku_server.url}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert oracle.returncode == 2 and "has no oracle" in oracle.stderr and oracle.stderr.count("\n") == 1, oracle.stderr


def test_connection_loss_raises_one_clear_error_and_reset_reconnects(serve):
    server = serve("textgym/Sudoku-v0")
    env = textgym.RemoteEnv(server.url)
    env.reset(seed=0)
    env.step("<answer>1</answer>")
    server.kill()
    with pytest.raises(RemoteError, match="lost the connection") as lost:
        env.step("<answer>1</answer>")
    assert lost.value.code is None
    with pytest.raises(ResetNeeded):
        env.step("again")
    with pytest.raises(RemoteError, match="cannot connect"):
        env.reset(seed=0)
    serve("textgym/Sudoku-v0", port=server.port)
    obs, info = env.reset(seed=0)  # a new session, a new episode
    assert info["turn"] == 0 and len(obs) == 2
    env.close()


def test_server_errors_raise_with_their_code(sudoku_server):
    env = textgym.RemoteEnv(sudoku_server.url)
    with pytest.raises(RemoteError) as bad:
        env.reset(options={"task": {"grid": "nonsense"}})
    assert bad.value.code == "VALIDATION_ERROR"
    obs, _ = env.reset(seed=1)  # the session survived
    with pytest.raises(RemoteError) as shape:
        env.step({"role": "assistant", "content": 3})
    assert shape.value.code == "VALIDATION_ERROR"
    env.close()


def test_import_textgym_needs_no_server_stack():
    code = (
        "import sys, textgym, gymnasium as gym; textgym.ENVS; assert 'textgym/Remote-v0' in gym.registry;"
        "heavy = [m for m in ('fastapi', 'uvicorn', 'websockets', 'openenv', 'trl', 'orjson') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
