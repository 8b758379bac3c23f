"""What a run reports: its metrics stream, progress bar, logged rollouts, summary and curve.

``metrics.jsonl`` holds one JSON object per line, each with ``step``. A resumed run first drops
the records of steps after its checkpoint (they are recomputed identically), so the file never
holds a step twice. ``rollouts/step_XXXXXX.jsonl`` holds a step's episodes (for ``textgym view``),
``summary.json`` the held-out success before and after, ``curve.png`` the learning curve.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from textgym.algos.config import TrainConfig
from textgym.algos.train.run_dir import BEST
from textgym.error import require

ROLLOUTS = "rollouts"


class MetricsLog:
    """Append-only JSONL of metric records.

    Args:
        path: The file.
        keep_until: Keep existing records with ``step <= keep_until`` (resume); ``None`` starts empty.
        writer: Whether this process writes the file; the other ranks of a multi-process run keep
            the same records in memory only.
    """

    def __init__(self, path: str | os.PathLike, keep_until: int | None = None, *, writer: bool = True):
        self.path = Path(path)
        self.writer = writer
        kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= keep_until] if keep_until is not None else []
        if writer:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as fh:
                for record in kept:
                    fh.write(json.dumps(record) + "\n")
        self.records = kept

    def write(self, record: Mapping[str, Any]) -> None:
        record = dict(record)
        if self.writer:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
        self.records.append(record)


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a metrics file (empty when it does not exist)."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@contextmanager
def progress_bar(description: str, total: int, completed: int = 0, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar; ``bar.update(advance=1, info="...")`` moves it and shows the latest metrics."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, disable=not enabled, transient=False) as progress:
        task = progress.add_task(description, total=total, completed=completed, info="")

        class _Bar:
            def update(self, advance: int = 0, info: str | None = None) -> None:
                fields = {} if info is None else {"info": info}
                progress.update(task, advance=advance, **fields)

        yield _Bar()


def write_step_rollouts(out: Path, step: int, rollouts: list[Any], advantages: list[float], policy_version: int) -> Path:
    """``rollouts/step_XXXXXX.jsonl``: the step's episodes with their ``step``, ``advantage`` and
    ``policy_version`` (the GRPO steps behind the weights that sampled them; ``step - 1`` unless
    sampling ran ahead) (a resumed run rewrites the same file identically)."""
    path = out / ROLLOUTS / f"step_{step:06d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r, advantage in zip(rollouts, advantages):
            record = {"step": step, "advantage": float(advantage), "policy_version": policy_version, **r.to_dict()}
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def env_name(env: str) -> str:
    """An env id's name without its namespace, as a mixture's metric keys hold it (``Sudoku-v0``)."""
    return env.split("/")[-1]


def summary_line(record: dict[str, Any]) -> str:
    """The progress bar's text for a step's record."""
    text = f"reward {record['train/reward']:.2f}"
    if "eval/success" in record:
        text += f" · held-out success {record['eval/success']:.2f}"
    return text


def evaluation(record: dict[str, Any], prefix: str = "eval/") -> dict[str, Any]:
    """A record's held-out metrics under ``prefix``, without it, and its ``step``."""
    return {k.removeprefix(prefix): v for k, v in record.items() if k.startswith(prefix) and "/" not in k.removeprefix(prefix)} | {
        "step": record["step"]
    }


def summarize(config: TrainConfig, out: Path, records: list[dict[str, Any]], step: int, seconds: float) -> dict[str, Any]:
    """``summary.json``: held-out results before and after (each env's too, for a mixture), and the best evaluation."""
    evals = [r for r in records if "eval/success" in r]
    best = max(evals, key=lambda r: r["eval/success"], default=None)  # max keeps the first of ties, as keep_best does
    summary = {
        "env": config.env,
        "backend": config.backend,
        "model": config.model,
        "steps": step,
        "before": evaluation(evals[0]) if evals else None,
        "after": evaluation(evals[-1]) if evals else None,
        "best": None if best is None else {"step": best["step"], "success": best["eval/success"], "path": str(out / BEST)},
        "output_dir": str(out),
        "minutes": round(seconds / 60, 2),
    }
    if len(config.envs) > 1 and evals:
        summary["envs"] = {
            env_name(env): {
                "before": evaluation(evals[0], f"eval/{env_name(env)}/"),
                "after": evaluation(evals[-1], f"eval/{env_name(env)}/"),
            }
            for env in config.envs
        }
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    """What ``textgym train`` prints at the end: held-out success before and after, the best, the run directory."""
    from rich.console import Console

    console = Console()
    before, after, best = summary.get("before"), summary.get("after"), summary.get("best")
    if before and after:
        gain = 100 * (after["success"] - before["success"])
        console.print(
            f"held-out success: {before['success']:.1%} (step {before['step']}) -> {after['success']:.1%} "
            f"(step {after['step']}), {gain:+.1f} points in {summary['minutes']} min"
        )
    if best:
        console.print(f"best held-out success: {best['success']:.1%} at step {best['step']} ({best['path']})")
    console.print(f"run directory: {summary['output_dir']}")


def plot_curve(records: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    """Draw ``train/reward`` (and ``train/success``) per step and ``eval/success`` where evaluated.

    Step 0 is the model GRPO started from (after the SFT warm start, when there was one). A
    mixture's records (``eval/<env>/success``) add one held-out line per env.
    """
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if "train/reward" in r]
    evals = [r for r in records if "eval/success" in r]
    fig, ax = plt.subplots(figsize=(9, 4))
    if train:
        ax.plot([r["step"] for r in train], [r["train/reward"] for r in train], label="train reward (mean of rollouts)", alpha=0.6)
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval/success"] for r in evals], "o-", label="held-out success", linewidth=2)
        for key in sorted(k for k in evals[0] if k.startswith("eval/") and k.endswith("/success") and k != "eval/success"):
            ax.plot([r["step"] for r in evals], [r[key] for r in evals], ".--", label=f"held-out success, {key[5:-8]}")
    ax.set_xlabel("GRPO step")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # beside the axes: it never hides a curve
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
