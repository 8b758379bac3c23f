"""--report-to: what each tracker received, read back with its own reader, against metrics.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from textgym.algos.train import trackers
from textgym.error import MissingDependency

sys.path.insert(0, os.path.dirname(__file__))
import tracker_readers as read

ALL = ("tensorboard", "wandb", "trackio")


def tracker_env(tmp_path: Path) -> dict[str, str]:
    """A process environment whose trackers write under ``tmp_path`` only, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "TRACKIO_"))}
    return env | {
        "TRACKIO_DIR": str(tmp_path / "trackio"),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
        "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
        "WANDB_DATA_DIR": str(tmp_path / "wandb-data"),
    }


def assert_reported(records: list[dict], steps: dict[int, dict[str, float]], rel: float = 0.0) -> None:
    """Every scalar of every record, under its key at its step, and nothing else at those keys."""
    assert sorted(steps) == [r["step"] for r in records]
    for r in records:
        assert steps[r["step"]] == pytest.approx(read.scalars(r), rel=rel), r["step"]


def assert_every_tracker_holds(run_dir: Path, records: list[dict], trackio_dir: Path) -> dict:
    """The three trackers' runs of ``run_dir`` hold ``records`` exactly, each step once, in one tracker run."""
    state = json.loads((run_dir / trackers.STATE).read_text())
    tb_steps, tb_extra = read.tensorboard(run_dir / "tensorboard")
    assert_reported(records, tb_steps, rel=1e-6)  # TensorBoard keeps float32
    segments = read.wandb_runs(run_dir)
    assert {s["id"] for s in segments} == {state["run_id"]}  # every life of the run is one wandb run
    history = [step for s in segments for step in s["history"]]
    assert len(history) == len(set(history))  # no step twice
    assert_reported(records, {step: v for s in segments for step, v in s["history"].items()})
    [(name, run)] = read.trackio(trackio_dir).items()
    assert name.endswith(state["run_id"]) and run["rows"] == len(records)
    assert_reported(records, run["steps"])
    return {"state": state, "tensorboard": tb_extra, "wandb": segments, "trackio": run}


REPORT = """
import json, sys
from textgym.algos.train.trackers import open_reporter
records, config, fresh, summary = json.loads(sys.argv[1])
reporter = open_reporter({names!r}, sys.argv[2], config, fresh=fresh)
reporter.log_all(records)
reporter.finish(summary, step=records[-1]["step"]) if summary else reporter.close()
"""


def report(tmp_path: Path, run_dir: Path, records, config, *, fresh, summary=None, names=ALL):
    script = textwrap.dedent(REPORT.format(names=list(names)))
    arg = json.dumps([records, config, fresh, summary])
    out = subprocess.run([sys.executable, "-c", script, arg, str(run_dir)], env=tracker_env(tmp_path), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]


RECORDS = [{"step": 0, "eval/success": 0.25, "eval/reward": 0.5}] + [
    {"step": s, "train/reward": 0.125 * s, "train/skipped_update": s == 2, "train/generated_tokens": 10 + s, "time/step": 0.5 + s}
    for s in range(1, 5)
]
RECORDS[-1] |= {"eval/success": 0.75, "eval/reward": 0.875}
CONFIG = {"env": "textgym/Sudoku-v0", "env_kwargs": {"size": 4}, "steps": 4, "mesh": None, "grpo": {"lr": 0.001, "group_size": 8}}
SUMMARY = {"steps": 4, "before": {"success": 0.25, "step": 0}, "after": {"success": 0.75, "step": 4}, "output_dir": "x", "minutes": 0.5}


@pytest.mark.slow  # ~40 s: four tracker processes (wandb and trackio start their own services)
def test_a_resumed_run_continues_the_same_tracker_runs_and_reports_each_step_once(tmp_path):
    run_dir = tmp_path / "run"
    report(tmp_path, run_dir, RECORDS[:3], CONFIG, fresh=True)  # the first life stops after step 2
    report(tmp_path, run_dir, RECORDS, CONFIG, fresh=False, summary=SUMMARY)  # the resumed one sees every record
    got = assert_every_tracker_holds(run_dir, RECORDS, tmp_path / "trackio")
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2  # one directory, one file per life
    assert [sorted(s["history"]) for s in got["wandb"]] == [[0, 1, 2], [3, 4]]
    # the resolved config is each tracker run's hyperparameters
    assert got["tensorboard"]["hparams"]["grpo.lr"] == 0.001 and got["tensorboard"]["hparams"]["env_kwargs"] == '{"size": 4}'
    assert json.loads(got["tensorboard"]["config"].strip("`").removeprefix("json")) == CONFIG
    assert all({k: v for k, v in s["config"].items() if k != "_wandb"} == CONFIG for s in got["wandb"])
    assert {k: v for k, v in got["trackio"]["config"].items() if not k.startswith("_")} == CONFIG
    # summary.json's figures are the run's summary
    assert got["wandb"][-1]["summary"] | {"before/success": 0.25, "after/success": 0.75, "minutes": 0.5} == got["wandb"][-1]["summary"]
    assert "| after/success | 0.75 |" in got["tensorboard"]["summary"]

    report(tmp_path, run_dir, RECORDS[:2], CONFIG, fresh=True, names=("tensorboard",))  # a fresh start: a new tracker run
    assert json.loads((run_dir / trackers.STATE).read_text())["run_id"] != got["state"]["run_id"]
    assert sorted(read.tensorboard(run_dir / "tensorboard")[0]) == [0, 1]  # the old event files are gone


