"""Rollout records: one finished episode, as training data and as an evaluation log.

Records write to and read from JSONL (arrays as lists), so a file of rollouts is both a dataset
for the trainers and something a person can grep, and convert to and from a Hugging Face
``datasets.Dataset`` in the conversational format that TRL and Unsloth read (``messages``,
``tools``, plus ``reward`` and the other fields). :func:`collect` plays a vector env with a batched
policy and returns the records.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from textgym.error import require
from textgym.messages import thaw

_ARRAYS = {"token_ids": np.int32, "loss_mask": np.int8, "logprobs": np.float32}


@dataclass(frozen=True, eq=False)
class TokenTrajectory:
    """The tokens of one episode, as :class:`textgym.wrappers.TokenObservation` reports them.

    It travels in ``info["trajectory"]`` as one object (not as loose arrays) because vector envs
    batch array-valued infos into one fixed-shape array, which variable lengths would break.

    Attributes:
        token_ids: ``(T,)`` int32, the whole context: prompt, sampled ids and env turns.
        loss_mask: ``(T,)`` int8, 1 exactly on the policy-sampled ids.
        logprobs: ``(T,)`` float32 sampler logprobs on the sampled ids (0 elsewhere), or None
            unless every policy turn gave them.
        turn_spans: ``[start, end)`` of each policy turn in ``token_ids``.
        messages: The final conversation.
        sample_spans: ``[start, end)`` of each training sample in ``token_ids`` when the episode
            was split where the chat template rewrote earlier turns
            (``TokenObservation(on_template_break="new_sample")``): each sample is a sequence of
            its own (its prompt, then its turns); None when the episode is one sample.
    """

    token_ids: np.ndarray
    loss_mask: np.ndarray
    logprobs: np.ndarray | None
    turn_spans: tuple[tuple[int, int], ...]
    messages: tuple[Mapping[str, Any], ...]
    sample_spans: tuple[tuple[int, int], ...] | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenTrajectory):
            return NotImplemented
        same_lps = (self.logprobs is None) == (other.logprobs is None) and (
            self.logprobs is None or np.array_equal(self.logprobs, other.logprobs)
        )
        return (
            np.array_equal(self.token_ids, other.token_ids)
            and np.array_equal(self.loss_mask, other.loss_mask)
            and same_lps
            and self.turn_spans == other.turn_spans
            and self.messages == other.messages
            and self.sample_spans == other.sample_spans
        )

    __hash__ = None  # pyright: ignore[reportAssignmentType]  # unhashable: mutable arrays inside


@dataclass
class Rollout:
    """One episode.

    Token fields come from :class:`textgym.wrappers.TokenObservation` and are None for text envs:
    ``token_ids`` is the whole trajectory, ``loss_mask`` is 1 exactly on policy-sampled tokens,
    ``logprobs`` holds the sampler's logprob at those positions (0 elsewhere), ``turn_spans`` the
    ``[start, end)`` span of each policy turn. ``group`` ties GRPO groups (same seed) together.
    ``tools`` holds the OpenAI tool schemas the env declared at reset (chat templates need them
    to render the conversation), ``timing`` the episode's totals in seconds and ``turn_timing``
    one ``{"policy_s", "env_s"}`` entry per turn (see :func:`collect`). ``end_reason`` is the
    last step's ``info["end_reason"]`` (one of :data:`textgym.env.END_REASONS`; None in records
    written before it existed). ``verifications`` holds every ``info["verification"]`` the env
    reported, in order, as ``{"turn": t, "verification": ...}`` (the last is the verdict; Code-v0
    reports one per submission): what ``textgym view`` draws the board, diff or tests from.
    ``env_kwargs`` are the ``gym.make`` keyword arguments the env was made with (those that are
    JSON values), so that ``textgym eval reverify`` can replay the episode in a fresh env; a
    secret among them (:data:`SECRET_KWARGS`: a served env's ``token``) is written as ``"<set>"``.
    ``sample_spans`` is the ``[start, end)`` of each training sample in ``token_ids`` when the
    token wrapper split the episode at a chat template's rewrite of earlier turns (None: one
    sample); the trainers pack each sample as its own row, all with the episode's advantage.
    ``turn_rewards`` holds the reward of the env step that answered each policy turn (they sum to
    ``reward``), and ``turn_state_keys`` the ``info["state_key"]`` of the state each turn was
    taken from (the reset's for the first): turns of a group that left from equal keys are
    compared with each other by turn-level advantages. Both are None in records written before
    they existed; ``turn_state_keys`` also when the env reports no ``state_key``.
    ``branch`` marks an episode that continued a saved state (a branched GRPO group,
    :mod:`textgym.algos.rollouts.branches`): ``{"start_turn", "source", "cut"}``, the turns its source had
    played, where the state came from (``rollouts`` or ``demonstrator``) and whether the branch
    stopped before the env ended it; None for an episode played from its start.
    ``turn_states`` (``collect(keep_states=True)``, not part of the record) holds the env's
    ``get_state()`` before each policy turn.
    """

    env_id: str
    task_id: str
    seed: int | None
    messages: list[dict[str, Any]]
    reward: float
    success: bool
    turns: int
    terminated: bool
    truncated: bool
    end_reason: str | None = None
    token_ids: np.ndarray | None = None
    loss_mask: np.ndarray | None = None
    logprobs: np.ndarray | None = None
    turn_spans: list[tuple[int, int]] | None = None
    group: int | None = None
    timing: dict[str, float] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    turn_timing: list[dict[str, float]] | None = None
    verifications: list[dict[str, Any]] | None = None
    env_kwargs: dict[str, Any] | None = None
    sample_spans: list[tuple[int, int]] | None = None
    turn_rewards: list[float] | None = None
    turn_state_keys: list[str] | None = None
    branch: dict[str, Any] | None = None
    turn_states: list[bytes] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self) | {"messages": thaw(self.messages)}
        del d["turn_states"]  # bytes for the trainer's branches, not a record's
        for name in _ARRAYS:
            if d[name] is not None:
                d[name] = np.asarray(d[name]).tolist()
        for name in ("turn_spans", "sample_spans"):
            if d[name] is not None:
                d[name] = [list(s) for s in d[name]]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rollout:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        for name, dtype in _ARRAYS.items():
            if kwargs.get(name) is not None:
                kwargs[name] = np.asarray(kwargs[name], dtype=dtype)
        for name in ("turn_spans", "sample_spans"):
            if kwargs.get(name) is not None:
                kwargs[name] = [tuple(s) for s in kwargs[name]]
        return cls(**kwargs)


def rollout_schema() -> dict[str, Any]:
    """The JSON Schema of one record (``textgym/rollout.schema.json``; docs/records.md explains it)."""
    from importlib import resources

    return json.loads(resources.files("textgym").joinpath("rollout.schema.json").read_text(encoding="utf-8"))


def write_rollouts(path: str | os.PathLike, rollouts: Iterable[Rollout], append: bool = False) -> None:
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for r in rollouts:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def read_rollouts(path: str | os.PathLike) -> list[Rollout]:
    with open(path, encoding="utf-8") as fh:
        return [Rollout.from_dict(json.loads(line)) for line in fh if line.strip()]


# ----- Hugging Face datasets -----


def _features(rollouts: Sequence[Rollout]) -> Any:
    """Column types: messages and tool schemas as JSON (their keys vary by role and tool, and Arrow
    structs would pad every message with the union of all keys), arrays as typed lists, timings
    as float64 structs (``datasets``' JSON type rounds floats)."""
    from datasets import Features, Json, List, Value

    timing_keys = sorted({k for r in rollouts for k in r.timing})
    turn_keys = sorted({k for r in rollouts for t in r.turn_timing or () for k in t})
    return Features(
        {
            "messages": List(Json()),
            "tools": List(Json()),
            "reward": Value("float64"),
            "env_id": Value("string"),
            "task_id": Value("string"),
            "seed": Value("int64"),
            "success": Value("bool"),
            "turns": Value("int64"),
            "terminated": Value("bool"),
            "truncated": Value("bool"),
            "end_reason": Value("string"),
            "token_ids": List(Value("int32")),
            "loss_mask": List(Value("int8")),
            "logprobs": List(Value("float32")),
            "turn_spans": List(List(Value("int64"))),
            "sample_spans": List(List(Value("int64"))),
            "turn_rewards": List(Value("float64")),
            "turn_state_keys": List(Value("string")),
            "group": Value("int64"),
            # Arrow has no empty structs: records without timings keep theirs as (empty) JSON.
            "timing": {k: Value("float64") for k in timing_keys} if timing_keys else Json(),
            "turn_timing": List({k: Value("float64") for k in turn_keys} if turn_keys else Json()),
            "verifications": List(Json()),
            "env_kwargs": Json(),
            "branch": Json(),
        }
    )


def to_dataset(rollouts: Iterable[Rollout]) -> Any:
    """A ``datasets.Dataset`` with one row per rollout, in TRL's conversational format.

    The ``messages`` (OpenAI chat shape, tool calls included) and ``tools`` columns are what
    ``trl.SFTTrainer`` and Unsloth read; ``reward`` and the rest of the record ride along, so
    :func:`from_dataset` gives the rollouts back unchanged. Filter by ``success`` or ``reward``
    to build an SFT set from good episodes.

    Raises:
        MissingDependency: ``datasets`` is not installed (``pip install 'textgym[datasets]'``).
    """
    datasets = require("datasets", "datasets")
    rollouts = list(rollouts)
    features = _features(rollouts)
    rows = [r.to_dict() for r in rollouts]
    return datasets.Dataset.from_dict({k: [row[k] for row in rows] for k in features}, features=features)


def from_dataset(dataset: Iterable[Mapping[str, Any]]) -> list[Rollout]:
    """Rollouts from a dataset made by :func:`to_dataset` (or any rows with the record's fields)."""
    rollouts = []
    for row in dataset:
        row = dict(row)
        # Struct columns hold the union of the keys; a record's absent keys come back as None.
        row["timing"] = _present(row.get("timing") or {})
        if row.get("turn_timing") is not None:
            row["turn_timing"] = [_present(t) for t in row["turn_timing"]]
        rollouts.append(Rollout.from_dict(row))
    return rollouts


def _present(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ----- collecting rollouts from a vector env -----


class EpisodeSlot(NamedTuple):
    """The episode a vector-env slot plays, as :func:`collect` tells a policy before each ``act``.

    A policy keys its random draws on it (:meth:`textgym.policies.ModelPolicy.set_episodes`), so an
    episode samples the same whatever slot, batch or process plays it.
    """

    seed: int | None
    """The task seed the episode was reset with."""
    group: int
    """Its group's index among the groups of the ``collect`` call (``Rollout.group``)."""
    member: int
    """Its index in its group (``0 .. group_size - 1``)."""
    turn: int
    """Policy turns it has taken so far (the turn the next ``act`` samples)."""


@dataclass
class _Episode:
    """An episode in flight in one vector-env slot."""

    index: int
    seed: int | None
    reset_info: dict[str, Any]
    started: float
    turn_rewards: list[float] = field(default_factory=list)
    turn_state_keys: list[str | None] = field(default_factory=list)
    turn_timing: list[dict[str, float]] = field(default_factory=list)
    verifications: list[dict[str, Any]] = field(default_factory=list)
    turn_states: list[bytes] | None = None

    def slot(self, group_size: int) -> EpisodeSlot:
        """Where the episode stands, for the policy (its turns so far are its policy calls)."""
        return EpisodeSlot(self.seed, self.index // group_size, self.index % group_size, len(self.turn_timing))


def collect(
    venv: Any,
    policy: Any,
    *,
    episodes: int | None = None,
    seeds: Sequence[int] | None = None,
    group_size: int = 1,
    options: Mapping[str, Any] | None = None,
    env_id: str | None = None,
    group_options: Sequence[Mapping[str, Any] | None] | None = None,
    turn_limit: int | None = None,
    keep_states: bool = False,
) -> list[Rollout]:
    """Play ``episodes`` episodes in a vector env with a batched policy and return their records.

    Episode ``k`` is reset with ``seeds[k // group_size]``, so each GRPO group of ``group_size``
    episodes shares one task (``Rollout.group == k // group_size``). Rollouts come back ordered by
    ``k``, whatever order they finished in.

    Every step the policy acts on the whole batch (``policy.act(observations, infos)``, slot ``i``
    is sub-env ``i``; ``infos[i]`` is that slot's latest reset or step info). Slots whose episode
    ended are masked: their actions still go to the vector env, their results are dropped. Vector
    envs cannot seed an autoreset, so how slots are refilled follows the autoreset mode:

    * ``NEXT_STEP`` and ``SAME_STEP``: in waves of ``num_envs`` episodes, each begun with one
      seeded ``venv.reset(seed=[...])`` once every slot of the previous wave has finished;
    * ``DISABLED``: a finished slot is reset at once with the next episode's seed
      (``options={"reset_mask": ...}``).

    A policy with ``set_live_slots(live)`` is told before every ``act`` which slots hold an episode
    being recorded (it may skip the others and free the state of episodes that ended), and
    ``set_live_slots(None)`` when collection is over. A policy with ``set_episodes(slots)`` is told
    likewise which episode each slot plays (an :class:`EpisodeSlot`, or None), and None at the end.

    With :class:`textgym.wrappers.TokenObservation` sub-envs, token fields come from
    ``info["trajectory"]``, and the policy's logprobs are passed along with its ids.
    A turn the policy flags in ``PolicyOutput.cut`` (its token limit cut it) that ends an unsolved
    episode makes the record's ``end_reason`` ``length``.

    Per turn: ``turn_rewards`` holds each vector step's reward (``reward`` is their sum) and
    ``turn_state_keys`` the ``state_key`` of the info the policy acted on (the reset's, then each
    step's), or None when the env reports none.

    Branching: ``group_options`` gives each group reset options of its own (on top of
    ``options``), e.g. ``{"state": s}`` for a group that continues a saved episode (slots are then
    reset one group at a time, with a ``reset_mask``). ``turn_limit=k`` stops every episode
    after ``k`` policy turns: one the env has not ended by then is recorded as it stands, with
    ``terminated``, ``truncated`` and ``end_reason`` unset (stopped, not ended) and ``reward``
    the sum of its ``k`` rewards. ``keep_states=True`` records the env's ``get_state()`` before
    each policy turn in ``Rollout.turn_states``, where branches can start.

    Timing: ``turn_timing`` holds, per turn, the seconds of the batched policy call and of the
    vector step that the turn was part of; ``timing`` their sums and ``wall_s``, from the episode's
    reset to its end.

    Args:
        venv: A ``gymnasium.vector.VectorEnv`` (sync, async or Ray) of textgym envs.
        policy: Anything with ``act(observations, infos) -> PolicyOutput``.
        episodes: How many episodes; defaults to ``len(seeds) * group_size`` (fewer take the
            first ones, so the last group may be partial).
        seeds: One task seed per group; defaults to ``0, 1, ...``.
        group_size: Episodes per seed (GRPO's G).
        options: Reset options passed to every episode (e.g. ``{"task_index": 3}``).
        env_id: The record's ``env_id``; defaults to ``venv.spec.id``.
        group_options: Reset options per group (None entries: ``options`` alone).
        turn_limit: Stop each episode after this many policy turns (None: play it to the end).
        keep_states: Keep each turn's starting env state in ``Rollout.turn_states``.

    Returns:
        One :class:`Rollout` per episode.

    Example:
        >>> import gymnasium as gym, textgym
        >>> from textgym.policies import OraclePolicy
        >>> venv = gym.make_vec("textgym/Sudoku-v0", num_envs=3)
        >>> rollouts = collect(venv, OraclePolicy(venv), seeds=[7, 8], group_size=2)
        >>> [(r.seed, r.group, r.success) for r in rollouts]
        [(7, 0, True), (7, 0, True), (8, 1, True), (8, 1, True)]
    """
    from gymnasium.vector import AutoresetMode

    if int(group_size) < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if episodes is None and seeds is None:
        raise ValueError("pass episodes=, seeds= or both")
    if seeds is None:
        assert episodes is not None  # one of the two was given
        if episodes % group_size:
            raise ValueError(f"episodes ({episodes}) must be a multiple of group_size ({group_size})")
        seeds = range(episodes // group_size)
    if episodes is None:
        episodes = len(seeds) * group_size
    if not 0 < episodes <= len(seeds) * group_size:
        raise ValueError(f"episodes must be in [1, {len(seeds)} seeds x group_size={group_size}], got {episodes}")
    if group_options is not None and len(group_options) != len(seeds):
        raise ValueError(f"expected one group_options entry per group ({len(seeds)}), got {len(group_options)}")
    if turn_limit is not None and turn_limit < 1:
        raise ValueError(f"turn_limit must be >= 1 (None: no limit), got {turn_limit}")
    mode = AutoresetMode(venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
    env_id = env_id or getattr(getattr(venv, "spec", None), "id", None) or "unknown"
    env_kwargs = _env_kwargs(venv)
    n = venv.num_envs

    results: list[Rollout | None] = [None] * episodes
    slots: list[_Episode | None] = [None] * n
    infos_by_slot: list[dict[str, Any]] = [{} for _ in range(n)]
    queue = list(range(episodes))[::-1]  # episodes not yet started, next one last

    def refill(mask: np.ndarray):
        """Reset the masked slots with the next episodes (``mask`` all True: a full reset)."""
        seed_list: list[int | None] = [None] * n
        for i in np.flatnonzero(mask):
            k = queue.pop() if queue else None
            slots[i] = episode = None if k is None else _Episode(k, int(seeds[k // group_size]), {}, time.perf_counter())
            seed_list[i] = None if episode is None else episode.seed
            if episode is not None and keep_states:
                episode.turn_states = []
        # Slots whose groups have options of their own are reset one group at a time.
        group_of = np.array([-1 if s is None else s.index // group_size for s in slots])
        own = np.array([g >= 0 and group_options is not None and group_options[g] is not None for g in group_of], dtype=bool)
        calls = [(mask & ~own, None)]
        calls += [(mask & (group_of == g), group_options[g]) for g in dict.fromkeys(group_of[mask & own].tolist())]
        for part, extra in calls:
            if not part.any():
                continue
            reset_options = dict(options or {}) | dict(extra or {})
            if not part.all():
                reset_options["reset_mask"] = part
            observations, infos = venv.reset(seed=seed_list, options=reset_options or None)
            for i in np.flatnonzero(part):
                infos_by_slot[i] = _slot_info(infos, i)
                if (episode := slots[i]) is not None:
                    episode.reset_info = infos_by_slot[i]
        return observations

    observations = refill(np.ones(n, dtype=bool))
    with _live_slots(policy, group_size) as tell_live:
        while any(s is not None for s in slots):
            tell_live(slots)
            if keep_states:
                for episode, state in zip(slots, venv.unwrapped.call("get_state")):
                    if episode is not None:
                        episode.turn_states.append(state)
            t0 = time.perf_counter()
            output = policy.act(list(observations), list(infos_by_slot))
            t1 = time.perf_counter()
            acted_from = list(infos_by_slot)  # the states the turns were taken from
            observations, rewards, terminated, truncated, infos = venv.step(_env_actions(observations, output))
            cuts = getattr(output, "cut", None)
            t2 = time.perf_counter()
            stopped: list[int] = []  # slots whose episode reached turn_limit before the env ended it
            for i, episode in enumerate(slots):
                infos_by_slot[i] = _slot_info(infos, i)
                if episode is None:
                    continue
                episode.turn_state_keys.append(acted_from[i].get("state_key"))
                episode.turn_rewards.append(float(rewards[i]))
                episode.turn_timing.append({"policy_s": t1 - t0, "env_s": t2 - t1})
                if terminated[i] or truncated[i]:
                    if mode == AutoresetMode.SAME_STEP:
                        final_obs, final_info = infos["final_obs"][i], _slot_info(infos["final_info"], i)
                    else:
                        final_obs, final_info = observations[i], infos_by_slot[i]
                    _note_verification(episode, final_info)
                    done = bool(terminated[i]), bool(truncated[i])
                    cut = bool(cuts[i]) if cuts is not None else False
                    results[episode.index] = _record(episode, env_id, final_obs, final_info, *done, group_size, env_kwargs, cut)
                    slots[i] = None
                else:
                    _note_verification(episode, infos_by_slot[i])
                    if len(episode.turn_timing) == turn_limit:
                        stopped.append(i)
            if stopped:
                _record_stopped(venv, slots, stopped, results, observations, infos_by_slot, env_id, group_size, env_kwargs)
            ended = np.asarray(terminated) | np.asarray(truncated)
            ended[stopped] = True
            if all(s is None for s in slots):
                if queue:
                    observations = refill(np.ones(n, dtype=bool))
            elif mode == AutoresetMode.DISABLED and ended.any():
                observations = refill(ended)  # sub-envs that ended cannot step again before a reset
    return results  # type: ignore[return-value]


def _record_stopped(
    venv: Any,
    slots: list[_Episode | None],
    stopped: list[int],
    results: list[Rollout | None],
    observations: Any,
    infos_by_slot: list[dict[str, Any]],
    env_id: str,
    group_size: int,
    env_kwargs: dict[str, Any] | None,
) -> None:
    """Record the episodes of the ``stopped`` slots as they stand (``turn_limit`` reached) and free
    their slots. A token env's trajectory so far comes from its wrapper (``info`` has it only at
    the end of an episode)."""
    tokens = isinstance(observations[stopped[0]], np.ndarray)
    trajectories = venv.unwrapped.call("trajectory") if tokens else None
    for i in stopped:
        episode, info = slots[i], infos_by_slot[i]
        assert episode is not None  # a stopped slot holds its episode
        if trajectories is not None:
            info = dict(info, trajectory=trajectories[i])
        record = _record(episode, env_id, observations[i], info, False, False, group_size, env_kwargs)
        results[episode.index] = dataclasses.replace(record, end_reason=None)
        slots[i] = None


@contextmanager
def _live_slots(policy: Any, group_size: int) -> Iterator[Callable[[list[Any]], None]]:
    """Tell a policy with ``set_live_slots`` which slots hold an episode, and one with
    ``set_episodes`` which episodes, before each ``act`` (the function yielded takes ``collect``'s
    slots), and None when collection ends, however it ends."""
    set_live, set_episodes = getattr(policy, "set_live_slots", None), getattr(policy, "set_episodes", None)

    def tell(slots: list[_Episode | None]) -> None:
        if set_live is not None:
            set_live(np.array([s is not None for s in slots]))
        if set_episodes is not None:
            set_episodes([None if s is None else s.slot(group_size) for s in slots])

    try:
        yield tell
    finally:
        if set_live is not None:
            set_live(None)
        if set_episodes is not None:
            set_episodes(None)


def _note_verification(episode: _Episode, info: Mapping[str, Any]) -> None:
    if info.get("verification") is not None:
        episode.verifications.append({"turn": len(episode.turn_timing), "verification": thaw(info["verification"])})


def _env_actions(observations: Sequence[Any], output: Any) -> list[Any]:
    """The policy's actions, with its logprobs attached for token envs (TokenObservation's form)."""
    actions = list(output.actions)
    if len(actions) != len(observations):
        raise ValueError(f"the policy returned {len(actions)} actions for {len(observations)} observations")
    cuts = getattr(output, "cut", None)  # an output made before PolicyOutput had it
    if cuts is not None and len(cuts) != len(actions):
        raise ValueError(f"the policy returned {len(cuts)} cut flags for {len(actions)} actions")
    logprobs = output.logprobs or [None] * len(actions)
    return [
        {"ids": a, "logprobs": lp} if lp is not None and isinstance(obs, np.ndarray) else a
        for a, lp, obs in zip(actions, logprobs, observations)
    ]


def _record(
    episode: _Episode,
    env_id: str,
    final_obs: Any,
    info: Mapping[str, Any],
    terminated: bool,
    truncated: bool,
    group_size: int,
    env_kwargs: dict[str, Any] | None,
    cut: bool = False,
) -> Rollout:
    """One episode's record; ``cut``: the policy's token limit cut the turn that ended it."""
    trajectory = info.get("trajectory")
    if trajectory is None and isinstance(final_obs, np.ndarray):
        # A token env lost together with its wrapper (a Ray actor that died): the last context the
        # policy saw, with nothing to train on (the record's end_reason is env_error).
        ids = np.asarray(final_obs, dtype=np.int32)
        trajectory = TokenTrajectory(ids, np.zeros(ids.shape, np.int8), None, (), ())
    messages = trajectory.messages if trajectory is not None else final_obs
    turn_timing = episode.turn_timing
    timing = {
        "policy_s": sum(t["policy_s"] for t in turn_timing),
        "env_s": sum(t["env_s"] for t in turn_timing),
        "wall_s": time.perf_counter() - episode.started,
    }
    tools = episode.reset_info.get("tools")
    return Rollout(
        env_id=env_id,
        task_id=str(info.get("task_id", episode.reset_info.get("task_id", ""))),
        seed=episode.seed,
        messages=thaw(list(messages)),
        reward=float(sum(episode.turn_rewards)),  # the same additions, in the same order, as a running total
        success=bool(info.get("success", False)),
        turns=len(turn_timing),
        terminated=terminated,
        truncated=truncated,
        end_reason=_end_reason(info.get("end_reason"), cut),
        token_ids=None if trajectory is None else trajectory.token_ids,
        loss_mask=None if trajectory is None else trajectory.loss_mask,
        logprobs=None if trajectory is None else trajectory.logprobs,
        turn_spans=None if trajectory is None else [tuple(s) for s in trajectory.turn_spans],
        sample_spans=None if trajectory is None or trajectory.sample_spans is None else [tuple(s) for s in trajectory.sample_spans],
        group=episode.index // group_size,
        timing=timing,
        tools=thaw(list(tools)) if tools else None,
        turn_timing=turn_timing,
        verifications=episode.verifications or None,
        env_kwargs=env_kwargs,
        turn_rewards=list(episode.turn_rewards),
        turn_state_keys=None if None in episode.turn_state_keys else list(episode.turn_state_keys),
        turn_states=episode.turn_states,
    )


def _end_reason(reason: str | None, cut: bool) -> str | None:
    """``length`` for an unsolved episode whose last turn the policy's token limit cut (an
    endpoint's ``finish_reason``), as TokenObservation decides for ids without a stop token."""
    return "length" if cut and reason in ("failure", "max_turns") else reason


_VECTOR_KWARGS = frozenset({"num_envs", "vectorization_mode", "vector_kwargs", "wrappers"})
SECRET_KWARGS = frozenset({"token"})
"""Keyword arguments a record names only as ``"<set>"``: a secret never reaches records, logs or the viewer."""


def _env_kwargs(venv: Any) -> dict[str, Any] | None:
    """The sub-envs' ``gym.make`` keyword arguments, from the vector env's spec (JSON values only)."""
    spec = getattr(venv, "spec", None)
    if spec is None or spec.kwargs is None:
        return None
    out = {}
    for key, value in spec.kwargs.items():
        if key in _VECTOR_KWARGS:
            continue
        if key in SECRET_KWARGS and value is not None:
            out[key] = "<set>"
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # a sandbox object, a callable: not a record's business
        out[key] = value
    return out


def _slot_info(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """One sub-env's info out of a vector env's batched info (arrays plus ``_key`` masks)."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        if isinstance(value, Mapping):
            out[key] = _slot_info(value, i)
        else:
            item = value[i]
            out[key] = item.item() if isinstance(item, np.generic) else item
    return out
