"""Workplace-v0 costs: reset, tool step and verify latency, and memory per live session.

Cases (all on the default synthetic world: 320 emails, 240 events, 442 visits, 150 tasks,
120 customers):

* reset: ``env.reset(seed=i)``: draw a task, clone the template database, build the prompt
  and the 27 tool schemas for ``info``.
* step (get / update / send / search): one ``env.step`` with one tool call written as text,
  i.e. parse + schema validation + SQL + JSON result + tool message + info. ``search`` pages 10
  emails matching one word out of 320, the most expensive read.
* tool call only: ``Toolset.call`` for the get-by-id call, without the turn machinery.
* verify: ``env.verify()`` after the oracle's calls (replay ground truth on a fresh copy and
  compare the written tables).
* memory: RSS growth per live session when ``--sessions`` envs are made and reset in one process
  (each holds its own SQLite database and toolset).
* pandas baseline: the storage approach of WorkBench and NeMo Gym's workplace_assistant (pandas
  DataFrames loaded from the CSV tables, a session = a fresh load; a get-by-id = a boolean-mask
  lookup), emulated here on the same tables. It is not the peers' code, which is not packaged.

Run (about a minute on 2 cores)::

    PYTHONPATH=. /work/venv/bin/python benchmarks/workplace_bench.py --sessions 1000

It prints a Markdown table of medians and p99s in microseconds of CPU time of the calling thread
(``time.thread_time_ns``: on a shared machine, wall-clock p99s measure the neighbours'
preemptions, not the env) and the memory figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(fn, n: int, setup=None) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        if setup is not None:
            setup(i)
        t = time.thread_time_ns()
        fn(i)
        out[i] = time.thread_time_ns() - t
    return out / 1e3


def call(name: str, **arguments) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def bench_latency(n: int) -> dict[str, np.ndarray]:
    import gymnasium as gym

    import textgym  # noqa: F401  (registers the ids)

    env = gym.make("textgym/Workplace-v0").unwrapped
    env.reset(seed=0)
    results = {"reset": timed(lambda i: env.reset(seed=i), n)}

    actions = {
        "step: get by id": call("calendar_get_event_information_by_id", event_id="00000005"),
        "step: update": call(
            "project_management_update_task", task_id="00000007", field="list_name", new_value="In Review"
        ),
        "step: send email": call("email_send_email", recipient="raj@atlas.com", subject="Hi", body="See you soon."),
        "step: search (paged)": call("email_search_emails", query="report", page_size=10),
    }

    def fresh(i):
        if env._done or env.turn >= env.max_turns - 1:
            env.reset(seed=0)

    for label, action in actions.items():
        env.reset(seed=0)
        results[label] = timed(lambda i: env.step(action), n, setup=fresh)
    get = {"event_id": "00000005"}
    results["tool call only: get by id"] = timed(
        lambda i: env.tools.call("calendar_get_event_information_by_id", get), n
    )

    def solved(i):
        env.reset(seed=i)
        env.step(env.oracle_action())

    results["verify"] = timed(lambda i: env.verify(), n // 4, setup=solved)
    return results


def bench_memory(sessions: int) -> dict[str, float]:
    from textgym.envs.workplace import WorkplaceEnv

    warm = WorkplaceEnv()
    warm.reset(seed=0)  # the shared template and imports are not per-session costs
    gc.collect()
    before = rss_bytes()
    envs = []
    for i in range(sessions):
        e = WorkplaceEnv()
        e.reset(seed=i)
        e.step(e.oracle_action())
        envs.append(e)
    gc.collect()
    grown = rss_bytes() - before
    return {"sessions": sessions, "total_mib": grown / 2**20, "per_session_kib": grown / sessions / 2**10}


def bench_pandas(n: int) -> dict[str, np.ndarray]:
    import pandas as pd

    from textgym.envs.workplace.world import get_world

    world = get_world()
    with tempfile.TemporaryDirectory() as tmp:
        for name, rows in world.rows.items():
            if not rows:
                continue
            pd.DataFrame(rows).to_csv(Path(tmp) / f"{name}.csv", index=False)
        files = sorted(Path(tmp).glob("*.csv"))
        load = lambda i: {f.stem: pd.read_csv(f, dtype=str) for f in files}  # noqa: E731
        tables = load(0)
        events = tables["calendar"]
        out = {"pandas baseline: reset (reload CSVs)": timed(load, max(20, n // 20))}
        out["pandas baseline: get by id"] = timed(
            lambda i: events[events["event_id"] == "00000005"].iloc[0].to_dict(), n
        )
        gc.collect()
        before = rss_bytes()
        held = [load(i) for i in range(50)]
        out["pandas_per_session_kib"] = (rss_bytes() - before) / len(held) / 2**10
    return out


def table(results: dict[str, np.ndarray]) -> str:
    lines = ["| case | median (us) | p99 (us) |", "|---|---:|---:|"]
    for label, us in results.items():
        lines.append(f"| {label} | {np.median(us):.1f} | {np.percentile(us, 99):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="timed repetitions per latency case")
    parser.add_argument("--sessions", type=int, default=1000, help="live sessions for the memory figure")
    parser.add_argument("--no-pandas", action="store_true", help="skip the pandas baseline")
    args = parser.parse_args()
    results = bench_latency(args.n)
    memory = bench_memory(args.sessions)
    if not args.no_pandas:
        pandas = bench_pandas(args.n)
        per_session = pandas.pop("pandas_per_session_kib")
        results |= pandas
    print(table(results))
    print(
        f"\nmemory: {memory['sessions']} live sessions add {memory['total_mib']:.0f} MiB RSS "
        f"({memory['per_session_kib']:.0f} KiB per session)"
    )
    if not args.no_pandas:
        print(f"pandas baseline: {per_session:.0f} KiB per session (one loaded copy of the tables)")


if __name__ == "__main__":
    main()
