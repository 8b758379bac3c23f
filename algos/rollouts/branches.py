"""Branched GRPO groups: ``group_size`` continuations of one saved env state, scored by the turns they play.

An ordinary group scores whole episodes, so every move of an episode shares its one outcome. A
branched group restarts ``group_size`` episodes from one state saved before a turn
(``reset(options={"state": s})``), plays ``turns`` policy turns (0: to the end) and scores each by
the env's rewards over those turns: with a dense reward (Sudoku's ``reward="dense"``) a one-turn
branch is scored by the potential change of its one move. Its prompt is the saved context (loss
mask 0) and its group is the state, so the advantages, packing and loss are GRPO's own.

Start states come from the step's own episodes (``rollouts``: states saved before each policy
turn by ``collect(keep_states=True)``), those of groups whose episodes disagreed first, or from
the env's demonstrator (``demonstrator``: an oracle episode, with the warm start's oracle
arguments, at a random turn; a start-state curriculum). No state is used twice in a step, and
every draw comes from the run's seed tree, so a resumed run branches where the uninterrupted one
would.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from textgym.algos.config.run import BranchSource
from textgym.algos.grpo.seeds import TASK_SEEDS, SeedTree
from textgym.rollout import Rollout, collect


@dataclass(frozen=True, eq=False)
class BranchStart:
    """Where a branched group starts.

    Attributes:
        env_id: The env the state is of.
        state: ``get_state()`` bytes, taken before the policy turn the branch replays.
        start_turn: Policy turns the source episode had played at the state.
        source: ``rollouts`` or ``demonstrator``.
        seed: The task seed of the source episode (the branches' records keep it).
        prompt_ids: The source episode's token context at that turn, the branches' exact prompt
            (None: the token wrapper renders the state's conversation, as for a demonstrator's).
    """

    env_id: str
    state: bytes
    start_turn: int
    source: BranchSource
    seed: int
    prompt_ids: np.ndarray | None = None

    def reset_options(self) -> dict[str, Any]:
        """The options that reset an episode to this start."""
        return {"state": self.state} | ({} if self.prompt_ids is None else {"prompt_ids": self.prompt_ids})


def state_digest(state: bytes) -> bytes:
    """What tells two states apart (equal bytes: the same episode at the same point)."""
    return hashlib.blake2b(state, digest_size=16).digest()


def rollout_starts(rollouts: Sequence[Rollout], n: int, rng: np.random.Generator) -> list[BranchStart]:
    """Up to ``n`` distinct states saved at turns of ``rollouts``, where they teach first.

    A turn of a group whose episodes got different rewards comes before any turn of a group
    whose episodes all agreed (GRPO has nothing to learn there); within each tier the order is
    ``rng``'s. Episodes without saved states (``collect(keep_states=False)``), env failures and
    branches are not sources.
    """
    by_group: dict[Any, list[float]] = {}
    for r in rollouts:
        by_group.setdefault((r.env_id, r.group), []).append(r.reward)
    disagreed = {g for g, rewards in by_group.items() if np.ptp(rewards) > 0}
    candidates = [
        (r, k) for r in rollouts if r.turn_states and r.branch is None and r.end_reason != "env_error" for k in range(len(r.turn_states))
    ]
    order = rng.permutation(len(candidates))
    order = sorted(order, key=lambda i: (candidates[i][0].env_id, candidates[i][0].group) not in disagreed)  # stable
    starts: list[BranchStart] = []
    seen: set[bytes] = set()
    for i in order:
        if len(starts) == n:
            break
        r, k = candidates[i]
        digest = state_digest(r.turn_states[k])
        if digest in seen:
            continue
        seen.add(digest)
        starts.append(BranchStart(r.env_id, r.turn_states[k], k, "rollouts", int(r.seed or 0), _saved_prefix(r, k)))
    return starts


def _saved_prefix(r: Rollout, k: int) -> np.ndarray | None:
    """The token context before policy turn ``k`` of a one-sample token episode (None otherwise)."""
    if r.token_ids is None or r.sample_spans is not None or k >= len(r.turn_spans or ()):
        return None
    return np.asarray(r.token_ids[: r.turn_spans[k][0]], dtype=np.int32)


def demonstrator_starts(
    env_id: str, env_kwargs: Mapping[str, Any], oracle_kwargs: Mapping[str, Any] | None, n: int, tree: SeedTree, step: int
) -> list[BranchStart]:
    """``n`` distinct states of demonstrator episodes, each at a random turn of its episode.

    Draw ``j`` takes a training task seed and a turn from ``tree.seed("branch_starts", step,
    turn=1, row=j)``, plays the env's ``oracle_action(**oracle_kwargs)`` (a noisy demonstrator's
    mistakes included) and keeps the state before that turn; a state drawn before is skipped
    (at most ``4 * n`` draws).
    """
    import gymnasium as gym

    env = gym.make(env_id, **dict(env_kwargs)).unwrapped
    starts: list[BranchStart] = []
    seen: set[bytes] = set()
    try:
        for j in range(4 * n):
            if len(starts) == n:
                break
            rng = np.random.default_rng(tree.seed("branch_starts", step, turn=1, row=j))
            seed = int(rng.integers(TASK_SEEDS))
            states = _oracle_states(env, seed, oracle_kwargs or {})
            k = int(rng.integers(len(states)))
            digest = state_digest(states[k])
            if digest not in seen:
                seen.add(digest)
                starts.append(BranchStart(env_id, states[k], k, "demonstrator", seed))
    finally:
        env.close()
    return starts


def _oracle_states(env: Any, seed: int, oracle_kwargs: Mapping[str, Any]) -> list[bytes]:
    """The state before each turn of the oracle's episode of task ``seed``."""
    env.reset(seed=seed)
    states, done = [], False
    while not done:
        states.append(env.get_state())
        _, _, terminated, truncated, _ = env.step(env.oracle_action(**oracle_kwargs))
        done = terminated or truncated
    return states


