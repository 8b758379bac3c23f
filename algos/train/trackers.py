"""Experiment trackers for ``textgym train`` and ``textgym sft``: TensorBoard, Weights & Biases, trackio.

``--report-to tensorboard,wandb,trackio`` sends every scalar of the run's metrics stream to each
tracker named, under the same keys and steps as ``metrics.jsonl``; the resolved config is the
tracker run's hyperparameters and ``summary.json``'s figures its summary. All three work offline
by default:

* ``tensorboard``: event files in ``<run>/tensorboard`` (``tensorboard --logdir <run>``); the
  config is also its HParams entry and a text panel, the summary a text panel.
* ``wandb``: an offline run in ``<run>/wandb`` (``wandb sync <run>/wandb/offline-run-*`` uploads
  it), unless ``WANDB_MODE`` says otherwise; ``WANDB_PROJECT`` names the project (``textgym``).
* ``trackio``: trackio's local store (``~/.cache/huggingface/trackio``, or ``TRACKIO_DIR``;
  ``trackio show`` opens it), project ``textgym``. trackio keeps no run summary: the summary's
  figures go to the other trackers only.

Only the process that writes run files reports. The tracker run's id and the last step each tracker
received live in ``<run>/trackers.json``, so a resumed run continues the same tracker run (the same
wandb id and trackio run, the same TensorBoard directory) and a step is never reported twice: the
steps a resumed run recomputes after its checkpoint keep the values first reported (identical but
for ``time/*``). A tracker added to a resumed run first receives the steps the run already logged.

This module imports no tracker until a run names it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from textgym.algos.config.run import Tracker
from textgym.error import MissingDependency

TRACKERS: tuple[str, ...] = get_args(Tracker)
STATE = "trackers.json"
TENSORBOARD_DIR = "tensorboard"
PROJECT = "textgym"


def check_installed(names: Iterable[str]) -> None:
    """Raise a one-line :class:`MissingDependency` for a named tracker whose package is missing."""
    import importlib.util

    for name in names:
        if importlib.util.find_spec(name) is None:
            raise MissingDependency(f"--report-to {name} needs the {name} package: pip install 'textgym[{name}]'")


class Reporter:
    """The trackers of one run: :meth:`log` each metrics record, :meth:`finish` with the summary.

    An empty reporter (no tracker named, or a process that does not write run files) does nothing.
    As a context manager it closes the trackers when the run stops on an error.
    """

    def __init__(self, trackers: Mapping[str, Any] | None = None, state_path: Path | None = None, state: dict[str, Any] | None = None):
        self.trackers = dict(trackers or {})
        self.state_path = state_path
        self.state = state or {"reported": {}}

    def log(self, record: Mapping[str, Any]) -> None:
        """Report ``record``'s scalars at its ``step`` to every tracker that has not had that step."""
        step = int(record["step"])
        scalars = scalar_items(record)
        reported = self.state["reported"]
        fresh = [name for name in self.trackers if step > reported.get(name, -1)]
        for name in fresh:
            self.trackers[name].log(scalars, step)
            reported[name] = step
        if fresh:
            self._save()

    def log_all(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self.log(record)

    def finish(self, summary: Mapping[str, Any] | None = None, step: int | None = None) -> None:
        """Hand over the run summary's figures (``summary.json``) and close every tracker."""
        figures = summary_figures(summary or {})
        for tracker in self.trackers.values():
            tracker.finish(figures, step)
        self.trackers = {}

    def close(self) -> None:
        """Close the trackers without a summary (a run that stopped on an error)."""
        self.finish()

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _save(self) -> None:
        if self.state_path is not None:
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.state) + "\n", encoding="utf-8")
            os.replace(tmp, self.state_path)


def open_reporter(
    names: Sequence[str], run_dir: str | os.PathLike, config: Mapping[str, Any], *, fresh: bool, writer: bool = True
) -> Reporter:
    """Start (or continue) the tracker runs of the run in ``run_dir``.

    Args:
        names: Trackers to report to (``TrainConfig.report_to``).
        run_dir: The run directory; it holds ``trackers.json`` and the TensorBoard event files.
        config: The resolved config (a JSON-ready mapping): the tracker run's hyperparameters.
        fresh: The run starts from step 0 (no checkpoint): a new tracker run, and TensorBoard
            event files of an earlier life of the directory are removed.
        writer: Whether this process writes run files; the others get an empty reporter.
    """
    if not names or not writer:
        return Reporter()
    check_installed(names)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / STATE
    state = None if fresh else _read_state(state_path)
    if state is None:
        state = {"run_id": secrets.token_hex(4), "reported": {}}
    name = run_name(run_dir)
    starts = {"tensorboard": _TensorBoard, "wandb": _WandB, "trackio": _Trackio}
    trackers = {n: starts[n](run_dir, name, state["run_id"], config, fresh=fresh) for n in names}
    reporter = Reporter(trackers, state_path, state)
    reporter._save()
    return reporter


