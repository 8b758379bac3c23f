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
* every tool (``--tools``): each of the 27 tools' ``Toolset.call`` on a warm session (its SQL
  statements prepared, as from an episode's second call on), median over a few argument sets
  per tool (the searches with and without words, dates and pages); writes on fresh ids; the four
  paged searches once more after a write into their table (``WRITE_FIRST``), and as the first
  call after a reset (the database just restored, the episode's first search). With
  ``--peer-python`` (another checkout's interpreter) the same calls run there too, in alternated
  worker processes, for a before/after ratio from one run.
* memory: RSS growth per live session when ``--sessions`` envs are made and reset in one process
  (each holds its own SQLite database and toolset).
* pandas baseline: the storage approach of WorkBench and NeMo Gym's workplace_assistant (pandas
  DataFrames loaded from the CSV tables, a session = a fresh load; a get-by-id = a boolean-mask
  lookup), emulated here on the same tables. It is not the peers' code, which is not packaged.

Run (about a minute on 2 cores)::

    PYTHONPATH=. .venv/bin/python benchmarks/workplace_bench.py --sessions 1000
    python benchmarks/workplace_bench.py --tools --rounds 3 --peer-python OLD_CHECKOUT_VENV/bin/python

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
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def bench_latency(n: int) -> dict[str, np.ndarray]:
    import gymnasium as gym

    env = gym.make("textgym/Workplace-v0").unwrapped
    env.reset(seed=0)
    results = {"reset": timed(lambda i: env.reset(seed=i), n)}

    actions = {
        "step: get by id": call("calendar_get_event_information_by_id", event_id="00000005"),
        "step: update": call("project_management_update_task", task_id="00000007", field="list_name", new_value="In Review"),
        "step: send email": call("email_send_email", recipient="raj@atlas.com", subject="Hi", body="See you soon."),
        "step: search (paged)": call("email_search_emails", query="report", page_size=10),
    }

    def fresh(i):
        if env._done or env.turn >= env.max_turns - 1:
            env.reset(seed=0)

    for label, action in actions.items():
        env.reset(seed=0)
        results[label] = timed(lambda i, action=action: env.step(action), n, setup=fresh)
    get = {"event_id": "00000005"}
    results["tool call only: get by id"] = timed(lambda i: env.tools.call("calendar_get_event_information_by_id", get), n)

    def solved(i):
        env.reset(seed=i)
        env.step(env.oracle_action())

    results["verify"] = timed(lambda i: env.verify(), n // 4, setup=solved)
    return results


ME = "raj.schmidt@atlas.com"
# Argument sets per tool; ``{i}`` is the repetition, so that writes touch a fresh row each time.
TOOL_CALLS: dict[str, list[dict]] = {
    "company_directory_find_email_address": [{"name": "Raj"}, {"name": "sofia novak"}, {}],
    "email_get_email_information_by_id": [{"email_id": "{i}"}, {"email_id": "{i}", "field": "subject"}],
    "email_search_emails": [
        {"query": "report", "page_size": 10},
        {"query": "meeting tomorrow"},
        {"query": "raj", "date_min": "2023-11-01"},
        {},
        {"page": 3, "page_size": 20},
        {"date_min": "2023-11-20", "date_max": "2023-11-30"},
    ],
    "email_send_email": [{"recipient": ME, "subject": "Hi", "body": "See you soon."}],
    "email_delete_email": [{"email_id": "{i}"}],
    "email_forward_email": [{"email_id": "{i}", "recipient": ME}],
    "email_reply_email": [{"email_id": "{i}", "body": "Thanks!"}],
    "calendar_get_event_information_by_id": [{"event_id": "{i}"}, {"event_id": "{i}", "field": "event_start"}],
    "calendar_search_events": [
        {"query": "workshop"},
        {"query": "raj", "time_min": "2023-11-01 00:00:00"},
        {"time_min": "2023-12-01 00:00:00", "time_max": "2023-12-02 00:00:00"},
        {},
    ],
    "calendar_create_event": [{"event_name": "Sync", "participant_email": ME, "event_start": "2023-12-05 10:00:00", "duration": 30}],
    "calendar_delete_event": [{"event_id": "{i}"}],
    "calendar_update_event": [{"event_id": "{i}", "field": "event_name", "new_value": "Review"}],
    "analytics_get_visitor_information_by_id": [{"visitor_id": "VISITOR"}],
    "analytics_create_plot": [{"time_min": "2023-10-01", "time_max": "2023-11-30", "value_to_plot": "total_visits", "plot_type": "bar"}],
    "analytics_total_visits_count": [{"time_min": "2023-11-01", "time_max": "2023-11-30"}, {}],
    "analytics_engaged_users_count": [{"time_min": "2023-11-01", "time_max": "2023-11-30"}, {}],
    "analytics_traffic_source_count": [{"time_min": "2023-11-01", "traffic_source": "direct"}, {}],
    "analytics_get_average_session_duration": [{"time_min": "2023-11-01", "time_max": "2023-11-30"}, {}],
    "project_management_get_task_information_by_id": [{"task_id": "{i}"}],
    "project_management_search_tasks": [
        {"task_name": "landing"},
        {"assigned_to_email": ME},
        {"list_name": "In Progress", "board": "Design"},
        {},
    ],
    "project_management_create_task": [
        {"task_name": "Ship it", "assigned_to_email": ME, "list_name": "Backlog", "due_date": "2023-12-08", "board": "Design"}
    ],
    "project_management_delete_task": [{"task_id": "{i}"}],
    "project_management_update_task": [{"task_id": "{i}", "field": "list_name", "new_value": "In Review"}],
    "customer_relationship_manager_search_customers": [
        {"customer_name": "tech"},
        {"status": "Lead"},
        {"assigned_to_email": ME, "status": "Qualified"},
        {},
    ],
    "customer_relationship_manager_update_customer": [{"customer_id": "{i}", "field": "status", "new_value": "Won"}],
    "customer_relationship_manager_add_customer": [{"customer_name": "Acme", "assigned_to_email": ME, "status": "Lead"}],
    "customer_relationship_manager_delete_customer": [{"customer_id": "{i}"}],
}


# A write into the searched table before each search's calls: the searches again, on a session
# that changed the table (its rows no longer all as the world built them).
WRITE_FIRST: dict[str, tuple[str, dict]] = {
    "email_search_emails": ("email_send_email", TOOL_CALLS["email_send_email"][0]),
    "calendar_search_events": ("calendar_update_event", {"event_id": "00000002", "field": "event_name", "new_value": "Review"}),
    "project_management_search_tasks": (
        "project_management_update_task",
        {"task_id": "00000007", "field": "list_name", "new_value": "In Review"},
    ),
    "customer_relationship_manager_search_customers": (
        "customer_relationship_manager_update_customer",
        {"customer_id": "00000003", "field": "customer_name", "new_value": "Acme"},
    ),
}


def bench_tools(n: int) -> dict[str, float]:
    """Median CPU microseconds of each tool's call on a warm session (see the module docstring)."""
    from textgym.envs.workplace import WorkplaceEnv

    env = WorkplaceEnv()
    env.reset(seed=0)
    visitor = env.world.rows["analytics"][0]["visitor_id"]
    out = {}
    cases = [(name, name, None) for name in TOOL_CALLS]
    cases += [(f"{name} after {write[0]}", name, write) for name, write in WRITE_FIRST.items()]
    cases += [(f"{name}, first call after a reset", name, "reset") for name in WRITE_FIRST]
    for label, name, write in cases:
        variants = TOOL_CALLS[name]
        times = []
        for args in variants:
            env.reset(seed=0)
            if isinstance(write, tuple):
                assert env.tools.call(*write).error is None, write

            def args_for(i, args=args):
                return {k: (f"{i % 100 + 1:08d}" if v == "{i}" else visitor if v == "VISITOR" else v) for k, v in args.items()}

            assert env.tools.call(name, args_for(n)).error is None, (name, args)  # prepares its statements
            for i in range(n):
                call_args = args_for(i)
                if write == "reset":  # the episode's first call: the database just restored
                    env.reset(seed=i)
                t = time.thread_time_ns()
                result = env.tools.call(name, call_args)
                times.append(time.thread_time_ns() - t)
                assert result.error is None or "no " in result.error, (name, call_args, result.error)
        out[label] = float(np.median(times)) / 1e3
    return out


def compare_tools(peer: str, rounds: int, n: int) -> None:
    """This checkout's tool medians beside ``peer``'s (another interpreter), alternated by round."""
    import subprocess
    import sys

    runs: dict[str, list[dict[str, float]]] = {"this": [], "peer": []}
    for _ in range(rounds):
        for who, python in (("peer", peer), ("this", sys.executable)):
            cmd = [python, __file__, "--tools-worker", "--n", str(n)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[who].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print("| tool | before (us) | after (us) | speed-up |\n|---|---:|---:|---:|")
    for name in runs["this"][0]:
        before = float(np.median([r[name] for r in runs["peer"]]))
        after = float(np.median([r[name] for r in runs["this"]]))
        print(f"| {name} | {before:.1f} | {after:.1f} | {before / after:.2f}x |")
    worst = max(runs["this"][0], key=lambda k: float(np.median([r[k] for r in runs["this"]])))
    print(f"\nslowest after: {worst} at {float(np.median([r[worst] for r in runs['this']])):.1f} us")


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
        load = lambda i: {f.stem: pd.read_csv(f, dtype=str) for f in files}
        tables = load(0)
        events = tables["calendar"]
        out = {"pandas baseline: reset (reload CSVs)": timed(load, max(20, n // 20))}
        out["pandas baseline: get by id"] = timed(lambda i: events[events["event_id"] == "00000005"].iloc[0].to_dict(), n)
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
    parser.add_argument("--tools", action="store_true", help="only the per-tool medians (see the docstring)")
    parser.add_argument("--peer-python", default=None, help="with --tools: compare with this interpreter's checkout")
    parser.add_argument("--rounds", type=int, default=3, help="with --peer-python: alternated rounds")
    parser.add_argument("--tools-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tools_worker:
        print(json.dumps(bench_tools(args.n)))
        return
    if args.tools:
        if args.peer_python:
            compare_tools(args.peer_python, args.rounds, args.n)
        else:
            print("\n".join(f"| {k} | {v:.1f} |" for k, v in bench_tools(args.n).items()))
        return
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