def play_branches(venv: Any, policy: Any, starts: Sequence[BranchStart], group_size: int, turns: int) -> list[Rollout]:
    """``group_size`` episodes from each start (group ``i``: start ``i``), each stopped after
    ``turns`` policy turns (0: played to the end); the records carry ``branch``."""
    if not starts:
        return []
    got = collect(
        venv,
        policy,
        seeds=[s.seed for s in starts],
        group_size=group_size,
        group_options=[s.reset_options() for s in starts],
        turn_limit=turns or None,
        env_id=starts[0].env_id,
    )
    return [dataclasses.replace(r, branch=_mark(starts[r.group], r)) for r in got]


def _mark(start: BranchStart, r: Rollout) -> dict[str, Any]:
    return {"start_turn": start.start_turn, "source": start.source, "cut": not (r.terminated or r.truncated)}


def branch_metrics(branches: Sequence[Rollout], seconds: float) -> dict[str, float]:
    """``branch/*``: groups and episodes played, their success and mean reward, the groups whose
    rewards were all equal (no signal), the share stopped before the env ended them, the mean
    start turn, and the seconds spent choosing and playing them."""
    groups: dict[Any, list[float]] = {}
    for r in branches:
        groups.setdefault(r.group, []).append(r.reward)
    return {
        "branch/groups": float(len(groups)),
        "branch/episodes": float(len(branches)),
        "branch/success": _mean([r.success for r in branches]),
        "branch/reward_mean": _mean([r.reward for r in branches]),
        "branch/zero_std_groups": float(sum(np.ptp(rewards) == 0 for rewards in groups.values())),
        "branch/cut": _mean([r.branch["cut"] for r in branches]),
        "branch/start_turn": _mean([r.branch["start_turn"] for r in branches]),
        "branch/seconds": float(seconds),
    }


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0
