"""Where a warm Code-v0 submission's CPU goes: the host, the zygote, the forker, the children.

One thread verifies HumanEval's canonical solutions one after another through one ``CodeEnv``
on a one-worker sandbox (full isolation), skipping the problems whose own run time in-process
is over ``--budget`` (HumanEval/75 and /147 compute for tens to hundreds of ms by themselves).
Per submission it reports CPU time and minor page faults of

* the host: this process (``RUSAGE_SELF``: env reset and step, checks, the JSON exchange);
* the zygote (PID 1 of the sandbox: relays requests and replies, enforces the limits);
* the forker (forks each child, kills and cleans up after it);
* the children, one per submission (reaped by the forker: its ``cutime``/``cstime``, in clock
  ticks), whose faults are the copy-on-write of the warm interpreter's pages they write.

Zygote and forker times come from ``/proc/<pid>/schedstat`` (nanoseconds). Medians over passes.

Run::

    python benchmarks/sandbox_profile.py --passes 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def children(pid: int) -> list[int]:
    return [int(c) for task in os.listdir(f"/proc/{pid}/task") for c in open(f"/proc/{pid}/task/{task}/children").read().split()]


def proc_stat(pid: int) -> dict[str, float]:
    """Own CPU (schedstat) and faults of ``pid``, and the CPU and faults of the children it reaped."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # fields[0] is field 3, state
    tick = os.sysconf("SC_CLK_TCK")
    return {
        "cpu": int(open(f"/proc/{pid}/schedstat").read().split()[0]) / 1e9,
        "faults": int(fields[7]),
        "reaped_cpu": (int(fields[13]) + int(fields[14])) / tick,
        "reaped_faults": int(fields[8]),
    }


def snapshot(zygote: int, forker: int) -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    z, f = proc_stat(zygote), proc_stat(forker)
    return {
        "wall": time.perf_counter(),
        "host_cpu": own.ru_utime + own.ru_stime,
        "host_faults": own.ru_minflt,
        "zygote_cpu": z["cpu"],
        "zygote_faults": z["faults"],
        "forker_cpu": f["cpu"],
        "forker_faults": f["faults"],
        "children_cpu": f["reaped_cpu"],
        "children_faults": f["reaped_faults"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--budget", type=float, default=30.0, help="skip problems whose own run time is over this (ms)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    from code_bench import in_process, problems

    from textgym.envs.code import CodeEnv
    from textgym.sandbox import Sandbox

    items = problems()
    compute = in_process(items)
    items = [p for p in items if compute[p["task_id"]] <= args.budget / 1000]
    env = CodeEnv(sandbox=Sandbox(workers=1))

    def one_pass() -> None:
        for problem in items:
            env.reset(seed=0, options={"task": problem})
            assert env.step(env.oracle_action())[1] == 1.0, problem["task_id"]

    one_pass()  # warm: the worker starts, tasks and checks are parsed and compiled once
    (worker,) = env.sandbox._all
    zygote = children(worker.proc.pid)[0]  # bwrap outside, then the zygote as the namespace's PID 1
    (forker,) = children(zygote)
    rows = []
    for _ in range(args.passes):
        before = snapshot(zygote, forker)
        one_pass()
        after = snapshot(zygote, forker)
        rows.append({k: (after[k] - before[k]) / len(items) for k in before})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    parts = ("host", "zygote", "forker", "children")
    total = sum(med[f"{p}_cpu"] for p in parts)
    print(f"{len(items)} problems x {args.passes} passes, 1 thread, load average {os.getloadavg()[0]:.1f}; per submission (medians):")
    print("| process | CPU ms | share | minor faults |")
    print("|---|---:|---:|---:|")
    for p in parts:
        print(f"| {p} | {1000 * med[f'{p}_cpu']:.2f} | {med[f'{p}_cpu'] / total:.0%} | {med[f'{p}_faults']:.0f} |")
    print(f"| all | {1000 * total:.2f} | | {sum(med[f'{p}_faults'] for p in parts):.0f} |")
    print(f"wall per submission: {1000 * med['wall']:.2f} ms")


if __name__ == "__main__":
    main()