def run_name(run_dir: Path) -> str:
    """The tracker run's display name: the run directory's name (a warm start inside a run, ``<run>/sft``)."""
    run_dir = run_dir.resolve()
    return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.name == "sft" else run_dir.name


def scalar_items(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numbers (booleans as 0/1), without ``step``."""
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, str)}


def summary_figures(summary: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a nested summary, keyed by their path: ``{"before/success": 0.39, "minutes": 8.4, ...}``."""
    figures: dict[str, float] = {}
    for key, value in summary.items():
        if isinstance(value, Mapping):
            figures |= summary_figures(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[f"{prefix}{key}"] = float(value)
    return figures


def flat_config(config: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """TensorBoard's HParams values: the config with its ``grpo`` section's fields as ``grpo.lr``, and
    lists, objects (``env_kwargs``) and None as JSON text."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        if key == "grpo" and isinstance(value, Mapping):
            flat |= {f"grpo.{k}": v for k, v in flat_config(value).items()}
        elif isinstance(value, (bool, int, float, str)):
            flat[key] = value
        else:
            flat[key] = json.dumps(value)
    return flat


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("run_id"), str) or not isinstance(state.get("reported"), dict):
        return None
    return state


class _TensorBoard:
    """Event files in ``<run>/tensorboard``, written with TensorBoard's own writer (no TensorFlow, no torch)."""

    def __init__(self, run_dir: Path, name: str, run_id: str, config: Mapping[str, Any], *, fresh: bool):
        from tensorboard.plugins.hparams import summary_v2 as hparams
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        logdir = run_dir / TENSORBOARD_DIR
        if fresh and logdir.is_dir():
            for old in logdir.glob("events.out.tfevents.*"):
                old.unlink()
        self.writer = EventFileWriter(str(logdir), flush_secs=10)
        self._add(hparams.hparams_pb(flat_config(config), trial_id=f"{name}-{run_id}"), step=0)
        self._add(_text_summary("config", "```json\n" + json.dumps(config, indent=2) + "\n```"), step=0)

    def log(self, scalars: Mapping[str, float], step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._add(Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in scalars.items()]), step)

    def finish(self, figures: Mapping[str, float], step: int | None) -> None:
        if figures:
            table = "| figure | value |\n|---|---|\n" + "".join(f"| {k} | {v:g} |\n" for k, v in figures.items())
            self._add(_text_summary("summary", table), step or 0)
        self.writer.close()

    def _add(self, summary: Any, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self.writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))


def _text_summary(tag: str, text: str) -> Any:
    from tensorboard.plugins.text.summary_v2 import text_pb

    return text_pb(tag, text)


class _WandB:
    """A wandb run with the id in ``trackers.json``: offline in ``<run>/wandb`` unless ``WANDB_MODE`` is set."""

    def __init__(self, run_dir: Path, name: str, run_id: str, config: Mapping[str, Any], *, fresh: bool):
        import wandb

        settings = wandb.Settings(console="off", x_disable_stats=True, silent=True, save_code=False, disable_git=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", PROJECT),
            name=name,
            id=run_id,
            resume="allow",
            dir=os.environ.get("WANDB_DIR", str(run_dir)),
            mode=None if os.environ.get("WANDB_MODE") else "offline",
            config=dict(config),
            settings=settings,
            reinit="create_new",
        )

    def log(self, scalars: Mapping[str, float], step: int) -> None:
        self.run.log(dict(scalars), step=step)

    def finish(self, figures: Mapping[str, float], step: int | None) -> None:
        if figures:
            self.run.summary.update(dict(figures))
        self.run.finish()


class _Trackio:
    """A run of project ``textgym`` in trackio's local store, named ``<run>-<id>`` so that runs of
    equally named directories stay apart and a resumed run finds its own."""

    def __init__(self, run_dir: Path, name: str, run_id: str, config: Mapping[str, Any], *, fresh: bool):
        import trackio

        self.run = trackio.init(
            project=PROJECT,
            name=f"{name}-{run_id}",
            config=dict(config),
            resume="allow",
            embed=False,
            auto_log_cpu=False,
            auto_log_gpu=False,
        )

    def log(self, scalars: Mapping[str, float], step: int) -> None:
        self.run.log(dict(scalars), step=step)

    def finish(self, figures: Mapping[str, float], step: int | None) -> None:
        # trackio keeps no run summary, and a row of figures at a step would stand beside that step's
        # metrics: the figures stay in summary.json (and in the other trackers).
        self.run.finish()
