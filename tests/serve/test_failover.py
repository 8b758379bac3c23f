"""Envs over several ``textgym serve`` processes: sessions spread, a killed server's episodes end as
``env_error``, new ones go to the live servers, and the killed server is used again once back."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import gymnasium as gym
import pytest

import textgym
from tests.serve.conftest import free_port
from textgym.error import RemoteError
from textgym.policies import RandomPolicy
from textgym.rollout import collect

# Short episodes: a random player is truncated after 3 turns.
SUDOKU = ("textgym/Sudoku-v0", "--env-kwargs", json.dumps({"size": 4, "max_turns": 3}))


class KillAfter:
    """A random player that kills ``server`` right after its ``at``-th batch of actions."""

    def __init__(self, server, at: int):
        self.server, self.at, self.calls, self.random = server, at, 0, RandomPolicy(seed=0)

    def act(self, observations, infos=None):
        out = self.random.act(observations, infos)
        self.calls += 1
        if self.calls == self.at:
            self.server.kill()
        return out


def test_sessions_spread_a_killed_server_fails_over_and_comes_back(serve):
    a, b = serve(*SUDOKU), serve(*SUDOKU)
    venv = gym.make_vec("textgym/Remote-v0", num_envs=4, urls=[a.url, b.url], retry_after=0.5)
    host = lambda url: url.split("//")[1].split("/")[0]
    where = lambda: sorted(host(u) for u in venv.get_attr("url"))
    hosts = sorted(host(u) for u in (a.url, b.url))
    venv.reset(seed=0)
    assert where() == sorted(hosts * 2)  # two sessions on each server

    rollouts = collect(venv, KillAfter(a, at=1), seeds=range(4))
    lost = [r for r in rollouts if r.end_reason == "env_error"]
    assert len(lost) == 2 and all(r.reward == 0.0 and not r.success and r.turns == 1 for r in lost)
    assert "was lost mid-episode" in lost[0].messages[-1]["content"]
    assert all(r.end_reason != "env_error" for r in rollouts if r not in lost)

    # New episodes go to the live server only, and none is lost.
    again = collect(venv, RandomPolicy(seed=1), seeds=range(4))
    assert all(r.end_reason != "env_error" for r in again)
    assert where() == [host(b.url)] * 4

    # The killed server, back on its port, takes sessions again once its pause is over.
    serve(*SUDOKU, port=a.port)
    time.sleep(0.6)
    back = collect(venv, RandomPolicy(seed=2), seeds=range(4))
    assert all(r.end_reason != "env_error" for r in back)
    assert where() == sorted(hosts * 2)
    venv.close()


def test_one_url_keeps_working_and_every_server_down_is_one_error(serve):
    server = serve(*SUDOKU)
    env = gym.make("textgym/Remote-v0", url=server.url)
    assert env.reset(seed=3)[1]["turn"] == 0
    env.close()
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    env = textgym.RemoteEnv(urls=dead)
    with pytest.raises(RemoteError, match="none of the 2 env servers started the episode"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="not both"):
        textgym.RemoteEnv(server.url, urls=[server.url])
    with pytest.raises(ValueError, match="non-empty list"):
        textgym.RemoteEnv(urls=server.url)


def test_eval_over_two_servers_and_a_dead_url_at_start_is_one_line(serve, tmp_path):
    a, b = serve(*SUDOKU), serve(*SUDOKU)
    cli = [sys.executable, "-m", "textgym.cli", "eval", "textgym/Sudoku-v0", "--episodes", "4", "--num-envs", "2"]
    out = tmp_path / "rollouts.jsonl"
    done = subprocess.run([*cli, "--env-url", a.url, "--env-url", b.url, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 4

    dead = f"http://127.0.0.1:{free_port()}"
    host = lambda url: url.split("//")[1]
    failed = subprocess.run([*cli, "--env-url", a.url, "--env-url", dead], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert "not reachable" in failed.stderr and host(dead) in failed.stderr


@pytest.mark.slow  # a tiny model's run: ~30-60 s on 2 shared cores
def test_train_plays_on_two_servers_and_a_dead_url_at_start_is_one_line(serve, tmp_path):
    pytest.importorskip("torch")
    from textgym.algos.train.report import read_metrics
    from textgym.rollout import read_rollouts

    a, b = serve(*SUDOKU), serve(*SUDOKU)
    cli = [
        sys.executable,
        "-m",
        "textgym.cli",
        "train",
        "--env",
        "textgym/Sudoku-v0",
        "--sft-steps",
        "0",
        "--steps",
        "1",
        "--prompts-per-step",
        "2",
        "--group-size",
        "2",
        "--num-envs",
        "4",
        "--eval-episodes",
        "2",
        "--max-new-tokens",
        "4",
        "--max-length",
        "512",
        "--log-rollouts-every",
        "1",
        "--no-progress",
        "--no-plot",
    ]
    out = tmp_path / "run"
    done = subprocess.run(
        [*cli, "--output-dir", str(out), "--env-url", a.url, "--env-url", b.url], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [0, 1]
    rollouts = read_rollouts(out / "rollouts" / "step_000001.jsonl")
    assert len(rollouts) == 4 and all(r.env_id == "textgym/Sudoku-v0" and r.token_ids is not None for r in rollouts)

    dead = f"http://127.0.0.1:{free_port()}"
    failed = subprocess.run(
        [*cli, "--output-dir", str(tmp_path / "dead"), "--env-url", a.url, "--env-url", dead], capture_output=True, text=True, timeout=300
    )
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert "not reachable" in failed.stderr
