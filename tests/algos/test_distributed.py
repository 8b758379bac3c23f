"""``textgym train --nproc 2`` (torchrun, gloo): two processes take the steps one process takes on
the same global batch, resume exactly, refuse another world size, and SFT does the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.algos.test_train import SMALL, comparable, weights
from textgym.algos.models import tiny
from textgym.algos.train.report import read_metrics
from textgym.algos.train.step import replay_logged_steps
from textgym.rollout import read_rollouts

ENV = "textgym-test/AsciiFirst-v0"
# A project's own script: it registers its envs, then hands over to textgym's command line (and
# --nproc starts every process with it).
ENTRY = """
import sys
import tests.algos.test_train  # registers the one-turn test env
from textgym.cli import main
sys.exit(main())
"""
GRPO_FLAGS = ["--group-size", "4", "--lr", "3e-3", "--max-new-tokens", "3", "--max-length", "64", "--micro-batch-size", "2"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


@pytest.fixture(scope="module")
def entry(tmp_path_factory) -> Path:
    script = tmp_path_factory.mktemp("entry") / "train_with_test_envs.py"
    script.write_text(ENTRY)
    return script


def textgym_env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))


def textgym(entry: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(entry), *argv], env=textgym_env(), capture_output=True, text=True, timeout=timeout)


def train_argv(model_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--env",
        ENV,
        "--model",
        str(model_dir),
        "--chat-template",
        "compact",
        "--output-dir",
        str(out),
        "--steps",
        "2",
        "--prompts-per-step",
        "2",
        "--num-envs",
        "8",
        "--eval-episodes",
        "4",
        "--eval-every",
        "2",
        "--save-every",
        "1",
        "--log-rollouts-every",
        "1",
        "--no-progress",
        "--no-plot",
        *GRPO_FLAGS,
        *extra,
    ]


def run_two(entry: Path, model_dir: Path, out: Path, *extra: str) -> Path:
    done = textgym(entry, *train_argv(model_dir, out, "--nproc", "2", *extra))
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def two_process_run(entry, model_dir, tmp_path_factory) -> Path:
    return run_two(entry, model_dir, tmp_path_factory.mktemp("ddp") / "run")


def assert_one_process_takes_the_same_steps(out: Path, model_dir: Path, backend: str) -> None:
    """Replay the run's logged global batches in this one process; the weights must agree within 1e-5."""
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]  # process 0 alone wrote them, once each
    for step in (1, 2):  # the global batch of each step: every group both processes played
        rollouts = read_rollouts(out / "rollouts" / f"step_{step:06d}.jsonl")
        assert len(rollouts) == 8 and [r.group for r in rollouts] == [0] * 4 + [1] * 4
    learner, replayed = one_thread(lambda: replay_logged_steps(out, model_dir, backend))
    assert len(replayed) == 2 and any(replayed), "no step had a group with differing rewards; pick another seed"
    for record, metrics in zip(records[1:], replayed):
        assert record["train/skipped_update"] == float(not metrics)
        for name in ("loss/total", "loss/policy", "stats/grad_norm", "stats/tokens") if metrics else ():
            assert record[name] == pytest.approx(metrics[name], abs=1e-5), name
    learner.export(out.parent / "one_process")
    got, want, start = weights(out / "final"), weights(out.parent / "one_process"), weights(model_dir)
    assert any(not np.array_equal(start[k], got[k]) for k in start)
    for name, value in got.items():
        np.testing.assert_allclose(value, want[name], atol=1e-5, err_msg=name)
    assert json.loads((out / "summary.json").read_text())["steps"] == 2


