"""``textgym eval reverify``: re-score saved episodes with today's verifiers.

Each record is replayed in a fresh env made with its ``env_id`` and ``env_kwargs``: reset with its
seed (or its pinned task), then stepped with its assistant messages in order. The replayed reward
is compared with the recorded one (and each turn's with the record's ``turn_rewards``, where it has
them: a reward moved to another turn is a change too), so a verifier change can be checked against
yesterday's rollouts in CI: the command exits with status 1 when any reward changed. A record that cannot be
replayed (its env is not registered, the seed now draws another task, no seed was recorded) is
reported as *unreplayable*, never as a changed reward. A branched episode's record (``branch``:
it continued a saved state of its seed's episode) replays the whole conversation and compares the
rewards of its own last ``turns`` turns; one cut before the env ended it is expected not to end.

A record is untrusted input: its ``env_kwargs`` cannot choose how code is run
(:data:`UNTRUSTED_KWARGS`: a sandbox, its backend or limits) nor where to connect (a served
env's record is not replayed: reverify opens no connection a record names), and a record of the
wrong shape is unreplayable, with the field that is wrong.

Example::

    textgym eval textgym/Code-v0 --policy oracle --episodes 50 --out yesterday.jsonl
    textgym eval reverify yesterday.jsonl --out reverify.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from textgym.error import TextGymError

Status = Literal["unchanged", "changed", "unreplayable"]
# Env kwargs that decide how code runs or where the env connects: never taken from a record.
UNTRUSTED_KWARGS = frozenset({"backend", "sandbox", "limits", "url", "urls", "token"})
NOT_REPLAYED = {
    "textgym/Remote-v0": "a served env's record: reverify opens no connection a record names; replay it with the served env's id"
}


@dataclass(frozen=True)
class Replay:
    """What re-scoring one record found."""

    source: str
    env_id: str
    task_id: str | None
    status: Status
    recorded: float | None
    replayed: float | None = None
    reason: str | None = None
    turn_rewards: list[float] | None = None
    """The replayed reward of each turn."""


class Unreplayable(Exception):
    """This record cannot be replayed; the message says why."""


def reverify(records: Iterable[Mapping[str, Any]]) -> list[Replay]:
    """Replay every record in a fresh env (one env per env id and kwargs, reset per record)."""
    import gymnasium as gym

    envs: dict[str, Any] = {}
    results = []
    try:
        for r in records:
            source, env_id = r.get("_source", "?"), str(r.get("env_id"))
            recorded = r.get("reward") if _is_number(r.get("reward")) else None
            task_id = r.get("task_id") if isinstance(r.get("task_id"), str) else None
            try:
                kwargs = _checked(r)
                key = json.dumps([env_id, kwargs], sort_keys=True)
                if key not in envs:
                    envs[key] = _make(gym, env_id, kwargs)
                reward, turn_rewards, reason = _replay(envs[key], r)
            except Unreplayable as exc:
                results.append(Replay(source, env_id, task_id, "unreplayable", recorded, reason=str(exc)))
                continue
            recorded = float(r["reward"])
            reason = reason or _moved(r.get("turn_rewards"), turn_rewards)
            same = _close(reward, recorded) and reason is None
            status: Status = "unchanged" if same else "changed"
            results.append(Replay(source, env_id, task_id, status, recorded, reward, reason, turn_rewards))
    finally:
        for env in envs.values():
            if env is not None:
                env.close()
    return results


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _moved(recorded: list[float] | None, replayed: list[float]) -> str | None:
    """Why the per-turn rewards differ from the record's (None: they agree, or it has none)."""
    if recorded is None:
        return None
    if len(recorded) != len(replayed) or not all(_close(a, b) for a, b in zip(recorded, replayed)):
        return f"turn rewards {[float(x) for x in recorded]} -> {replayed}"
    return None


def _checked(r: Mapping[str, Any]) -> dict[str, Any]:
    """The record's env kwargs, once its fields have the types replaying needs."""
    if not _is_number(r.get("reward")):
        raise Unreplayable(f"the record's reward is not a number: {r.get('reward')!r:.60}")
    turn_rewards = r.get("turn_rewards")
    if turn_rewards is not None and not (isinstance(turn_rewards, list) and all(_is_number(x) for x in turn_rewards)):
        raise Unreplayable(f"the record's turn_rewards are not a list of numbers: {turn_rewards!r:.60}")
    messages = r.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise Unreplayable("the record's messages are not a list of message objects")
    if r.get("seed") is not None and (type(r["seed"]) is not int or r["seed"] < 0):
        raise Unreplayable(f"the record's seed is not a non-negative integer: {r['seed']!r:.60}")
    branch = r.get("branch")
    if branch is not None and not (isinstance(branch, dict) and type(r.get("turns")) is int and r["turns"] >= 1):
        raise Unreplayable("the record's branch is not an object, or its turns are not a positive integer")
    reason = NOT_REPLAYED.get(str(r.get("env_id")))
    if reason:
        raise Unreplayable(reason)
    kwargs = r.get("env_kwargs") or {}  # a record from before env_kwargs were kept: the defaults (the task id check tells)
    if not isinstance(kwargs, dict):
        raise Unreplayable("the record's env_kwargs are not an object")
    refused = sorted(UNTRUSTED_KWARGS & kwargs.keys())
    if refused:
        raise Unreplayable(f"the record's env_kwargs set {', '.join(refused)}, which a record may not choose")
    return kwargs


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _make(gym: Any, env_id: str, kwargs: Mapping[str, Any]) -> Any:
    if env_id not in gym.registry:
        raise Unreplayable(f"{env_id} is not a registered env (another textgym version?)")
    try:
        return gym.make(env_id, **kwargs).unwrapped
    except Exception as exc:  # a kwarg that this version no longer takes, a tasks file that is gone
        raise Unreplayable(f"gym.make({env_id!r}, **env_kwargs) failed: {type(exc).__name__}: {exc}") from None


