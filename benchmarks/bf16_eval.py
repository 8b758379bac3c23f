"""``textgym eval`` of a ``model:`` policy in float32 and in bfloat16 (``--sampler-dtype``), side by
side: each command's wall and CPU seconds, the sampling seconds per sampled token, the weight bytes a
decode step reads over the memory bandwidth measured here (a bound for a decode step that reads every
weight once), and the distance of the bfloat16 run's logprobs to float32 teacher forcing of the same
tokens.

    taskset -c 1 python benchmarks/bf16_eval.py --model smollm2-135m --episodes 2 \\
        --env-kwargs '{"size": 4, "blanks": 2}' --max-tokens 48
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BYTES = {"float32": 4, "bfloat16": 2}


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes a second of the best of ``repeats`` copies of a ``megabytes`` array (read + write)."""
    src = np.ones(megabytes * 2**20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def run_eval(args: argparse.Namespace, dtype: str, out: Path) -> dict[str, float]:
    """One ``textgym eval`` in a child process: its wall and CPU seconds, and its records' sampling."""
    argv = ["textgym", "eval", args.env, "--policy", f"model:{args.model}", "--episodes", str(args.episodes)]
    argv += ["--env-kwargs", args.env_kwargs, "--max-tokens", str(args.max_tokens), "--threads", str(args.threads)]
    argv += ["--backend", args.backend, "--sampler-dtype", dtype, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    sampled = sum(int(np.sum(r["loss_mask"])) for r in records)
    policy = sum(r["timing"]["policy_s"] for r in records)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "sampled_tokens": sampled, "sampling_s_per_token": policy / max(sampled, 1)}


def logprob_distance(args: argparse.Namespace, out: Path) -> tuple[float, float, int]:
    """Max and mean ``|logprob|`` difference of ``out``'s sampled tokens against float32 scoring."""
    from textgym.algos.backends import load_backend
    from textgym.algos.models import resolve
    from textgym.rollout import Rollout

    model = load_backend(args.backend).load_model(resolve(args.model))
    errors = []
    for line in out.read_text(encoding="utf-8").splitlines():
        r = Rollout.from_dict(json.loads(line))
        sampled = r.loss_mask.astype(bool)
        scored = model.logprobs(r.token_ids[None], np.ones((1, r.token_ids.size), np.int32))[0]
        errors.append(np.abs(scored[sampled] - r.logprobs[sampled]))
    error = np.concatenate(errors)
    return float(error.max()), float(error.mean()), int(error.size)


def weight_count(model: str) -> int:
    """The model's parameters (its safetensors' element count)."""
    from safetensors import safe_open

    from textgym.algos.models import resolve

    with safe_open(str(Path(resolve(model)) / "model.safetensors"), "np") as f:
        names = f.keys()  # a safe_open handle is not iterable
        return sum(int(np.prod(f.get_slice(name).get_shape())) for name in names)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="textgym/Sudoku-v0")
    parser.add_argument("--env-kwargs", default='{"size": 4, "blanks": 2}')
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", choices=["torch", "jax"], default="torch")
    args = parser.parse_args(argv)

    bandwidth = memory_bandwidth()
    weights = weight_count(args.model)
    print(f"memory bandwidth (numpy copy, read + write): {bandwidth / 1e9:.1f} GB/s; {weights:,} weights")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            out = Path(tmp) / f"{dtype}.jsonl"
            got = run_eval(args, dtype, out)
            floor_ms = weights * BYTES[dtype] / bandwidth * 1e3
            line = (
                f"{dtype}: wall {got['wall_s']:.1f} s, CPU {got['cpu_s']:.1f} s, {got['sampled_tokens']} tokens sampled, "
                f"{got['sampling_s_per_token'] * 1e3:.1f} ms sampling a token; weight bytes a step over the bandwidth {floor_ms:.1f} ms"
            )
            if dtype == "bfloat16":
                worst, mean, n = logprob_distance(args, out)
                line += f"; logprobs against float32 over {n} tokens: max {worst:.4f}, mean {mean:.4f}"
            print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