def one_thread(run):
    """``run()`` with torch on one thread, as the processes ran (OMP_NUM_THREADS=1): the same
    reduction order, so float noise does not grow over Adam's steps."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run()
    finally:
        torch.set_num_threads(threads)


# In the default suite (about 50 s here, most of it starting torchrun's two processes): the core claim.
def test_two_processes_equal_one_on_the_same_global_batch(model_dir, two_process_run):
    assert_one_process_takes_the_same_steps(two_process_run, model_dir, "torch")


@pytest.mark.slow  # two JAX processes compile their steps separately: 5-10 min on 2 busy shared cores
@pytest.mark.timeout(1800)
def test_two_jax_processes_form_one_mesh_and_equal_one(entry, model_dir, tmp_path):
    pytest.importorskip("jax")
    out = run_two(entry, model_dir, tmp_path / "run", "--backend", "jax")
    assert_one_process_takes_the_same_steps(out, model_dir, "jax")


@pytest.mark.slow  # three more torchrun launches
def test_a_stopped_two_process_run_resumes_exactly_and_only_with_two(entry, model_dir, two_process_run, tmp_path):
    out = tmp_path / "run"
    first = textgym(entry, *train_argv(model_dir, out, "--nproc", "2", "--stop-after", "1"))
    assert first.returncode == 0, first.stderr[-4000:]
    state = json.loads((out / "checkpoints" / "step_000001" / "run_state.json").read_text())
    assert state == {"step": 1, "world_size": 2}

    for wrong in ([], ["--nproc", "1"]):  # one process on a two-process checkpoint: one line, nothing run
        refused = textgym(entry, *train_argv(model_dir, out, *wrong))
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "written by a run of 2 processes" in refused.stderr and "--nproc 2" in refused.stderr

    second = textgym(entry, *train_argv(model_dir, out, "--nproc", "2"))
    assert second.returncode == 0, second.stderr[-4000:]
    assert comparable(read_metrics(out / "metrics.jsonl")) == comparable(read_metrics(two_process_run / "metrics.jsonl"))
    a, b = weights(out / "final"), weights(two_process_run / "final")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def processes_naming(path: Path) -> list[int]:
    """Live processes whose command line names ``path`` (a run's launcher, torchrun and its ranks)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:  # it ended meanwhile
            pass
    return found


@pytest.mark.slow  # three two-process runs of six steps: about two minutes here
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the run's processes in /proc")
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(entry, model_dir, tmp_path):
    """SIGKILL to the whole run (the launcher's process group; its ranks, which torchrun starts in
    sessions of their own, die with it) once its second checkpoint exists, then the same command
    again. The killed run shards its learner with FSDP2 and the uninterrupted one is DDP, so this
    also checks that the sharded learner writes and restores whole checkpoints exactly."""
    steps = ("--steps", "6")
    whole = run_two(entry, model_dir, tmp_path / "whole", *steps)
    out = tmp_path / "killed"
    argv = [sys.executable, str(entry), *train_argv(model_dir, out, "--nproc", "2", *steps, "--data-parallel", "fsdp")]
    with open(tmp_path / "killed.log", "wb") as log:
        run = subprocess.Popen(argv, env=textgym_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 600
        while not (out / "checkpoints" / "step_000002").is_dir() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert run.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]  # killed mid-run, not after it
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    saved = max(int(c.name.removeprefix("step_")) for c in (out / "checkpoints").glob("step_??????"))
    played = {f: f.stat().st_mtime_ns for f in (out / "rollouts" / f"step_{s:06d}.jsonl" for s in range(1, saved + 1))}
    deadline = time.monotonic() + 30
    while processes_naming(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_naming(out), "a rank outlived the kill"
    assert not (out / "final").exists()

    resumed = textgym(entry, *argv[2:])
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    records, uninterrupted = comparable(read_metrics(out / "metrics.jsonl")), comparable(read_metrics(whole / "metrics.jsonl"))
    assert [r["step"] for r in records] == list(range(7))  # each step logged once, the killed run's included
    assert saved >= 2 and {f: f.stat().st_mtime_ns for f in played} == played  # the checkpointed steps were not played again
    for got, want in zip(records, uninterrupted, strict=True):
        assert got.keys() == want.keys() and got == pytest.approx(want, rel=1e-4, abs=1e-5), got["step"]
    a, b = weights(out / "final"), weights(whole / "final")
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=1e-5, err_msg=name)


@pytest.mark.slow  # waits out the coordinator's minute
def test_an_unreachable_jax_coordinator_is_one_line(entry, model_dir, tmp_path):
    from tests.serve.conftest import free_port

    argv = train_argv(
        model_dir,
        tmp_path / "run",
        "--backend",
        "jax",
        "--coordinator",
        f"127.0.0.1:{free_port()}",
        "--num-processes",
        "2",
        "--process-id",
        "1",
    )
    done = textgym(entry, *argv, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cannot reach the JAX coordinator" in done.stderr


def test_a_world_size_that_splits_a_group_is_one_line(entry, model_dir, tmp_path):
    done = textgym(entry, *train_argv(model_dir, tmp_path / "run", "--nproc", "3"), timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "prompts_per_step (2) must be a multiple of the number of processes (3)" in done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow  # torchrun with two torch processes
def test_sft_over_two_processes_equals_one(entry, model_dir, tmp_path):
    argv = [
        "sft",
        "--env",
        ENV,
        "--model",
        str(model_dir),
        "--chat-template",
        "compact",
        "--steps",
        "2",
        "--demos",
        "8",
        "--batch-size",
        "4",
        "--micro-batch-size",
        "1",
        "--max-length",
        "64",
        "--no-progress",
    ]
    one = textgym(entry, *argv, "--output-dir", str(tmp_path / "one"))
    two = textgym(entry, *argv, "--output-dir", str(tmp_path / "two"), "--nproc", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr[-3000:] + two.stderr[-3000:]
    assert two.stdout.count("SFT model written to") == 1  # rank 0 alone reports and writes
    a, b = weights(tmp_path / "one" / "final"), weights(tmp_path / "two" / "final")
    assert any(not np.array_equal(a[k], weights(model_dir)[k]) for k in a)
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5, err_msg=name)
    assert len(read_metrics(tmp_path / "two" / "sft_metrics.jsonl")) == 2