def _replay(env: Any, r: Mapping[str, Any]) -> tuple[float, list[float], str | None]:
    """The replayed episode's reward, each turn's, and why it is not comparable (else None)."""
    if r.get("seed") is None:
        raise Unreplayable("the record has no seed")
    try:
        env.reset(seed=int(r["seed"]))
    except Exception as exc:
        raise Unreplayable(f"reset failed: {type(exc).__name__}: {exc}") from None
    if getattr(env, "task", None) is not None and isinstance(r.get("task_id"), str) and env.task.id != r["task_id"]:
        raise Unreplayable(f"seed {r['seed']} now draws task {env.task.id}, not {r['task_id']} (a different env version or kwargs)")
    actions = [_action(m) for m in r.get("messages") or () if m.get("role") == "assistant"]
    if not actions:
        raise Unreplayable("the record has no assistant turns to replay")
    branch = r.get("branch")
    first = len(actions) - r["turns"] if branch else 0  # a branch's reward is that of its own turns
    if first < 0:
        raise Unreplayable(f"the record's turns ({r['turns']}) exceed its {len(actions)} assistant turns")
    rewards, ended = [], False
    for k, action in enumerate(actions, 1):
        try:
            _, reward, terminated, truncated, _ = env.step(action)
        except Exception as exc:
            raise Unreplayable(f"turn {k} raised {type(exc).__name__}: {exc}") from None
        if k > first:
            rewards.append(float(reward))
        if terminated or truncated:
            ended = True
            break
    total = float(sum(rewards))
    if not ended and not (branch and branch.get("cut")):
        return total, rewards, f"the episode did not end after the {len(actions)} recorded turns"
    if k < len(actions):
        return total, rewards, f"the episode ended at turn {k} of {len(actions)}"
    return total, rewards, None


def _action(message: Mapping[str, Any]) -> Any:
    """The action that made this assistant message: its text, or the message when it has tool calls."""
    if message.get("tool_calls"):
        return {"role": "assistant", "content": message.get("content") or "", "tool_calls": list(message["tool_calls"])}
    return message.get("content") or ""


def summary(results: Iterable[Replay]) -> dict[str, dict[str, int]]:
    """Per env: how many records were unchanged, changed and unreplayable."""
    counts: dict[str, Counter] = {}
    for x in results:
        counts.setdefault(x.env_id, Counter())[x.status] += 1
    return {env: {s: c.get(s, 0) for s in ("unchanged", "changed", "unreplayable")} for env, c in counts.items()}


# ----- command line -----


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``textgym eval reverify``."""
    parser.add_argument("rollouts", nargs="+", metavar="ROLLOUTS", help="rollouts .jsonl files or textgym train run directories")
    parser.add_argument("--out", default=None, metavar="JSON", help="write the report (summary and every record's result)")


def run(args: argparse.Namespace) -> int:
    """Re-score, print a table per env and the changed and unreplayable records; 1 if any reward changed."""
    from textgym.tables import console as make_console
    from textgym.tables import print_table
    from textgym.view.records import read, sources

    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise TextGymError(f"--out: the folder of {args.out!r} does not exist")
    records = [r for s in sources(args.rollouts) for r in read(s)]
    results = reverify(records)
    counts = summary(results)
    out = make_console()
    rows = [
        (env, [str(len([x for x in results if x.env_id == env])), *(str(c[s]) for s in ("unchanged", "changed", "unreplayable"))])
        for env, c in counts.items()
    ]
    print_table(out, f"re-verified {len(results)} records", "env", ["records", "unchanged", "changed", "unreplayable"], rows)
    for x in results:
        if x.status == "changed":
            note = f" ({x.reason})" if x.reason else ""
            out.print(
                f"changed: {x.source} {x.env_id} {x.task_id}: reward {x.recorded:g} -> {x.replayed:g}{note}", markup=False, soft_wrap=True
            )
        elif x.status == "unreplayable":
            out.print(f"unreplayable: {x.source} {x.env_id} {x.task_id}: {x.reason}", markup=False, soft_wrap=True)
    if args.out:
        report = {"summary": counts, "records": [asdict(x) for x in results]}
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        out.print(f"report written to {os.fspath(args.out)}", markup=False)
    return 1 if any(x.status == "changed" for x in results) else 0