def test_a_tracker_added_on_resume_receives_the_steps_already_logged(tmp_path):
    run_dir = tmp_path / "run"
    report(tmp_path, run_dir, RECORDS[:3], CONFIG, fresh=True, names=("tensorboard",))
    state = json.loads((run_dir / trackers.STATE).read_text())
    assert state["reported"] == {"tensorboard": 2}
    report(tmp_path, run_dir, RECORDS, CONFIG, fresh=False, names=("tensorboard",))
    assert_reported(RECORDS, read.tensorboard(run_dir / "tensorboard")[0], rel=1e-6)


def test_a_tracker_that_is_not_installed_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(MissingDependency, match=r"^--report-to wandb needs the wandb package: pip install 'textgym\[wandb\]'$"):
        trackers.check_installed(["tensorboard", "wandb"])
    trackers.check_installed(["tensorboard"])


def test_only_the_writing_process_reports(tmp_path):
    reporter = trackers.open_reporter(ALL, tmp_path / "run", CONFIG, fresh=True, writer=False)
    reporter.log_all(RECORDS)
    reporter.finish(SUMMARY)
    assert not (tmp_path / "run").exists()


def test_summary_figures_are_the_numbers_of_summary_json():
    assert trackers.summary_figures(SUMMARY) == {
        "steps": 4,
        "before/success": 0.25,
        "before/step": 0,
        "after/success": 0.75,
        "after/step": 4,
        "minutes": 0.5,
    }


E2E_ENVS = ["--env", "textgym/Sudoku-v0", "--env", "textgym/Workplace-v0", "--env-kwargs",
            json.dumps({"textgym/Sudoku-v0": {"size": 4, "blanks": 1, "max_turns": 1}, "textgym/Workplace-v0": {"max_turns": 1}})]  # fmt: skip
E2E_RUN = ["--backend", "torch", "--model", "tiny", "--tiny-layers", "1", "--chat-template", "compact", "--steps", "2",
           "--prompts-per-step", "2", "--group-size", "2", "--num-envs", "4", "--eval-every", "1", "--eval-episodes", "2",
           "--max-new-tokens", "4", "--max-length", "512", "--micro-batch-size", "4", "--sft-steps", "0", "--no-plot",
           "--no-progress", "--threads", "1", "--max-off-policy-steps", "1", "--report-to", "tensorboard,wandb,trackio"]  # fmt: skip


@pytest.mark.slow  # ~3 min (12 on a loaded 2-core machine): two short runs of a mixture, each starting the three trackers
@pytest.mark.timeout(1800)
def test_a_stopped_and_resumed_mixture_run_reports_every_metric_to_every_tracker(tmp_path):
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "textgym.cli", "train", *E2E_ENVS, *E2E_RUN, "--output-dir", str(run_dir)]
    for extra in (["--stop-after", "1"], []):  # stop after step 1, then resume to the end
        out = subprocess.run(command + extra, env=tracker_env(tmp_path), capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    keys = set().union(*records)  # the mixture's per-env curves, the background sampler's and the timings are there
    assert {"eval/Sudoku-v0/success", "train/Workplace-v0/reward", "async/policy_version", "time/step", "time/sampling"} <= keys
    got = assert_every_tracker_holds(run_dir, records, tmp_path / "trackio")
    assert [sorted(s["history"]) for s in got["wandb"]] == [[0, 1], [2]]
    config = json.loads((run_dir / "config.json").read_text())
    assert {k: v for k, v in got["wandb"][-1]["config"].items() if k != "_wandb"} == config
    assert got["tensorboard"]["hparams"]["grpo.group_size"] == 2 and got["tensorboard"]["hparams"]["report_to"] == json.dumps(
        config["report_to"]
    )
    figures = trackers.summary_figures(json.loads((run_dir / "summary.json").read_text()))
    assert figures["after/step"] == 2 and {k: got["wandb"][-1]["summary"][k] for k in figures} == pytest.approx(figures)


def test_train_and_sft_report_their_metrics_to_tensorboard(tmp_path):
    pytest.importorskip("torch")
    from test_train import SMALL, config

    from textgym.algos.config import SFTConfig
    from textgym.algos.models import tiny
    from textgym.algos.train import train
    from textgym.algos.train.report import read_metrics
    from textgym.algos.train.sft import sft

    model_dir = tiny.create(tmp_path / "tiny", seed=0, size=SMALL)
    run_dir = tmp_path / "run"
    summary = train(config(model_dir, run_dir, steps=2, report_to=("tensorboard",)))
    steps, extra = read.tensorboard(run_dir / "tensorboard")
    assert_reported(read_metrics(run_dir / "metrics.jsonl"), steps, rel=1e-6)
    assert extra["hparams"]["steps"] == 2 and f"| after/success | {summary['after']['success']:g} |" in extra["summary"]

    sft_dir = tmp_path / "sft"
    sft(SFTConfig(env=config(model_dir, run_dir).env, model=str(model_dir), chat_template="compact", steps=2, demos=4, batch_size=2,
                  max_length=64, micro_batch_size=2, output_dir=str(sft_dir), progress=False, report_to=("tensorboard",)))  # fmt: skip
    assert_reported(read_metrics(sft_dir / "sft_metrics.jsonl"), read.tensorboard(sft_dir / "tensorboard")[0], rel=1e-6)
