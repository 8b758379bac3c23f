"""Workplace-v0: business requests fulfilled with 27 tools over a company's databases."""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from textgym.env import Outcome, TextEnv, tool_messages
from textgym.envs.workplace.lookups import guessed, lookup_calls
from textgym.envs.workplace.schema import TABLES, system_prompt
from textgym.envs.workplace.tasks import generate, ground_truth_calls, select_templates, task_from_dict
from textgym.envs.workplace.tools import WorkplaceTools
from textgym.envs.workplace.verify import compare
from textgym.envs.workplace.world import World, get_world
from textgym.error import InvalidTask, ResetNeeded
from textgym.messages import FrozenDict, system, user
from textgym.parsing import ParsedTurn
from textgym.state import typed
from textgym.tasks import Task
from textgym.tools import Toolset

TABLE_NAMES = frozenset(t.name for t in TABLES)


@functools.lru_cache(maxsize=8)
def _reference(world: World) -> tuple[WorkplaceTools, Toolset, threading.Lock]:
    """The scratch database that ground truth is replayed on: one per world and process, not per
    session, which spares every live session a second copy of the world; the lock keeps threaded
    callers apart."""
    tools = WorkplaceTools(world.connect(), world)
    return tools, tools.toolset(), threading.Lock()


class WorkplaceEnv(TextEnv):
    """A workplace assistant over SQLite email, calendar, analytics, project and CRM databases.

    ## Description
    The user asks for something a colleague would ("reply to Raj's last email", "move all of
    Lena's reviewed tasks to Completed", "clear my Friday and tell everyone"). The agent fulfils
    it over several turns by calling tools on its own copy of a synthetic company's databases;
    the episode is scored by comparing the final database with the state that the ground-truth
    calls produce (WorkBench's outcome-centric evaluation, without its known flaws: paginated
    instead of capped searches, order- and id-independent multiset matching, normalised case and
    datetime formats, and explicit side-effect detection).

    ## Prompt
    A system message (who the user is, today's date 2023-11-30, the current time and the
    working hours 09:00-18:00) and a user message with the request. ``info["tools"]`` holds the
    27 OpenAI tool schemas; ``info["category"]`` the task's category.

    ## Action format
    An assistant turn as text with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
    blocks, or an OpenAI assistant message dict with ``tool_calls``; several calls per turn run
    in order. A turn without tool calls is the final answer and ends the episode.

    ## Tools
    company_directory, email (search, read, send, reply, forward, delete), calendar (search,
    read, create, update, delete), analytics (counts, averages, plots), project management and
    CRM (search, read, create/add, update, delete); names and arguments as NeMo Gym's
    workplace_assistant. Results are JSON text; bad arguments return an error and change nothing.

    ## Reward
    1.0 when the final state matches the expected state, else 0.0, given at the end of the
    episode (also on truncation: the state is what counts). ``info["verification"]`` holds the
    row-level diff per table and the ``side_effect`` and ``noop`` flags.

    ## Episode end
    ``terminated`` on a turn without tool calls; ``truncated`` after ``max_turns`` turns. When
    the database fails during verification, the verification holds ``env_error`` and
    ``info["end_reason"]`` is ``"env_error"``.

    ## Arguments
    world_seed: Seed of the synthetic company (0, the default, is the reference world).
    data_dir: A directory of CSV tables in WorkBench's column layout to use as the world instead.
    categories: Restrict generated tasks to these categories.
    difficulty: Restrict generated tasks to "easy", "medium" or "hard" templates.
    templates: Restrict generated tasks to these templates, by name (``delete_task``, ...).
    tasks, max_turns, max_action_chars, render_mode: as :class:`~textgym.env.TextEnv`.

    ## Options
    ``reset(options={"task": {"query": ..., "ground_truth": [...]}})`` pins a task (our JSONL
    format, NeMo Gym's workplace_assistant rows or a Task record); ``{"task_index": i}`` picks
    one from ``tasks=``.

    ## Version history
    v0: initial release.
    """

    def __init__(
        self,
        *,
        world_seed: int = 0,
        data_dir: str | None = None,
        categories: Sequence[str] | None = None,
        difficulty: str | None = None,
        templates: Sequence[str] | None = None,
        tasks: Any = None,
        max_turns: int = 20,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
    ):
        self.world = get_world(world_seed, data_dir)
        self._pool = select_templates(categories, difficulty, templates)
        super().__init__(tasks=tasks, max_turns=max_turns, max_action_chars=max_action_chars, render_mode=render_mode)
        self._session = WorkplaceTools(self.world.connect(), self.world)
        self._toolset = self._session.toolset()
        self._oracle_done = False
        self._answer: list[dict[str, Any]] = []

    @property
    def tools(self) -> Toolset:
        return self._toolset

    @property
    def db(self):
        """The live session database (a ``sqlite3.Connection``)."""
        return self._session.db

    # ----- TextEnv hooks -----

    def generate_task(self, rng) -> Task:
        return generate(self.world, rng, self._pool)

    def task_from_dict(self, d) -> Task:
        return task_from_dict(d)

    def begin(self, task: Task) -> list[FrozenDict]:
        # Task objects given directly (not as dicts) skip task_from_dict: check them here.
        if not isinstance(task.data.get("query"), str):
            raise InvalidTask("a workplace task needs data['query'] as a string")
        self._answer = ground_truth_calls(task.answer or [])
        self.world.restore(self._session.db)
        self._session.clear()
        self._oracle_done = False
        return [system(system_prompt()), user(task.data["query"])]

    def save_episode(self, blobs: list[bytes]) -> dict[str, Any]:
        """The session database (what changed from the world's image) and the rows writes touched."""
        db = self._session.db
        db.commit()  # a deserialized database's image holds committed pages only
        changed, chunks, length = self.world.delta(db.serialize())
        blobs.append(chunks)
        rows = self._session.rows
        return {
            "db": {"chunks": changed, "blob": len(blobs) - 1, "length": length},
            "touched": {name: sorted(ids) for name, ids in rows.touched.items()},
            "indexed": rows.indexed(),
            "oracle_done": self._oracle_done,
        }

    def load_episode(self, parts: dict[str, Any], blobs: list[bytes]) -> None:
        """The session database and rows, checked in full before the session is touched: the
        image's sizes against the bytes given, and (unless it is the world's own) its schema and pages."""
        db = typed(parts, "db", dict)
        blob = typed(db, "blob", int)
        if not 0 <= blob < len(blobs):
            raise ValueError(f"the database names blob {blob} of {len(blobs)}")
        image = self.world.rebuild(typed(db, "chunks", list), blobs[blob], typed(db, "length", int))
        touched = typed(parts, "touched", dict)
        if not set(touched) <= TABLE_NAMES or not all(
            isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in touched.values()
        ):
            raise ValueError("the touched rows are not lists of row ids per table")
        indexed, oracle_done = typed(parts, "indexed", bool), typed(parts, "oracle_done", bool)
        answer = ground_truth_calls(self.task.answer or [])
        if not isinstance(self.task.data.get("query"), str):
            raise ValueError("the task has no str query")
        # Every check passed: the session changes in place from here on.
        self._session.db.deserialize(image)
        self._session.rows.restore({name: set(ids) for name, ids in touched.items()}, indexed)
        self._answer, self._oracle_done = answer, oracle_done

    def respond(self, turn: ParsedTurn) -> Outcome:
        if not turn.tool_calls:
            success, verification = self.verify()
            verdict = "The request was fulfilled." if success else f"The request was not fulfilled: {verification['reason']}."
            return Outcome(
                messages=[user(verdict + " The episode is over.")],
                reward=float(success),
                terminated=True,
                success=success,
                verification=verification,
            )
        if [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls] == self._answer:
            self._oracle_done = True
        messages, errors = tool_messages(self._toolset, turn)
        return Outcome(messages=messages, error="; ".join(errors) or None)

    def verdict(self) -> tuple[bool, Any]:
        return self.verify()

    # ----- Gymnasium API additions -----

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        info["category"] = self.task.metadata.get("category")
        info["difficulty"] = self.task.metadata.get("difficulty")
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        info["category"] = self.task.metadata.get("category")
        if truncated:  # the state decides, whether or not the agent said it was done
            reward = float(info["success"])
        if (terminated or truncated) and info["verification"].get("env_error"):
            info["end_reason"] = "env_error"
        return obs, reward, terminated, truncated, info

    # ----- verification and oracle -----

    def verify(self) -> tuple[bool, dict[str, Any]]:
        """Compare the live state with the ground truth replayed on a fresh copy of the world."""
        if self.task is None:
            raise ResetNeeded("call reset() before verify()")
        ref, toolset, lock = _reference(self.world)
        try:
            with lock:
                self.world.restore(ref.db)
                ref.clear()
                errors = []
                for c in self._answer:
                    result = toolset.call(c["name"], c["arguments"])
                    if result.error:
                        errors.append(f"{c['name']}: {result.error}")
                return compare(self.world, self._session.db, ref.db, self._session.touched, ref.touched, errors)
        except sqlite3.Error as exc:  # the database failed, not the agent: no verdict (end_reason env_error)
            reason = f"the database failed during verification ({type(exc).__name__}: {exc})"
            return False, {"success": False, "reason": reason, "side_effect": False, "noop": False, "diff": {}, "env_error": reason}

    def oracle_action(self, *, lookup: bool = False, noise: float = 0.0) -> str | dict:
        """All ground-truth calls in one turn, then a final message that ends the episode.

        ``lookup=True`` first looks up what the calls need, as an agent without the answer must:
        on the first turn a task or customer search by the name the request gives for each id,
        and a directory search for each colleague's address (by the part of their name the
        request uses); then the ground-truth calls, then the final message. Ids and addresses
        this cannot look up are left to the ground-truth turn.

        ``noise=p`` makes a noisy demonstrator: each argument that takes one of a closed set of
        values (a task list or board, a customer status or product) is a uniform guess from its
        set with probability ``p``, drawn from the task, so a task always gets the same calls.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before oracle_action()")
        if self._answer and not self._oracle_done and not self._done:
            lookups = lookup_calls(self.world, self._answer, self.task.data["query"]) if lookup and self.turn == 0 else []
            calls = [
                {"type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in lookups or (guessed(self._answer, noise, self._task_rng()) if noise > 0 else self._answer)
            ]
            return {"role": "assistant", "content": "", "tool_calls": calls}
        return "Done: the request has been handled."

    def _task_rng(self) -> np.random.Generator:
        """A generator seeded by the task alone (its id), so a noisy demonstrator's guesses are a function of the task."""
        return np.random.default_rng(zlib.crc32(self.task.id.encode()))
