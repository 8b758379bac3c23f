"""``textgym eval``: unbiased pass@k/pass^k, same seeds for every policy, table, plot, JSONL, errors."""

import itertools
import json

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.policies.fake_openai import serve, stop
from tests.policies.toy import ENV_ID
from textgym.cli import main
from textgym.evaluate import evaluate, pass_at_k, pass_hat_k, task_categories
from textgym.evaluate.command import PolicySpec
from textgym.policies import OraclePolicy, RandomPolicy
from textgym.rollout import Rollout


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_estimators_equal_the_average_over_every_k_subset(nck):
    n, c, k = nck
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(np.mean([any(s) for s in subsets]))
    assert pass_hat_k(n, c, k) == pytest.approx(np.mean([all(s) for s in subsets]))


def test_estimator_values_and_bounds():
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2)
    assert pass_hat_k(5, 4, 2) == pytest.approx(0.6)  # C(4,2)/C(5,2)
    assert pass_at_k(4, 1, 1) == pass_hat_k(4, 1, 1) == 0.25
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 3)


def test_policy_specs():
    assert PolicySpec.parse("oracle") == PolicySpec("oracle")
    spec = PolicySpec.parse("openai:Qwen/Qwen3-8B@http://localhost:8000/v1")
    assert (spec.model, spec.base_url, spec.name) == ("Qwen/Qwen3-8B", "http://localhost:8000/v1", "openai:Qwen/Qwen3-8B")
    assert PolicySpec.parse("openai:org@model@https://api.example.com/v1").model == "org@model"
    for bad in ("gpt", "openai:model", "openai:@http://x", "Random"):
        with pytest.raises(ValueError, match="--policy must be"):
            PolicySpec.parse(bad)


def test_policies_play_the_same_seeds_k_times_and_progress_counts_every_episode():
    venv = gym.make_vec(ENV_ID, num_envs=3)  # 10 episodes over 3 slots: a ragged last wave
    finished = {}
    policies = {"oracle": OraclePolicy, "random": lambda v: RandomPolicy(seed=0)}
    seeds = [10, 11, 12, 13, 14]
    categories = task_categories(ENV_ID, seeds, {})
    reports = evaluate(
        venv, policies, seeds, k=2, categories=categories, on_episodes=lambda name, n: finished.__setitem__(name, finished.get(name, 0) + n)
    )
    venv.close()
    assert finished == {"oracle": 10, "random": 10}
    oracle, random = reports
    assert sorted(r.seed for r in oracle.rollouts) == sorted(r.seed for r in random.rollouts) == sorted(seeds * 2)
    assert oracle.success == oracle.pass_at_k == oracle.pass_hat_k == 1.0
    assert random.success == 0.0 and 2 <= oracle.mean_turns <= 4
    assert set(oracle.by_category) == set(categories.values()) <= {"small", "large"}


