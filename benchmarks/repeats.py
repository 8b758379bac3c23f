"""What a Sudoku-by-moves policy does after the env refuses a move, from a run's logged rollouts.

A refused move (a digit that conflicts, or a given cell) leaves the board as it was and says why. A
policy that reads the reason tries another digit or cell; one that does not repeats the refused
move, and that repeat is refused again. For each logged step this prints every move's outcome and,
of the moves that follow a refusal, the share that repeat a move already refused in the episode.

    python benchmarks/repeats.py runs/sudoku-moves
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from textgym.parsing import parse_turn


def outcome(result: str) -> str:
    """The kind of a ``place`` result: placed, conflict, given or other."""
    if result.startswith('"placed'):
        return "placed"
    if "conflicts with" in result:
        return "conflict"
    if "holds the given" in result:
        return "given"
    return "other"


def moves(messages: list[dict]) -> list[tuple[tuple, str]]:
    """Each policy turn's first ``place`` call ``(row, col, digit)`` and its outcome, in order."""
    played = []
    for turn, reply in zip(messages, messages[1:]):
        if turn["role"] != "assistant" or reply["role"] != "tool":
            continue
        calls = parse_turn(turn.get("content") or "").tool_calls  # the env's own parser
        args = calls[0].arguments if calls else {}
        played.append(((args.get("row"), args.get("col"), args.get("digit")), outcome(str(reply["content"]))))
    return played


def step_counts(path: Path) -> Counter:
    """Outcomes of every move of a step's episodes, and of the moves right after a refusal."""
    counts: Counter = Counter()
    for line in path.open(encoding="utf-8"):
        refused: set[tuple] = set()
        previous = None
        for move, result in moves(json.loads(line)["messages"]):
            counts[result] += 1
            if previous in ("conflict", "given"):
                counts["after_refusal"] += 1
                counts["repeats"] += move in refused
            if result in ("conflict", "given"):
                refused.add(move)
            previous = result
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a `textgym train` output directory (its rollouts/ are read)")
    args = parser.parse_args()
    files = sorted((args.run / "rollouts").glob("step_*.jsonl"))
    if not files:
        parser.error(f"no rollouts/step_*.jsonl under {args.run}")
    print("| step | moves | placed | conflict | given | after a refusal | of them repeats |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for path in files:
        c = step_counts(path)
        total = sum(c[k] for k in ("placed", "conflict", "given", "other"))
        share = c["repeats"] / c["after_refusal"] if c["after_refusal"] else 0.0
        print(
            f"| {int(path.stem.split('_')[1])} | {total} | {c['placed']} | {c['conflict']} | {c['given']} "
            f"| {c['after_refusal']} | {c['repeats']} ({share:.0%}) |"
        )


if __name__ == "__main__":
    main()
