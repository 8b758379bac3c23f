"""What drawing each row's uniforms from its episode's key costs a sampling call, against a sampler
that draws from one generator seeded per call (the samplers at ``--baseline``, a git revision).

For each backend, in alternated rounds (the order rotating by round, so a load change on a shared
machine hits both alike; JAX compiles both first), ``--rows`` random prompts of ``--prompt-len``
tokens sample exactly ``--new-tokens`` each (EOS disabled) at temperature 1, with no context
cache: the baseline sampler with a seed, the keyed one with one ``(episode key, turn)`` per row.
Printed: the median wall seconds of each and the median CPU seconds of the process (which the
other jobs of a shared machine change far less than the wall time), their differences, and the
host CPU time of the keyed draws themselves (:func:`textgym.draws.call_uniforms` for the call's
rows and tokens) as a fraction of the keyed call's.

    python benchmarks/keyed_draws_bench.py --model tiny --baseline 95185de --threads 1
    python benchmarks/keyed_draws_bench.py --model smollm2-135m --baseline 95185de --threads 1 --rounds 3 \
        --rows 4 --prompt-len 32 --new-tokens 16
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np


def baseline_sampler(revision: str, backend: str) -> Any:
    """The ``algos/<backend>/sampler.py`` of ``revision``, imported as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:algos/{backend}/sampler.py"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / f"baseline_{backend}_sampler.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def samplers(backend: str, path: Path, revision: str, threads: int | None) -> tuple[Callable, Callable]:
    """``(baseline(prompts, new), keyed(prompts, new, keys))`` on the same float32 weights."""
    from textgym.algos.backends import load_backend

    policy = load_backend(backend, threads).load_model(path)  # before the baseline imports JAX: its threads are set at import
    baseline = baseline_sampler(revision, backend)
    common = {"top_p": 1.0, "stop_ids": (), "eos_ids": (), "pad_id": policy.pad_id}
    if backend == "torch":
        from textgym.algos.torch import sampler

        model = policy.model.eval()
        return (
            lambda prompts, new: baseline.generate(model, prompts, new, 1.0, 0, **common),
            lambda prompts, new, keys: sampler.generate(model, prompts, new, 1.0, 0, keys=keys, **common),
        )
    from textgym.algos.jax import sampler

    graph, params = policy.graphdef, policy.params
    return (
        lambda prompts, new: baseline.generate(graph, params, prompts, new, 1.0, 0, **common),
        lambda prompts, new, keys: sampler.generate(graph, params, prompts, new, 1.0, 0, keys=keys, **common),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, smollm2-135m or a HF directory")
    parser.add_argument("--baseline", required=True, help="git revision whose samplers draw per call")
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="intra-op CPU threads of each backend (default: its own)")
    args = parser.parse_args()

    from textgym.algos import models
    from textgym.draws import call_uniforms

    path = models.resolve(args.model, progress=False)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 200, args.prompt_len).astype(np.int32) for _ in range(args.rows)]
    keys = [(int(k), 0) for k in rng.integers(0, 2**62, args.rows)]
    draws_s = statistics.median(_seconds(lambda: call_uniforms(0, keys, args.rows, args.new_tokens))[1] for _ in range(200))
    shape = f"{args.rows} rows x {args.prompt_len} prompt tokens, {args.new_tokens} new tokens"
    print(f"model {args.model}, {shape}, {args.rounds} rounds, threads {args.threads or 'default'}")
    print(f"keyed draws on the host: {draws_s * 1e3:.3f} ms of CPU per call")
    for backend in args.backends:
        old, new = samplers(backend, path, args.baseline, args.threads)
        calls = {"per-call generator": partial(old, prompts, args.new_tokens), "keyed": partial(new, prompts, args.new_tokens, keys)}
        for call in calls.values():
            call()  # JAX compiles; torch warms up
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for r in range(args.rounds):
            names = list(calls)[r % 2 :] + list(calls)[: r % 2]
            for name in names:
                times[name].append(_seconds(calls[name]))
        (old_wall, old_cpu), (new_wall, new_cpu) = ([statistics.median(t[i] for t in times[name]) for i in (0, 1)] for name in calls)
        print(
            f"{backend}: per-call generator {old_wall:.3f} s wall, {old_cpu:.3f} s CPU; "
            f"keyed {new_wall:.3f} s wall ({(new_wall - old_wall) / old_wall:+.1%}), {new_cpu:.3f} s CPU ({(new_cpu - old_cpu) / old_cpu:+.1%}); "
            f"keyed draws {draws_s / new_cpu:.3%} of the call's CPU"
        )


def _seconds(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU (every thread of the process) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    sys.exit(main())