def run_cli(capsys, *argv):
    code = main(["eval", ENV_ID, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_table_plot_and_rollouts(tmp_path, capsys):
    plot, out = tmp_path / "profile.png", tmp_path / "rollouts.jsonl"
    code, stdout, _ = run_cli(
        capsys,
        "--policy",
        "oracle",
        "--policy",
        "random",
        "--episodes",
        "4",
        "--seed",
        "3",
        "--k",
        "3",
        "--num-envs",
        "5",
        "--plot",
        str(plot),
        "--out",
        str(out),
    )
    assert code == 0
    oracle_row = next(line for line in stdout.splitlines() if "│ oracle" in line)
    assert "pass@3" in stdout and "pass^3" in stdout and oracle_row.count("1.000") >= 4
    assert "success by category" in stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 4 * 3 and {r["policy"] for r in rows} == {"oracle", "random"}
    assert {r["seed"] for r in rows} == {3, 4, 5, 6}
    assert all(Rollout.from_dict(r).env_id == ENV_ID for r in rows)


def test_cli_async_mode(capsys):
    code, stdout, _ = run_cli(capsys, "--policy", "oracle", "--episodes", "3", "--num-envs", "2", "--vectorization-mode", "async")
    assert code == 0 and "1.000" in next(line for line in stdout.splitlines() if "│ oracle" in line)


def test_cli_openai_policy_sends_the_env_tools(capsys):
    server = serve()
    try:
        code, stdout, _ = run_cli(capsys, "--policy", f"openai:tool@{server.url}", "--episodes", "2", "--num-envs", "2")
    finally:
        stop(server)
    assert code == 0 and "openai:tool" in stdout
    assert server.requests and all(r["tools"][0]["function"]["name"] == "check" for r in server.requests)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--episodes", "0"], "--episodes must be >= 1"),
        (["--k", "0"], "--k must be >= 1"),
        (["--num-envs", "0"], "--num-envs must be >= 1"),
        (["--policy", "gpt-4"], "--policy must be oracle, random or openai:<model>@<base_url>"),
        (["--policy", "random", "--policy", "random"], "each --policy may appear once"),
        (["--plot", "/no/such/folder/p.png"], "--plot: the folder"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, *argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1


def test_unknown_env_id_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["eval", "textgym/Nope-v0"])
    assert exc.value.code == 2 and "unknown environment id 'textgym/Nope-v0'" in capsys.readouterr().err


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0"])
def test_oracle_beats_random_on_the_real_envs(env_id, capsys):
    venv = gym.make_vec(env_id, num_envs=2)
    reports = evaluate(venv, {"oracle": OraclePolicy, "random": lambda v: RandomPolicy(0)}, [0, 1], k=1)
    venv.close()
    assert reports[0].success == 1.0 and reports[1].success <= 0.5


def test_cli_counts_why_episodes_ended(capsys):
    code, stdout, _ = run_cli(capsys, "--episodes", "3")
    assert code == 0 and "why episodes ended" in stdout
    header = next(line for line in stdout.splitlines() if "max_turns" in line)
    assert all(reason in header for reason in ("success", "failure", "max_turns", "length", "env_error"))
    oracle = [line for line in stdout.splitlines() if "│ oracle" in line][1]
    assert oracle.split("│")[2].strip() == "3"  # three successes


LONG = "openai:/models/Qwen2.5-0.5B-Instruct-finetuned-for-workplace@http://localhost:8000/v1"


@pytest.mark.parametrize("width", [30, 60, 80, 120, 400])
def test_tables_keep_every_policy_name_at_any_width(width):
    import io

    from rich.console import Console

    from textgym.evaluate import PolicyReport
    from textgym.evaluate.command import _print_tables

    rollouts = [Rollout("e", "t", s, [], 1.0, True, 2, True, False, end_reason="success") for s in range(4)]
    categories = {0: "email", 1: "calendar", 2: "customer_relationship_manager", 3: "email"}
    reports = [PolicyReport(LONG, rollouts, 1, 1.5, categories), PolicyReport("oracle", rollouts, 1, 0.1, categories)]
    buffer = io.StringIO()
    _print_tables(Console(file=buffer, width=width), "textgym/Workplace-v0", reports, 4, 1)
    text = buffer.getvalue()
    assert "…" not in text and all(len(line) <= width for line in text.splitlines())
    assert LONG in text.replace("\n", "") and "episodes" in text and "env_error" in text
    assert "customer_relationship_manager" in text.replace("\n", "") and "success by category" in text


def test_piped_output_keeps_the_names(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "textgym.cli", "eval", "textgym/Sudoku-v0", "--episodes", "2", "--env-kwargs", '{"size": 4}'],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "COLUMNS": "40"},
    ).stdout
    assert "│ oracle " in out and "┃ episodes ┃" in out and "…" not in out


@pytest.mark.parametrize("load, cpus, threads", [(9.2, 2, 1), (0.3, 2, 2), (1.4, 4, 3), (0.0, 1, 1), (30.0, 16, 1)])
def test_idle_cpus_leaves_the_busy_cores_out(monkeypatch, load, cpus, threads):
    from textgym.algos.backends import select

    monkeypatch.setattr(select.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(select.os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert select.idle_cpus() == threads


@pytest.mark.parametrize("argv, threads", [([], 1), (["--threads", "2"], 2)])
def test_model_policies_default_to_the_idle_cpus_not_every_cpu(monkeypatch, argv, threads):
    # Two threads on a 2-core machine at load 9 spent 7x the CPU of one (spin-waiting at barriers).
    import argparse

    from textgym.algos import backends
    from textgym.algos.backends import select
    from textgym.evaluate import command

    monkeypatch.setattr(select.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setattr(select.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    loaded = {}
    monkeypatch.setattr(backends, "load_model_policy", lambda model, **kwargs: loaded.update(kwargs, model=model))
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["textgym/Sudoku-v0", "--policy", "model:smollm2-135m", *argv])
    command._model_policy(PolicySpec.parse("model:smollm2-135m"), args)
    assert loaded["model"] == "smollm2-135m" and loaded["threads"] == threads
