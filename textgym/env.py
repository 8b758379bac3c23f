"""The base class every textgym environment builds on.

:class:`TextEnv` owns the turn loop that all envs share: the conversation, task selection and
seeding, parsing the assistant's turn, turning bad input into feedback, ``max_turns``
truncation, the ``info`` contract and ANSI rendering. A concrete env implements five hooks:

* ``generate_task(rng)``: a task from the env's seeded generator;
* ``task_from_dict(d)``: a task from a user's dict (its documented format) or a Task record;
* ``begin(task)``: set up the episode state and return the opening messages;
* ``respond(turn)``: act on a well-formed assistant turn and say what happens (:class:`Outcome`);
* ``verdict()``: ``(success, verification)`` when the episode is cut short by truncation.

and optionally ``tools`` (a :class:`~textgym.tools.Toolset`) and ``oracle_action()``.

State and fork: ``get_state()`` returns the episode as versioned bytes, ``set_state(state)``
restores it into an env made with the same id and arguments, ``clone()`` forks a live episode,
and ``reset(options={"state": state})`` starts from one (how a GRPO group branches from a shared
prefix). The base class saves what every env has (task, conversation, turn, generator); an env
adds its own parts with two hooks, ``save_episode(blobs)`` and ``load_episode(parts, blobs)``.

Every reset and step ``info`` carries ``state_key``: a short digest (16 hex characters) of the
decision-relevant state without the history (the task and ``decision_state()``, a hook whose
default is the env's last reply). Equal states give equal keys, so turns of a GRPO group that
left from the same state can be compared with each other (turn-level advantages).

The last step of every episode says why it ended in ``info["end_reason"]`` (:data:`END_REASONS`):
``success`` and ``failure`` (the verifier's verdict on a terminated episode), ``max_turns``,
``length`` (the action that ended it was cut by a character budget; token budgets are the
token wrapper's) and ``env_error`` (the env itself failed: an ``Outcome`` with
``end_reason="env_error"``; such episodes are not training samples).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

import gymnasium as gym
import numpy as np

from textgym import state as state_format
from textgym.error import InvalidAction, InvalidState, InvalidTask, ResetNeeded
from textgym.messages import FrozenDict, render, thaw, tool, user
from textgym.parsing import ParsedTurn, parse_turn
from textgym.spaces import AssistantTurn, Conversation
from textgym.tasks import Task, load_tasks
from textgym.tools import Toolset

EndReason = Literal["success", "failure", "max_turns", "length", "env_error"]
END_REASONS: tuple[str, ...] = get_args(EndReason)
"""Why an episode ended, as ``info["end_reason"]`` and the rollout record's ``end_reason`` say."""


@dataclass(slots=True)
class Outcome:
    """What an env's ``respond`` decided for one assistant turn.

    ``end_reason`` overrides the reason the base class would give if this turn ends the episode:
    ``"env_error"`` when the env's own machinery (its database, its sandbox) failed, ``"length"``
    when a budget cut the turn.
    """

    messages: list[FrozenDict] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    success: bool | None = None
    verification: Any = None
    error: str | None = None
    end_reason: EndReason | None = None


