"""Two processes against one: ``textgym train --nproc 2`` and ``textgym train`` on the same flags
(torch: two processes with DDP and with FSDP2, ``--data-parallel fsdp``).

Reported per run: wall seconds of the whole command, and the mean seconds per GRPO step of
collecting rollouts and of the update (steps after the first, which compiles and warms up); for
the two-process run also the largest weight difference between its final model and the same
steps replayed in one process on the global batches it logged (``replay_logged_steps``). The env
is the one-turn test env of ``tests/algos/test_train.py`` (a reply that starts with a letter
scores 1), on which the tiny model's groups have differing rewards, so every step updates.

Run from the repository root::

    python benchmarks/scaling_bench.py --steps 4 --backend torch
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = "textgym-test/AsciiFirst-v0"


def run(out: Path, steps: int, backend: str, nproc: int, data_parallel: str) -> float:
    """One ``textgym train`` through this script (which registers the test env); its wall seconds."""
    argv = [
        "train",
        "--env",
        ENV,
        "--backend",
        backend,
        "--model",
        "tiny",
        "--chat-template",
        "compact",
        "--output-dir",
        str(out),
        "--steps",
        str(steps),
        "--prompts-per-step",
        "4",
        "--group-size",
        "4",
        "--num-envs",
        "16",
        "--max-new-tokens",
        "3",
        "--max-length",
        "64",
        "--micro-batch-size",
        "2",
        "--lr",
        "3e-3",
        "--eval-episodes",
        "4",
        "--eval-every",
        str(steps),
        "--save-every",
        str(steps),
        "--log-rollouts-every",
        "1",
        "--no-progress",
        "--no-plot",
        "--nproc",
        str(nproc),
        *(["--data-parallel", data_parallel] if data_parallel != "ddp" else []),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, *argv], env=env, check=True)
    return time.perf_counter() - started


def step_times(out: Path) -> tuple[float, float]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()][2:]  # steps 2.. (step 0 is the evaluation)
    return (sum(r["time/rollout_s"] for r in records) / len(records), sum(r["time/update_s"] for r in records) / len(records))


def max_difference(out: Path, backend: str) -> float:
    import numpy as np
    from safetensors.numpy import load_file

    from textgym.algos.train.step import replay_logged_steps

    if backend == "torch":  # the runs' reduction order (OMP_NUM_THREADS=1), so float noise does not grow over Adam's steps
        import torch

        torch.set_num_threads(1)
    learner, _ = replay_logged_steps(out, out / "tiny-init", backend)
    learner.export(out.parent / "replayed")
    got, want = load_file(str(out / "final" / "model.safetensors")), load_file(str(out.parent / "replayed" / "model.safetensors"))
    return max(float(np.abs(got[k] - want[k]).max()) for k in got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--backend", choices=("torch", "jax"), default="torch")
    args = parser.parse_args()
    print("| processes | learner | wall s | rollout s/step | update s/step | max abs weight diff vs one-process replay |")
    print("|---|---|---|---|---|---|")
    runs = [(1, "ddp"), (2, "ddp")] + ([(2, "fsdp")] if args.backend == "torch" else [])
    with tempfile.TemporaryDirectory() as tmp:
        for nproc, data_parallel in runs:
            out = Path(tmp) / f"n{nproc}-{data_parallel}" / "run"
            wall = run(out, args.steps, args.backend, nproc, data_parallel)
            rollout, update = step_times(out)
            diff = max_difference(out, args.backend)
            learner = "one process" if nproc == 1 else data_parallel.upper()
            print(f"| {nproc} | {learner} | {wall:.1f} | {rollout:.2f} | {update:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:  # one of the runs: register the test env, then textgym's command line
        sys.path.insert(0, str(ROOT))
        import tests.algos.test_train  # noqa: F401
        from textgym.cli import main as textgym_main

        sys.exit(textgym_main())
    main()
