"""The learning result: the README's training run for several seeds on both backends, one table.

Each run is exactly ``textgym train --env textgym/Sudoku-v0 --backend B --model tiny --seed S``
(the tiny recipe: noisy-demonstration warm start, then GRPO), in its own process, one after the
other, so every run has the machine to itself. The table reports held-out success (greedy, 128
seeds from 1,000,000) of the warm start, of the best evaluation (and its step: the run's ``best/``)
and after GRPO, the gain, the lowest evaluation after step 50, each run's wall time, and whether
the run meets the goal of a run that learns without collapsing: gain >= +25 points, final within 5 points of the best evaluation,
no evaluation after step 50 below the warm start. A run whose ``summary.json`` exists is not
repeated, so two invocations with different ``--seeds`` can share an ``--out`` and a third
prints the whole table (``--report``: without starting the runs that have not finished). A second
table splits each run's GRPO step: the median share of ``time/step`` of each of its parts
(``time/sampling``, ``time/env``, ``time/wrapper``, ``time/pack``, ``time/update``; see
docs/trainers.md) and the median step in seconds.

    python benchmarks/learn_bench.py --seeds 0 1 2 --backends torch jax --out runs/learn
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def run(backend: str, seed: int, out: Path, extra: list[str], report: bool = False) -> dict | None:
    """One training run (skipped when its summary exists); its ``summary.json``. With ``report``
    nothing is run: a run without a summary (unfinished, maybe running beside) gives None."""
    directory = out / f"{backend}-s{seed}"
    summary = directory / "summary.json"
    if report and not summary.is_file():
        return None
    if not summary.is_file():
        command = [
            sys.executable,
            "-m",
            "textgym.cli",
            "train",
            "--env",
            "textgym/Sudoku-v0",
            "--backend",
            backend,
            "--model",
            "tiny",
            "--seed",
            str(seed),
            "--output-dir",
            str(directory),
            "--no-progress",
            *extra,
        ]
        print(" ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True)
    return json.loads(summary.read_text(encoding="utf-8"))


GAIN, NEAR_BEST, AFTER_STEP = 25.0, 5.0, 50
"""The goal of a run that learns without collapsing: gain >= GAIN points, final within NEAR_BEST points of the best evaluation,
no evaluation after step AFTER_STEP below the warm start."""


def lowest_after(run_dir: Path, step: int) -> tuple[float, int] | None:
    """The lowest held-out success (percent) evaluated after ``step``, and its step (None: a run
    too short to evaluate after ``step``)."""
    evals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    later = [(100 * r["eval/success"], r["step"]) for r in evals if "eval/success" in r and r["step"] > step]
    return min(later, key=lambda e: e[0]) if later else None


def table(results: dict[tuple[str, int], dict]) -> str:
    lines = [
        "| backend | seed | warm start | best evaluation (step) | after GRPO | gain (points) | lowest after step 50 (step) "
        "| whole run (min) | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (backend, seed), s in results.items():
        before, after, best = 100 * s["before"]["success"], 100 * s["after"]["success"], 100 * s["best"]["success"]
        lowest = lowest_after(Path(s["output_dir"]), AFTER_STEP)
        met = after - before >= GAIN and best - after <= NEAR_BEST and (lowest is None or lowest[0] >= before)
        lines.append(
            f"| {backend} | {seed} | {before:.1f}% | {best:.1f}% ({s['best']['step']}) | {after:.1f}% | {after - before:+.1f} "
            f"| {f'{lowest[0]:.1f}% ({lowest[1]})' if lowest else '-'} | {s['minutes']:.1f} | {'met' if met else 'not met'} |"
        )
    for backend in dict.fromkeys(b for b, _ in results):
        gains = [100 * (s["after"]["success"] - s["before"]["success"]) for (b, _), s in results.items() if b == backend]
        minutes = [s["minutes"] for (b, _), s in results.items() if b == backend]
        lines.append(f"| {backend} | median | | | | {statistics.median(gains):+.1f} | | {statistics.median(minutes):.1f} | |")
    return "\n".join(lines)


STEP_PARTS = ("sampling", "env", "wrapper", "pack", "update")


def step_split(run_dir: Path) -> dict[str, float]:
    """The median over a run's GRPO steps of each part's share of ``time/step`` (percent), and the
    median ``step`` (seconds); empty for a run logged before steps were timed."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = [r for r in records if r.get("time/step")]
    if not steps:
        return {}
    split = {part: statistics.median(100 * r[f"time/{part}"] / r["time/step"] for r in steps) for part in STEP_PARTS}
    return split | {"step": statistics.median(r["time/step"] for r in steps)}


def time_table(results: dict[tuple[str, int], dict]) -> str:
    lines = ["| backend | seed | " + " | ".join(STEP_PARTS) + " | step (s) |", "|---|---|" + "---|" * (len(STEP_PARTS) + 1)]
    for (backend, seed), s in results.items():
        split = step_split(Path(s["output_dir"]))
        if split:
            lines.append(f"| {backend} | {seed} | " + " | ".join(f"{split[p]:.1f}%" for p in STEP_PARTS) + f" | {split['step']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=["torch", "jax"])
    parser.add_argument("--out", type=Path, default=Path("runs/learn"))
    parser.add_argument("--report", action="store_true", help="print the table of the finished runs; start none")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="further textgym train options, after --")
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    results = {(b, s): run(b, s, args.out, extra, args.report) for b in args.backends for s in args.seeds}
    results = {key: summary for key, summary in results.items() if summary is not None}
    print(table(results))
    print()
    print(time_table(results))


if __name__ == "__main__":
    main()