class TextEnv(gym.Env):
    """A multi-turn chat environment: observations are conversations, actions assistant turns.

    Args:
        tasks: A JSONL path or a sequence of task dicts to draw tasks from instead of the
            generator (``reset(seed=s)`` then picks one with the env's generator).
        max_turns: Assistant turns before the episode is truncated.
        max_action_chars: Longer actions are cut to this length and reported as an error; a dict
            action counts its content plus its tool calls as written in text.
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    state_version: ClassVar[int] = 1
    """The version of the env's state; bump it when what ``save_episode`` writes changes."""

    def __new__(cls, *args: Any, **kwargs: Any):
        # The constructor's arguments, kept so that a state names them and clone() repeats them.
        self = super().__new__(cls)
        self._init_kwargs = dict(kwargs)
        return self

    def __init__(
        self,
        *,
        tasks: str | os.PathLike | Sequence[Any] | None = None,
        max_turns: int = 10,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
    ):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if int(max_turns) < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.render_mode = render_mode
        self.max_turns = int(max_turns)
        self.max_action_chars = int(max_action_chars)
        self.observation_space = Conversation()
        self.action_space = AssistantTurn()
        self.dataset: list[Task] | None = None if tasks is None else load_tasks(tasks, self._to_task)
        self.task: Task | None = None
        self.conversation: tuple[FrozenDict, ...] = ()
        self.turn = 0
        self._done = True
        self.last_error: str | None = None  # the last turn's info["error"], which its reply showed

    # ----- hooks for subclasses -----

    def generate_task(self, rng: np.random.Generator) -> Task:
        raise NotImplementedError

    def task_from_dict(self, d: Mapping[str, Any]) -> Task:
        raise NotImplementedError

    def begin(self, task: Task) -> list[FrozenDict]:
        raise NotImplementedError

    def respond(self, turn: ParsedTurn) -> Outcome:
        raise NotImplementedError

    def verdict(self) -> tuple[bool, Any]:
        return False, {"reason": "episode truncated before the task was solved"}

    @property
    def tools(self) -> Toolset | None:
        return None

    def oracle_action(self) -> str | dict:
        """The next action of a policy that knows the answer (used to test the verifier)."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def decision_state(self) -> str:
        """What the next decision depends on, without the history: the text ``info["state_key"]``
        digests together with the task id.

        Default: the env's reply since the agent's last turn (the opening messages at reset), as
        roles, tool names and contents; not the tool-call ids, which count turns.
        """
        reply: list[Any] = []
        for message in reversed(self.conversation):
            if message["role"] == "assistant":
                break
            reply.append((message["role"], message.get("name"), message["content"]))
        return json.dumps(reply[::-1], ensure_ascii=False)

    def save_episode(self, blobs: list[bytes]) -> dict[str, Any]:
        """The env's own episode state as JSON values; large binary parts go into ``blobs`` (their
        indices in the returned dict). The base class has saved task, conversation and turn."""
        return {}

    def load_episode(self, parts: dict[str, Any], blobs: list[bytes]) -> None:
        """Restore what ``save_episode`` wrote; ``self.task`` and the conversation are set already.

        ``parts`` and ``blobs`` are untrusted: check every field against what the env builds and
        raise ``ValueError`` (or ``KeyError``, ``TypeError``) for one it never writes. Rebind
        attributes rather than change objects in place, or change them only once every check has
        passed: a refused state must leave the env as it was.
        """

    # ----- Gymnasium API -----

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode: a drawn task (``seed``), a pinned one (``options["task"]`` or
        ``options["task_index"]``), or the live episode of a state (``options["state"]``, bytes from
        :meth:`get_state`: every reset with it starts at the same point of the same episode)."""
        super().reset(seed=seed)
        # Until the new episode has begun nothing of the last one remains: a failed reset leaves
        # no episode to step, render or ask the oracle about.
        self._done, self.task, self.conversation, self.last_error = True, None, (), None
        if options and options.get("state") is not None:
            self.set_state(options["state"])
            if self._done:
                self.task = None
                raise InvalidState("the state is of an episode that has ended; there is nothing to continue")
        else:
            self.task = self._pick_task(options or {})
            self.turn = 0
            self.conversation = tuple(self.begin(self.task))
            self._done = False
        tools = self.tools.schemas() if self.tools else []
        info = {"task_id": self.task.id, "turn": self.turn, "error": None, "tools": tools, "state_key": self.state_key()}
        return self.conversation, info

    def step(self, action: Any):
        if self._done:  # also before the first reset
            raise ResetNeeded("call reset() before step()" if self.task is None else "the episode has ended; call reset()")
        if not isinstance(action, (str, Mapping)):
            raise InvalidAction(f"expected the assistant turn as a str or a message dict, got {type(action).__name__}")
        turn = parse_turn(action, call_id_prefix=f"call_{self.turn + 1}", max_chars=self.max_action_chars, tools=self.tools is not None)
        if turn.errors:
            cut = "length" if turn.cut else None  # text, content or tool calls past max_action_chars
            outcome = Outcome(messages=self._feedback(turn, turn.error), error=turn.error, end_reason=cut)
        else:
            outcome = self.respond(turn)
        return self._answered(turn.message, outcome)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self.render_text()
        return None

    def render_text(self) -> str:
        return render(self.conversation)

    def state_key(self) -> str:
        """``info["state_key"]``: blake2b (8 bytes, 16 hex characters) of the task id and
        :meth:`decision_state`."""
        text = f"{self.task.id}\0{self.decision_state()}"
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    # ----- state and fork -----

    def get_state(self) -> bytes:
        """The episode as bytes: task, conversation, turn, generator and the env's own parts.

        ``set_state`` on an env made with the same id and arguments continues exactly: the same
        actions give the same observations, rewards, infos and verification.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before get_state()")
        blobs: list[bytes] = []
        header = {
            "env": state_format.env_id(type(self)),
            "version": self.state_version,
            "kwargs": self._state_kwargs(),
            "episode": {
                "task": self.task.to_dict(),
                "conversation": thaw(self.conversation),
                "turn": self.turn,
                "done": self._done,
                "error": self.last_error,
                "rng": self.np_random.bit_generator.state,
                "seed": self._np_random_seed,
            },
            "parts": self.save_episode(blobs),
        }
        return state_format.pack(header, blobs)

    def set_state(self, state: bytes) -> None:
        """Continue the episode that ``state`` (from :meth:`get_state`) holds.

        Nothing of a state is trusted: every field is checked against what the env itself builds
        (the task as a pinned one is, the conversation's shape, the turn against the env's own
        ``max_turns``, the env's own parts by ``load_episode``), and a state that fails any check
        leaves the env as it was.

        Raises:
            InvalidState: the state is of another env id, other constructor arguments or another
                state version, is not a state, or holds an episode this env never writes; the env
                is left as it was.
        """
        header, blobs = state_format.unpack(state)
        state_format.check(header, state_format.env_id(type(self)), self.state_version, self._state_kwargs())
        # The restore rebinds attributes (load_episode's contract), so the old bindings are the old env.
        saved = dict(vars(self))
        try:
            self._load(header, blobs)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as exc:
            vars(self).clear()
            vars(self).update(saved)
            raise InvalidState(f"a corrupt textgym env state ({type(exc).__name__}: {exc})") from None

    def restore_task(self, d: Mapping[str, Any]) -> Task:
        """The task of a state, checked as a pinned task is (``task_from_dict``). An env whose
        check of a pinned task costs more than a restore (a solve) overrides it with the checks
        its ``begin`` makes of a Task; one whose ``max_turns`` depends on the task sets it here,
        as its ``begin`` does (by rebinding: a refused state restores it)."""
        if not Task.is_record(d):
            raise ValueError("the task is not a task record")
        return self.task_from_dict(d)

    def _load(self, header: dict[str, Any], blobs: list[bytes]) -> None:
        """Check the base fields, rebind them, then let ``load_episode`` check and restore the
        env's own parts (changing the env in place only once its checks have passed, so nothing
        may fail after it)."""
        typed = state_format.typed
        episode = typed(header, "episode", dict)
        rng = typed(episode, "rng", dict)
        kind = state_format.BIT_GENERATORS[typed(rng, "bit_generator", str)]
        _scratch_generator(kind).state = rng  # numpy's own check of the state, on a generator no env holds
        seed = typed(episode, "seed", (int, type(None)))
        turn, done = typed(episode, "turn", int), typed(episode, "done", bool)
        task = self.restore_task(typed(episode, "task", dict))  # may set the task's own max_turns (Sudoku's default)
        conversation = state_format.conversation(episode.get("conversation"))
        played = sum(m["role"] == "assistant" for m in conversation)
        if not 0 <= turn <= played or (not done and turn >= self.max_turns):
            raise ValueError(f"turn {turn} does not fit {played} assistant messages and max_turns={self.max_turns}")
        error = episode.get("error")  # absent from states saved before it was kept
        if error is not None and not isinstance(error, str):
            raise TypeError(f"the last error must be a string or null, got {type(error).__name__}")
        self.task, self.conversation, self.turn, self._done = task, conversation, turn, done
        self.last_error = error
        self.load_episode(typed(header, "parts", dict), blobs)
        if self._np_random is None or type(self._np_random.bit_generator) is not kind:
            self._np_random = np.random.Generator(kind(0))
        self._np_random.bit_generator.state = rng  # the env's own generator: no entropy drawn
        self._np_random_seed = seed

    def clone(self) -> TextEnv:
        """A new, independent env at the same point of the same episode (unwrapped)."""
        twin = type(self)(**self._init_kwargs)
        twin.spec = self.spec
        twin.set_state(self.get_state())
        return twin

    def _state_kwargs(self) -> dict[str, Any]:
        if getattr(self, "_state_kwargs_cache", None) is None:
            self._state_kwargs_cache = state_format.constructor_kwargs(type(self), self._init_kwargs)
        return self._state_kwargs_cache

    # ----- shared machinery -----

    def _to_task(self, d: Any) -> Task:
        if isinstance(d, Task):
            return d
        if not isinstance(d, Mapping):
            raise InvalidTask(f"a task must be a Task or a dict, got {type(d).__name__}")
        return self.task_from_dict(d)

    def _pick_task(self, options: Mapping[str, Any]) -> Task:
        if "task" in options:
            return self._to_task(options["task"])
        if "task_index" in options:
            if self.dataset is None:
                raise InvalidTask("options['task_index'] needs a dataset: make the env with tasks=<jsonl path or list>")
            index = int(options["task_index"])
            if not 0 <= index < len(self.dataset):
                raise InvalidTask(f"task_index must be in [0, {len(self.dataset)}), got {index}")
            return self.dataset[index]
        if self.dataset is not None:
            return self.dataset[int(self.np_random.integers(len(self.dataset)))]
        return self.generate_task(self.np_random)

    def _feedback(self, turn: ParsedTurn, error: str) -> list[FrozenDict]:
        """Explain a malformed turn: an error for each identified tool call, else a user message."""
        text = f"Error: {error}. Nothing was changed; please try again."
        if turn.tool_calls and turn.message.get("tool_calls"):
            return [tool(json.dumps({"error": text}), c.id, c.name) for c in turn.tool_calls]
        return [user(text)]

    def _answered(self, message: FrozenDict, outcome: Outcome):
        """Count the turn, append the agent's message and the env's reply, and return the step's
        five values (the step's tail, shared with an env's own fast path for its common action)."""
        # The turn counts once it has been answered: a step that raises leaves turn and conversation as they were.
        self.turn += 1
        self.conversation += (message, *outcome.messages)  # one copy of the past turns (a star-unpack makes two)
        return self._finish(outcome)

    def _finish(self, outcome: Outcome):
        terminated = bool(outcome.terminated)
        truncated = not terminated and self.turn >= self.max_turns
        self.last_error = outcome.error
        info: dict[str, Any] = {"task_id": self.task.id, "turn": self.turn, "error": outcome.error}
        if terminated or truncated:
            if terminated:
                info["success"] = bool(outcome.success)
                info["verification"] = outcome.verification
            else:
                success, verification = self.verdict()
                info["success"], info["verification"] = bool(success), verification
            info["end_reason"] = end_reason(outcome.end_reason, terminated, info["success"])
            self._done = True
        info["state_key"] = self.state_key()
        return self.conversation, float(outcome.reward), terminated, truncated, info


@functools.cache
def _scratch_generator(kind: type) -> np.random.BitGenerator:
    """A bit generator of ``kind`` that only ever checks states (a restore sets the env's own
    generator last, once nothing else can fail)."""
    return kind(0)


def end_reason(override: str | None, terminated: bool, success: bool) -> str:
    """Why an episode ended: an env failure first, then a solve, then a cut turn, then the verdict."""
    if override == "env_error":
        return "env_error"
    if success:
        return "success"
    if override is not None:
        return override
    return "failure" if terminated else "max_turns"


def tool_messages(toolset: Toolset, turn: ParsedTurn) -> tuple[list[FrozenDict], list[str]]:
    """Run every tool call of a turn in order; return the tool messages and the errors met."""
    messages, errors = [], []
    for call in turn.tool_calls:
        result = toolset.call(call.name, call.arguments)
        messages.append(tool(result.content, call.id, call.name))
        if result.error:
            errors.append(result.error)
    return messages, errors
