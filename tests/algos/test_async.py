"""Asynchronous GRPO (max_off_policy_steps): bounded, recorded staleness, determinism and resumption."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textgym.algos import train as train_module
from textgym.algos.grpo import GRPOConfig

from .test_distributed import train_argv
from .test_train import BACKENDS, assert_step_times, comparable, config, read_metrics, weights
from .test_train import model_dir as model_dir  # the fixture, used by name

GRPO = dict(group_size=4, lr=3e-3, max_new_tokens=3, max_length=64, micro_batch_size=4, seed=0)


def run(model_dir, out, backend, k, **changes):
    grpo = GRPOConfig(**GRPO, max_off_policy_steps=k, rollout_correction="tis")
    train_module.train(config(model_dir, out, backend=backend, grpo=grpo, steps=4, eval_every=4, log_rollouts_every=1, **changes))
    return read_metrics(out / "metrics.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_sampling_runs_k_steps_ahead_deterministically_and_resumes(model_dir, tmp_path, backend):
    sync = run(model_dir, tmp_path / "sync", backend, 0)
    ahead = run(model_dir, tmp_path / "ahead", backend, 2)
    assert not any(k.startswith("async/") for r in sync for k in r)
    assert [r["async/staleness_max"] for r in ahead[1:]] == [0.0, 1.0, 2.0, 2.0]  # step s sampled by version max(s - 2, 0)
    assert all(r["async/staleness_mean"] <= r["async/staleness_max"] <= 2 and r["async/wait_s"] >= 0 for r in ahead[1:])
    assert_step_times(ahead)  # the background thread's collection timed as the learner's own would be
    versions = [
        {json.loads(line)["policy_version"] for line in (tmp_path / "ahead" / "rollouts" / f"step_{s:06d}.jsonl").open()}
        for s in range(1, 5)
    ]
    assert versions == [{0}, {0}, {0}, {1}]
    # step 1 is sampled by the same weights either way: the same episodes and (to float rounding:
    # the update ran next to the sampler's kernels) the same update
    same(sync[1], ahead[1])
    # resumed after 2 steps: no step lost or repeated; the steps before the stop are the same run's
    run(model_dir, tmp_path / "resumed", backend, 2, stop_after=2)
    resumed = run(model_dir, tmp_path / "resumed", backend, 2)
    assert [r["step"] for r in resumed] == [0, 1, 2, 3, 4]
    for a, b in zip(resumed[:3], ahead[:3]):
        same(a, b)
    assert [r["async/staleness_max"] for r in resumed[3:]] == [0.0, 1.0]  # sampled from the restored weights on


def same(a: dict, b: dict) -> None:
    """The same record up to float rounding (timings and async/* aside)."""
    a, b = ({k: v for k, v in r.items() if not k.startswith(("time/", "async/"))} for r in (a, b))
    assert a.keys() == b.keys()
    assert a == {k: pytest.approx(v, rel=1e-3, abs=1e-6) for k, v in b.items()}


def test_k_zero_is_the_synchronous_loop_and_k_is_bounded():
    assert GRPOConfig().max_off_policy_steps == 0
    with pytest.raises(ValueError, match="max_off_policy_steps must be >= 0"):
        GRPOConfig(max_off_policy_steps=-1)
    from textgym.algos.rollouts import ahead

    assert ahead.start(0, lambda policy, step: [], object(), 0, 5) is None


def test_k_zero_is_the_synchronous_loop_bit_for_bit(model_dir, tmp_path):
    """``--max-off-policy-steps 0`` is the run without the flag, to the last bit of every weight and
    metric; so is a K=0 run stopped after a step and resumed (the KL term makes the restored
    reference weights count)."""
    from textgym.cli import main

    def cli(out, *extra):
        assert main(train_argv(model_dir, out, "--eval-episodes", "2", "--kl-beta", "0.5", *extra)) == 0
        return read_metrics(out / "metrics.jsonl")

    plain = cli(tmp_path / "plain")
    k0 = cli(tmp_path / "k0", "--max-off-policy-steps", "0")
    cli(tmp_path / "split", "--max-off-policy-steps", "0", "--stop-after", "1")
    split = cli(tmp_path / "split", "--max-off-policy-steps", "0")
    assert json.loads((tmp_path / "k0" / "config.json").read_text())["grpo"]["max_off_policy_steps"] == 0
    assert [r["step"] for r in split] == [0, 1, 2] and not any(k.startswith("async/") for r in k0 + split for k in r)
    assert not any(r["train/skipped_update"] for r in plain[1:]) and plain[-1]["loss/kl"] > 0  # both halves updated
    assert comparable(k0) == comparable(plain) and comparable(split) == comparable(plain)
    want, start = weights(tmp_path / "plain" / "final"), weights(model_dir)
    assert any(not np.array_equal(start[name], want[name]) for name in start)
    for run in ("k0", "split"):
        got = weights(tmp_path / run / "final")
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{run}: {name}")
