"""Asynchronous GRPO: wall time of the same number of samples, synchronous vs ``--max-off-policy-steps``
1 and 2, and held-out success at the end.

Each setting is one ``textgym train`` process on the same env, model, seed and step count (so the
same number of sampled episodes), one after the other on the same machine; the wall time is the
whole run's (``summary.json``'s minutes: evaluations included, which are the same in all three).
With several ``--backends``, each K runs on every backend back to back, so the backends see the
same load; each result also carries the largest ``async/staleness_max`` the run logged.

    .venv/bin/python benchmarks/async_bench.py --env textgym/Code-v0 --steps 6 --seeds 0
    .venv/bin/python benchmarks/async_bench.py --preset code-tiny --warm-start runs/code-tiny/sft --steps 6
    .venv/bin/python benchmarks/async_bench.py --preset workplace-tiny --warm-start runs/workplace-tiny/sft \
        --backends torch,jax --ks 0,1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def run(env: str, backend: str, k: int, seed: int, args: argparse.Namespace, workdir: Path) -> dict:
    out = workdir / f"{env.split('/')[-1]}-{backend}-k{k}-s{seed}"
    if args.preset:  # the preset's run, its warm start copied in (so only GRPO is timed)
        shutil.copytree(args.warm_start, out / "sft")
        setting = ["--preset", args.preset]
    else:
        setting = ["--env", env, "--model", args.model, "--sft-steps", "0", "--prompts-per-step", str(args.prompts)]
        setting += ["--group-size", str(args.group_size), "--max-new-tokens", str(args.max_new_tokens)]
    command = [
        str(Path(sys.executable).parent / "textgym"),
        "train",
        *setting,
        "--backend",
        backend,
        "--steps",
        str(args.steps),
        "--eval-every",
        str(args.steps),
        "--eval-episodes",
        str(args.eval_episodes),
        "--seed",
        str(seed),
        "--max-off-policy-steps",
        str(k),
        "--log-rollouts-every",
        "0",
        "--no-plot",
        "--no-progress",
        "--output-dir",
        str(out),
    ]
    if args.env_kwargs:
        command += ["--env-kwargs", args.env_kwargs]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.kl_beta is not None:
        command += ["--kl-beta", str(args.kl_beta)]
    command += [flag for flag in args.train_flags if flag != "--"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    waits = [r["async/wait_s"] for r in records if "async/wait_s" in r]
    staleness = [r["async/staleness_max"] for r in records if "async/staleness_max" in r]
    return {
        "env": env,
        "backend": backend,
        "k": k,
        "seed": seed,
        "minutes": summary["minutes"],
        "success_before": summary["before"]["success"],
        "success_after": summary["after"]["success"],
        "learner_wait_s": round(sum(waits), 1) if waits else None,
        "staleness_max": max(staleness) if staleness else None,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", action="append", help="an env id (repeatable); or give --preset")
    parser.add_argument("--preset", help="run this preset (its env, model and GRPO settings) instead")
    parser.add_argument("--warm-start", help="with --preset: a finished `textgym sft` directory each run starts from")
    parser.add_argument("--env-kwargs", default=None)
    parser.add_argument("--backends", "--backend", default="torch", help="comma-separated: torch, jax or both")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--ks", default="0,1,2")
    parser.add_argument("--threads", type=int, default=None, help="each run's --threads (default: the preset's or the CLI's)")
    parser.add_argument(
        "--kl-beta",
        type=float,
        default=None,
        help="each run's --kl-beta; > 0 updates on every step, also when no group's rewards differ (a run without a warm start)",
    )
    parser.add_argument("train_flags", nargs=argparse.REMAINDER, help="after --: more flags for each run's textgym train")
    parser.add_argument("--out", default=None, help="append each result as a JSON line here")
    args = parser.parse_args()
    if bool(args.preset) != bool(args.warm_start) or bool(args.preset) == bool(args.env):
        parser.error("give --env, or --preset with --warm-start")
    with tempfile.TemporaryDirectory() as tmp:
        for env in args.env or [args.preset]:
            for seed in map(int, args.seeds.split(",")):
                for k in map(int, args.ks.split(",")):
                    for backend in args.backends.split(","):
                        result = run(env, backend, k, seed, args, Path(tmp))
                        print(json.dumps(result), flush=True)
                        if args.out:
                            with open(args.out, "a", encoding="utf-8") as fh:
                                fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
