"""The learning result: the README's training run for several seeds on both backends, one table.

Each run is exactly ``textgym train --env textgym/Sudoku-v0 --backend B --model tiny --seed S``
(the tiny recipe: noisy-demonstration warm start, then GRPO), in its own process, one after the
other, so every run has the machine to itself. The table reports held-out success (greedy, 128
seeds from 1,000,000) of the warm start and after GRPO, the gain, and each run's wall time.

    python benchmarks/learn_bench.py --seeds 0 1 2 --backends torch jax --out runs/learn
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def run(backend: str, seed: int, out: Path, extra: list[str]) -> dict:
    """One training run (skipped when its summary exists); its ``summary.json``."""
    directory = out / f"{backend}-s{seed}"
    summary = directory / "summary.json"
    if not summary.is_file():
        command = [sys.executable, "-m", "textgym.cli", "train", "--env", "textgym/Sudoku-v0", "--backend", backend,
                   "--model", "tiny", "--seed", str(seed), "--output-dir", str(directory), "--no-progress", *extra]
        print(" ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True)
    return json.loads(summary.read_text(encoding="utf-8"))


def table(results: dict[tuple[str, int], dict]) -> str:
    lines = ["| backend | seed | warm start | after GRPO | gain (points) | whole run (min) |", "|---|---|---|---|---|---|"]
    for (backend, seed), s in results.items():
        before, after = 100 * s["before"]["success"], 100 * s["after"]["success"]
        lines.append(f"| {backend} | {seed} | {before:.1f}% | {after:.1f}% | {after - before:+.1f} | {s['minutes']:.1f} |")
    for backend in dict.fromkeys(b for b, _ in results):
        gains = [100 * (s["after"]["success"] - s["before"]["success"]) for (b, _), s in results.items() if b == backend]
        minutes = [s["minutes"] for (b, _), s in results.items() if b == backend]
        lines.append(f"| {backend} | median | | | {statistics.median(gains):+.1f} | {statistics.median(minutes):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=["torch", "jax"])
    parser.add_argument("--out", type=Path, default=Path("runs/learn"))
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="further textgym train options, after --")
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    results = {(b, s): run(b, s, args.out, extra) for b in args.backends for s in args.seeds}
    print(table(results))


if __name__ == "__main__":
    main()
