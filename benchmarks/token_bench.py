"""TokenObservation's cost per step against the bare env, side by side in one run.

Each round plays the same oracle episodes (seeds ``0..episodes-1``) in one process, each seed on
the bare env (``gym.make``) and then through ``TokenObservation(env, tokenizer)`` with the ``tiny``
tokenizer (alternated episode by episode, so a load change on a shared machine hits both), whose Qwen-style template lists every tool in the system turn. The wrapped policy
sends token ids: the oracle's turn written as text (tool calls as ``<tool_call>`` blocks), encoded
once before the clock starts, plus the stop token. Reported: CPU microseconds per step (resets
excluded) of each, and the wrapper's overhead as a share of the bare step, then the same for
resets (per episode: the wrapper renders and tokenizes the system turn with every tool schema);
medians over rounds.
With ``--peer-python`` the same runs in another checkout's interpreter too (before/after). With
``--encode-both`` the bare side tokenizes each action too and drops the ids, so both sides run the
same code between steps (by default only the wrapped side does, and transformers' tokenizer evicts
caches that its next step then pays for).

Run::

    python benchmarks/token_bench.py --env textgym/Workplace-v0 --episodes 40 --rounds 3
    python benchmarks/token_bench.py --env textgym/Workplace-v0 --peer-python OLD_VENV/bin/python
    python benchmarks/token_bench.py --env textgym/Workplace-v0 --encode-both  # same work between steps
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def as_text(action) -> str:
    if isinstance(action, str):
        return action
    calls = action.get("tool_calls") or []
    blocks = [
        '<tool_call>{"name": %s, "arguments": %s}</tool_call>' % (json.dumps(c["function"]["name"]), c["function"]["arguments"])
        for c in calls
    ]
    return (action.get("content") or "") + "".join(blocks)


def measure(env_id: str, episodes: int, rounds: int, encode_both: bool = False) -> dict:
    """CPU microseconds per step and per reset, bare and wrapped, over the oracle episodes of seeds
    0..episodes-1 (``rounds`` times): each seed's bare episode and then its wrapped one, so a load
    change on a shared machine hits both sides alike. ``encode_both``: tokenize each action on
    the bare side too (and drop the ids), so that both sides run the same code between steps
    (transformers' tokenizer, which evicts caches the next step needs)."""
    import gymnasium as gym

    from textgym.tokenizer import tiny_tokenizer
    from textgym.wrappers import TokenObservation

    tok = tiny_tokenizer()
    bare, inner = gym.make(env_id), gym.make(env_id)
    sides = {False: (bare, bare), True: (TokenObservation(inner, tok), inner)}
    totals = {w: [0.0, 0, 0.0, 0] for w in sides}  # step seconds, steps, reset seconds, resets

    def episode(seed: int, wrapped: bool) -> None:
        outer, env = sides[wrapped]
        total = totals[wrapped]
        t = time.process_time()
        outer.reset(seed=seed)
        total[2] += time.process_time() - t
        total[3] += 1
        while True:
            text = as_text(env.unwrapped.oracle_action())
            if wrapped or encode_both:  # (on the bare side only to do the same work between steps)
                ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
            action = ids if wrapped else text
            t = time.process_time()
            _, _, terminated, truncated, _ = outer.step(action)
            total[0] += time.process_time() - t
            total[1] += 1
            if terminated or truncated:
                break

    for seed in range(2):  # imports and first-call caches
        episode(seed, True)
    totals = {w: [0.0, 0, 0.0, 0] for w in sides}
    for _ in range(rounds):
        for seed in range(episodes):
            episode(seed, False)
            episode(seed, True)
    (b, br), (w, wr) = ((1e6 * s / n, 1e6 * r / m) for s, n, r, m in (totals[False], totals[True]))
    return {"bare_us": b, "wrapped_us": w, "overhead_us": w - b, "overhead": (w - b) / b, "bare_reset_us": br, "wrapped_reset_us": wr}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="textgym/Workplace-v0")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-python", default=None, help="also run in this interpreter (another checkout)")
    parser.add_argument(
        "--encode-both",
        action="store_true",
        help="tokenize each action on the bare side too, so both sides do the same work between steps",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.env, args.episodes, args.rounds, args.encode_both)))
        return 0
    runs = {"this": sys.executable} | ({"peer": args.peer_python} if args.peer_python else {})
    results: dict[str, list[dict]] = {k: [] for k in runs}
    for _ in range(args.rounds):  # alternated, one round per worker process
        for who, python in runs.items():
            cmd = [python, __file__, "--worker", "--env", args.env, "--episodes", str(args.episodes), "--rounds", "1"]
            cmd += ["--encode-both"] if args.encode_both else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[who].append(json.loads(out.strip().splitlines()[-1]))
    print(f"| {args.env} | bare step (us) | wrapped step (us) | overhead (us) | overhead / bare |")
    print("|---|---:|---:|---:|---:|")
    for who, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        label = "this checkout" if who == "this" else "peer checkout"
        print(f"| {label} | {med['bare_us']:.0f} | {med['wrapped_us']:.0f} | {med['overhead_us']:.0f} | {med['overhead']:.0%} |")
    for who, rows in results.items():  # each round's share: the load moves between rounds
        print(f"{who} checkout, overhead / bare by round:", ", ".join(f"{r['overhead']:.0%}" for r in rows))
    print(f"\n| {args.env} | bare reset (us) | wrapped reset (us) |")
    print("|---|---:|---:|")
    for who, rows in results.items():
        label = "this checkout" if who == "this" else "peer checkout"
        med = {k: statistics.median(r[k] for r in rows) for k in ("bare_reset_us", "wrapped_reset_us")}
        print(f"| {label} | {med['bare_reset_us']:.0f} | {med['wrapped_reset_us']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
