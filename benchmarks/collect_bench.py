"""Rollout-collection throughput: ``textgym.rollout.collect`` with the oracle policy on 64 envs.

For each env that can be made, the same episodes (seeds ``0..episodes-1``) are played four ways:

* ``bare``: a plain Python loop over 64 ``gym.make`` envs that steps only the live episodes with
  ``env.unwrapped.oracle_action()`` (the floor: env and oracle cost, nothing else);
* ``sync`` / ``async``: ``collect`` over ``gym.make_vec(..., vectorization_mode=...)``;
* ``ray``: ``collect`` over ``RayVectorEnv`` on a local Ray limited to ``--ray-cpus`` CPUs.

Reported: median wall seconds over ``--repeats`` runs (env construction excluded), env steps per
second, and the overhead per step against ``bare``, ``(t_mode - t_bare) / steps``. Each (env, mode)
runs in a fresh Python process, so no mode inherits another's workers, sandboxes or Ray.

Usage::

    python benchmarks/collect_bench.py --num-envs 64 --episodes 128 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import gymnasium as gym

import textgym
from textgym.policies import OraclePolicy
from textgym.rollout import collect

MODES = ("bare", "sync", "async", "ray")


def bare_loop(env_id: str, num_envs: int, episodes: int) -> Callable[[], int]:
    """The same episodes in waves of ``num_envs``, stepped by hand; returns a run function."""
    envs = [gym.make(env_id) for _ in range(num_envs)]

    def run() -> int:
        steps = 0
        for start in range(0, episodes, num_envs):
            live = []
            for env, seed in zip(envs, range(start, min(start + num_envs, episodes))):
                env.reset(seed=seed)
                live.append(env)
            while live:
                still = []
                for env in live:
                    _, _, terminated, truncated, _ = env.step(env.unwrapped.oracle_action())
                    steps += 1
                    if not (terminated or truncated):
                        still.append(env)
                live = still
        return steps

    run.close = lambda: [e.close() for e in envs]  # type: ignore[attr-defined]
    return run


def collect_loop(venv: gym.vector.VectorEnv, episodes: int) -> Callable[[], int]:
    def run() -> int:
        rollouts = collect(venv, OraclePolicy(venv), seeds=list(range(episodes)))
        assert all(r.success for r in rollouts), "the oracle must solve every task"
        return sum(r.turns for r in rollouts)

    run.close = venv.close  # type: ignore[attr-defined]
    return run


def make_runner(mode: str, env_id: str, args: argparse.Namespace) -> Callable[[], int]:
    if mode == "bare":
        return bare_loop(env_id, args.num_envs, args.episodes)
    if mode == "ray":
        from textgym.wrappers.ray_vector import RayVectorEnv

        venv = RayVectorEnv.from_id(env_id, args.num_envs, envs_per_actor=args.ray_envs_per_actor)
        venv.spec = gym.spec(env_id)
        return collect_loop(venv, args.episodes)
    return collect_loop(gym.make_vec(env_id, num_envs=args.num_envs, vectorization_mode=mode), args.episodes)


def measure(env_id: str, mode: str, args: argparse.Namespace) -> dict:
    """One (env, mode): build, run ``--repeats`` times, close; inside a fresh process."""
    if mode == "ray":
        import ray

        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    run = make_runner(mode, env_id, args)
    setup = time.perf_counter() - started
    times, steps = [], 0
    try:
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            steps = run()
            times.append(time.perf_counter() - t0)
    finally:
        run.close()
    return {
        "env": env_id,
        "mode": mode,
        "episodes": args.episodes,
        "steps": steps,
        "setup_s": setup,
        "median_s": statistics.median(times),
        "times_s": times,
    }


def bench(env_id: str, args: argparse.Namespace) -> list[dict]:
    rows = []
    common = [
        "--num-envs",
        str(args.num_envs),
        "--episodes",
        str(args.episodes),
        "--repeats",
        str(args.repeats),
        "--ray-cpus",
        str(args.ray_cpus),
        "--ray-envs-per-actor",
        str(args.ray_envs_per_actor),
    ]
    for mode in args.modes:
        cmd = [sys.executable, __file__, "--one", env_id, mode, *common]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.mode_timeout)
        except subprocess.TimeoutExpired:
            print(f"{env_id} {mode}: no result within {args.mode_timeout} s (hung?)", flush=True)
            continue
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            print(f"{env_id} {mode}: failed (exit {done.returncode}): {done.stderr.strip()[-500:]}", flush=True)
            continue
        rows.append(json.loads(lines[-1]))
        print(lines[-1], flush=True)
    bare = next((r for r in rows if r["mode"] == "bare"), None)
    for r in rows:
        r["steps_per_s"] = r["steps"] / r["median_s"]
        if bare is not None:
            r["overhead_us_per_step"] = (r["median_s"] - bare["median_s"]) / r["steps"] * 1e6
    return rows


def usable(env_id: str) -> str | None:
    """Why an env cannot be benchmarked yet (None when it can): it must make and reset."""
    try:
        env = gym.make(env_id)
        env.reset(seed=0)
        env.step(env.unwrapped.oracle_action())
        env.close()
    except Exception as exc:  # envs are built in parallel; report and skip
        return f"{type(exc).__name__}: {exc}"
    return None


def markdown(rows: list[dict]) -> str:
    lines = [
        "| env | mode | episodes | env steps | median s | steps/s | overhead µs/step vs bare | setup s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['mode']} | {r['episodes']} | {r['steps']} | {r['median_s']:.3f} | "
            f"{r['steps_per_s']:,.0f} | {r.get('overhead_us_per_step', float('nan')):,.0f} | {r['setup_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="*", default=[e.id for e in textgym.ENVS])
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray-cpus", type=int, default=2)
    parser.add_argument("--ray-envs-per-actor", type=int, default=32)
    parser.add_argument("--mode-timeout", type=float, default=600, help="seconds before a mode counts as hung")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--one", nargs=2, metavar=("ENV", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one, args)), flush=True)
        return
    rows = []
    for env_id in args.envs:
        reason = usable(env_id)
        if reason:
            print(f"skipping {env_id}: {reason}", flush=True)
            continue
        rows += bench(env_id, args)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
