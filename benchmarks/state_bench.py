"""What saving and forking an episode costs: state bytes and microseconds per call, for each env.

For each env one episode is played to a mid-episode point (a scripted mix of oracle and wrong
turns, the same every run), then timed, median of ``--repeat`` calls each:

* ``get_state``: the episode as bytes; ``bytes``: their length;
* ``set_state``: those bytes restored into a second env made with the same id and arguments;
* ``clone``: a new independent env at the same point (construction + get + set);
* ``replay``: the way to the same point without states: ``reset(seed)`` and the same actions
  again in the second env (what a tree rollout costs per branch otherwise).

Run::

    .venv/bin/python benchmarks/state_bench.py --repeat 200

It prints a Markdown table (the figures quoted in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import textgym  # noqa: F401  (registers the ids)

WRONG_CODE = "```python\ndef nothing():\n    return None\n```"


CASES = [
    # (label, id, kwargs, seed, the next action as a function of the env, turns played)
    ("Sudoku 9x9, 20 moves", "textgym/Sudoku-v0", {"size": 9}, 0, lambda e: e.oracle_action(place=1), 20),
    ("Sudoku 4x4, 4 moves", "textgym/Sudoku-v0", {"size": 4}, 0, lambda e: e.oracle_action(place=1), 4),
    ("Workplace, after the tool calls", "textgym/Workplace-v0", {}, 3, lambda e: e.oracle_action(), 1),
    ("Code, after a failed submission", "textgym/Code-v0", {}, 0, lambda e: WRONG_CODE, 1),
]


def median_us(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def run_case(env_id, kwargs, seed, next_action, turns, repeat):
    env = gym.make(env_id, **kwargs).unwrapped
    other = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=seed)
    actions = []
    for _ in range(turns):
        actions.append(next_action(env))
        env.step(actions[-1])
    state = env.get_state()

    def replay():
        other.reset(seed=seed)
        for action in actions:
            other.step(action)

    replay_repeat = max(3, repeat // 20) if env_id == "textgym/Code-v0" else repeat  # each replay runs the sandbox
    return {
        "bytes": len(state),
        "get_state": median_us(env.get_state, repeat),
        "set_state": median_us(lambda: other.set_state(state), repeat),
        "clone": median_us(env.clone, repeat),
        "replay": median_us(replay, replay_repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print("| env, point | state bytes | get_state µs | set_state µs | clone µs | replay µs | replay / set_state |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, env_id, kwargs, seed, next_action, turns in CASES:
        r = run_case(env_id, kwargs, seed, next_action, turns, args.repeat)
        print(
            f"| {label} | {r['bytes']:,} | {r['get_state']:.0f} | {r['set_state']:.0f} | {r['clone']:.0f} "
            f"| {r['replay']:.0f} | {r['replay'] / r['set_state']:.1f}x |"
        )


if __name__ == "__main__":
    main()
