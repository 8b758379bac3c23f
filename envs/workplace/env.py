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
from textgym.envs.workplace.schema import system_prompt
from textgym.envs.workplace.tasks import generate, ground_truth_calls, select_templates, task_from_dict
from textgym.envs.workplace.tools import WorkplaceTools
from textgym.envs.workplace.verify import compare
from textgym.envs.workplace.world import World, get_world
from textgym.error import InvalidTask, ResetNeeded
from textgym.messages import FrozenDict, system, user
from textgym.parsing import ParsedTurn
from textgym.tasks import Task
from textgym.tools import Toolset


@functools.lru_cache(maxsize=8)
def _reference(world: World) -> tuple[WorkplaceTools, Toolset, threading.Lock]:
    """The scratch database that ground truth is replayed on: one per world and process, not per
    session, which spares every live session a second copy of the world; the lock keeps threaded
    callers apart."""
    tools = WorkplaceTools(world.connect(), world)
    return tools, tools.toolset(), threading.Lock()


class WorkplaceEnv(TextEnv):
    r"""Carry out business requests with 27 tools over a simulated company's SQLite databases.

    `textgym/Workplace-v0` (entry point `textgym.envs.workplace:WorkplaceEnv`): requests such as
    "reply to Raj's last email", "move Lena's reviewed tasks to Completed" or "clear my Friday and
    tell everyone", carried out over several turns on email, calendar, analytics, project and CRM
    tables. The final database state decides the score.

    ```python
    import gymnasium as gym
    import textgym

    env = gym.make("textgym/Workplace-v0")            # world_seed=0, max_turns=20
    obs, info = env.reset(seed=0)
    print(obs[-1]["content"], info["category"])       # the request and its category
    obs, reward, terminated, truncated, info = env.step(
        '<tool_call>{"name": "company_directory_find_email_address", "arguments": {"name": "Raj"}}</tool_call>'
    )
    venv = gym.make_vec("textgym/Workplace-v0", num_envs=64, vectorization_mode="async")
    ```

    ```
    textgym eval textgym/Workplace-v0 --policy oracle --policy random --episodes 200   # success by category
    ```

    ## Observation

    The whole conversation as a tuple of read-only chat messages. It opens with a system message
    (who the user is, *today is Thursday 2023-11-30, 09:00*, working hours 09:00 to 18:00) and the
    user's request. `info` on reset: `task_id`, `turn`, `error`, `tools` (the 27 OpenAI schemas),
    `category`, `difficulty`. At the end it also holds `success` and `verification`.

    ## Actions

    Text with one or more `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, or an
    OpenAI assistant message dict with `tool_calls`. The calls of a turn run in order, and each one
    returns a `tool` message with JSON text. **A turn without tool calls is the final answer and ends
    the episode.** A malformed turn (bad JSON, unknown tool, wrong argument types) is answered with
    an error message, counts as a turn and changes nothing.

    ## Tools

    Names and arguments are those of NeMo Gym's workplace_assistant (and WorkBench's), so its data
    replays as it is. Every argument is validated against its schema: types, enums, ISO dates
    (`YYYY-MM-DD`), date-times (`YYYY-MM-DD HH:MM:SS`; any ISO spelling is accepted and stored in
    that form) and email syntax. The `update` tools also validate each field's value. An invalid
    call returns `{"error": ...}` and changes nothing. Any syntactically valid address may receive
    mail. IDs are 8-digit strings, and `"42"` means `"00000042"`.

    | domain | tools |
    |---|---|
    | directory | `company_directory_find_email_address(name)` |
    | email | `email_get_email_information_by_id(email_id, field?)`, `email_search_emails(query, date_min, date_max, page, page_size)`, `email_send_email(recipient, subject, body)`, `email_delete_email(email_id)`, `email_forward_email(email_id, recipient)` (subject `FW: ...`), `email_reply_email(email_id, body)` (subject `RE: ...`) |
    | calendar | `calendar_get_event_information_by_id(event_id, field?)`, `calendar_search_events(query, time_min, time_max, page, page_size)`, `calendar_create_event(event_name, participant_email, event_start, duration)`, `calendar_delete_event(event_id)`, `calendar_update_event(event_id, field, new_value)` |
    | analytics | `analytics_get_visitor_information_by_id(visitor_id)`, `analytics_create_plot(time_min, time_max, value_to_plot, plot_type)`, `analytics_total_visits_count`, `analytics_engaged_users_count`, `analytics_traffic_source_count(..., traffic_source?)`, `analytics_get_average_session_duration` (all with `time_min`, `time_max`) |
    | project management | `project_management_get_task_information_by_id(task_id, field?)`, `project_management_search_tasks(task_name, assigned_to_email, list_name, due_date, board, page, page_size)`, `project_management_create_task(task_name, assigned_to_email, list_name, due_date, board)`, `project_management_delete_task(task_id)`, `project_management_update_task(task_id, field, new_value)` |
    | CRM | `customer_relationship_manager_search_customers(customer_name, customer_email, product_interest, status, assigned_to_email, last_contact_date_min/max, follow_up_by_min/max, page, page_size)`, `customer_relationship_manager_update_customer(customer_id, field, new_value)`, `customer_relationship_manager_add_customer(customer_name, assigned_to_email, status, ...)`, `customer_relationship_manager_delete_customer(customer_id)` |

    Each domain's tools are one module of `textgym.envs.workplace.tools` (`inbox`,
    `calendar_events`, `analytics`, `project_tasks`, `customers`), assembled into `WorkplaceTools`.

    Every search is **paginated**: `page` (from 1) and `page_size` (default 10, at most 100). The
    result reports `total` and `total_pages`, so the agent can always see everything that matches.
    A word matches when it appears, ignoring ASCII case, anywhere in one of the searched columns
    (exactly SQL's `LIKE '%word%'`, with `LIKE`'s quirks: only ASCII letters fold, a value is read
    up to its first NUL).

    How a search runs (faster than the `LIKE` statements, with their results exactly, tested in
    `tests/envs/test_workplace_search.py`): each world keeps, once per process, its searchable rows
    in each search's order and which rows hold each 3-byte sequence of their folded text
    (`envs/workplace/search.py`). A word's candidates are the rows holding all its 3-byte
    sequences; a substring test decides. A page of rows the session has not written comes from
    there; SQL only filters by the other arguments (dates, enums, addresses) and returns the
    passing rowids as one string. Rows the session wrote are read back once per write and put in
    order among the others. Each of the world's rows is also kept as its JSON text, so a page is
    sent as those texts joined (`textgym.tools.Encoded`, a dict that carries its own JSON) instead of
    being encoded again on every call; a row the session wrote is encoded when it is read. Nothing is
    built per reset; the first email search of an episode still costs about 2.3x a warm one here
    (62.7 against 27.6 us of CPU, measured 2026-12-01, [benchmarks](docs/benchmarks.md#workplace)).
    (An FTS5 trigram index was tried and dropped: its first use after each reset cost ~0.3 ms.) Words `LIKE` might treat otherwise (with a NUL, a lone surrogate, over 1,000
    characters) and sessions whose database was changed by SQL on `env.db` rather than by the
    tools fall back to the `LIKE` statements. The analytics counts come from per-day, per-source
    visit counts made with the world (`envs/workplace/visits.py`; no tool writes analytics), with
    the same fallback. Cost: ~20 ms and ~1 MiB more to build the default world, once per process.

    ## World

    There is one in-memory SQLite database per session, with the tables `emails` (email_id,
    inbox/outbox, sender, recipient, subject, sent_datetime, body), `calendar`, `analytics`,
    `plots`, `project_tasks`, `customers` and `company_directory`. Each session is cloned from a
    template image with `sqlite3`'s `deserialize`, which costs about 25 us. Sessions share nothing.

    - The default world is the synthetic company made with `world_seed=0`: 24 employees at
      `atlas.com`, 320 emails, 240 events from October to December 2023, 442 site visits,
      150 project tasks and 120 customers. It is fixed, so tasks and results can be compared.
    - `world_seed=s` makes a different synthetic company with the same generator.
    - `data_dir="path/"` loads CSV tables in WorkBench's layout instead: `emails.csv` (with
      WorkBench's merged `sender/recipient` column, or separate `sender` and `recipient` columns),
      `calendar_events.csv`, `analytics_data.csv`, `project_tasks.csv`,
      `customer_relationship_manager_data.csv` and `email_addresses.csv`. A missing table is
      empty. Numeric ids are padded to 8 digits.

    ## Reward

    The reward is binary and comes at the end of the episode. It is 1.0 when the final state of the
    session equals the state that the ground-truth calls produce on a fresh copy of the world. The
    comparison is the same when the episode is truncated, because the state is what counts.

    - Rows are compared **as multisets, without the system-assigned id column**. Neither call order
      nor the ids that creation assigned matter.
    - Values are **normalised** before the comparison: free text ignores case and runs of
      whitespace, addresses ignore case, date-times accept any ISO spelling
      (`2023-12-05T14:30` = `2023-12-05 14:30:00`) and numbers are compared as numbers.
    - **Any unintended change fails the task**: a duplicate send, an extra delete, a wrong field,
      or a plot nobody asked for. Read-only calls are harmless.
    - Only the rows that the agent or the ground truth touched are read; the tools record them.
      This makes verification cost proportional to the number of changes.

    `info["verification"]`:

    ```python
    {"success": False,
     "reason": "the final state differs from the expected state in emails (unintended changes)",
     "side_effect": True,   # the agent touched a row the ground truth leaves alone, or created more rows
     "noop": False,         # the task needs no change at all
     "diff": {"emails": {"missing": [...rows expected but absent...],
                         "unexpected": [{"inbox/outbox": "outbox", "recipient": "raj.schmidt@atlas.com", ...}]}},
     # what each side did, per table it touched (at most 20 rows of each kind), for textgym view:
     "changes": {"emails": {"agent":    {"added": [{"id": ..., ...}], "changed": [{"id", "before", "after"}], "deleted": [...]},
                            "expected": {"added": [...], "changed": [...], "deleted": [...]},
                            "side_effects": ["00000001"]}}}   # ids the agent wrote that the ground truth leaves alone
    ```

    ## Episode end

    `terminated` on a turn without tool calls (the final answer); `truncated` after `max_turns`
    turns (default 20). `info["end_reason"]` is `success`, `failure` (a final answer on a wrong
    state), `max_turns`, `length` (the last action was cut at `max_action_chars`) or `env_error`:
    the database failed during verification (a `sqlite3.Error`); the verification then holds
    `env_error` with the message, and trainers leave the episode out.

    ## Tasks

    The generator has **55 templates** in six categories, with 2-3 phrasings each. The category is
    in `task.metadata["category"]` and `info["category"]`:

    | category | templates | examples |
    |---|---:|---|
    | `email` | 9 | send, send to several, reply to the latest, forward, delete by sender and subject, reply to everything since a date |
    | `calendar` | 10 | create, cancel the next meeting with someone, clear a day, reschedule, resize, rename, swap the participant, book the first free slot |
    | `analytics` | 7 | plots; one per traffic source; plot the top source; conditional plots on averages and week-over-week growth |
    | `project_management` | 10 | create, move, reassign, re-date, delete; complete someone's reviews; hand over a person's open tasks; overdue backlog |
    | `crm` | 11 | add, status, owner, follow-up date, interest, phone, delete; qualify leads; delete lost customers; reassign a whole book |
    | `multi_domain` | 8 | email a customer's account owner; meet a task's assignee; cancel a day and notify the participants; complete reviews and notify; traffic report email |

    - Parameters come from the world's rows. The ground truth is the list of state-changing calls
      (1 to 12 of them), and it names **every** row that a request covers, because it is read from
      the tables and never through a capped search.
    - `metadata`: `category`, `difficulty` (`easy`: one direct change; `medium`: a lookup or a few
      changes; `hard`: conditions, free-slot search or many rows), `template`, `phrasing`, `noop`,
      `num_calls`, `world`, `source`.
    - **No-op tasks** are conditional requests whose condition is false ("if I have a meeting
      with Nia on 2023-12-06, cancel it" when there is none). 6 of the 55 templates are no-ops. They
      make up about 7% of the draws (at most 15%, which is tested) and are flagged as `noop`.
    - Filters: `gym.make(..., categories=["crm", "email"], difficulty="hard")`, and by template name:
      `gym.make(..., templates=["delete_task", "move_task"])`.

    ### Pinned tasks and JSONL

    `reset(options={"task": ...})` and `gym.make(..., tasks="file.jsonl")` (then
    `options={"task_index": i}`, or a seeded draw) accept three formats:

    ```json
    {"query": "Email raj.schmidt@atlas.com that the report is ready.",
     "ground_truth": [{"name": "email_send_email",
                       "arguments": {"recipient": "raj.schmidt@atlas.com", "subject": "Report", "body": "The report is ready."}}],
     "category": "email"}
    ```

    ```json
    {"responses_create_params": {"input": [{"role": "system", "content": "..."}, {"role": "user", "content": "Reassign customer Quinn Garcia to raj.patel@atlas.com"}]},
     "ground_truth": [{"name": "customer_relationship_manager_update_customer",
                       "arguments": "{\"customer_id\": \"00000005\", \"field\": \"assigned_to_email\", \"new_value\": \"raj.patel@atlas.com\"}"}],
     "category": "workplace_assistant_customer_relationship_manager", "id": 297}
    ```

    The second is NeMo Gym's workplace_assistant row. The query is the text of its user messages
    (the env writes its own system prompt), `arguments` is a JSON string, and the category loses its
    `workplace_assistant_` prefix (`customer_relationship_manager` becomes `crm`). The third format
    is a Task record (`{"id", "data": {"query"}, "answer": [...], "metadata"}`), which is what
    `textgym.tasks.write_jsonl` writes for generated tasks. NeMo Gym's ids refer to WorkBench's
    tables, so play its rows with `data_dir=` pointing at WorkBench's CSVs. A ground-truth call
    that fails on the world is listed in `verification["ground_truth_errors"]`; it is not an
    exception.

    ## Oracle

    `env.unwrapped.oracle_action()` sends all ground-truth calls in one turn, then a
    final message. It scores 1.0 on every template (tested on many seeds and on other worlds).
    `oracle_action(lookup=True)` plays as an agent without the answer must: its first turn looks up
    every id and colleague address the ground truth uses (a task or customer search by the name the
    request quotes, `company_directory_find_email_address` by the part of the name the request
    writes), its second sends the ground-truth calls, so each demonstration has two tool-calling
    turns in which the second copies what the first returned (for multi-turn warm starts).
    `oracle_action(noise=p)` is a noisy demonstrator: each ground-truth argument that takes one of a
    closed set of values (a task's list or board, a customer's status or product interest) is a
    uniform guess from its set with probability `p`, the same guess for the same task; a warm start on
    it learns the calls but not which choice the request names, for GRPO to learn from the verifier
    (what the tiny model made of it is in [benchmarks](docs/benchmarks.md#workplace-v0-in-two-turns-workplace-tiny)). A
    policy that does nothing scores 0.0, except on no-op tasks. The `random` policy of
    `textgym eval` scores about the no-op rate.

    ## Compared with WorkBench and NeMo Gym's workplace_assistant

    | known flaw | here |
    |---|---|
    | searches silently return the first 5 matches, so ground truth can hide rows | paginated searches with `total`; ground truth read from the tables |
    | outcome comparison depends on the ids that creation assigned and on exact strings | multisets without ids; normalised case, whitespace and datetimes |
    | NeMo Gym compares function calls, not outcomes | state comparison; any correct sequence of calls passes |
    | side effects are only visible as a mismatch | `side_effect` flag and a row-level diff per table |
    | mail only to addresses in the directory; loosely validated arguments | any valid address; schema, enum, date and per-field validation; errors change nothing |
    | state reloaded from CSV with pandas for every task (ms) | SQLite image cloned per reset (tens of us) |

    ## Arguments

    | argument | default | meaning |
    |---|---|---|
    | `world_seed` | 0 | the synthetic company |
    | `data_dir` | None | a directory of WorkBench CSVs to use as the world |
    | `categories` | all | restrict generated tasks |
    | `difficulty` | any | `easy`, `medium` or `hard` |
    | `templates` | all | restrict generated tasks to these template names |
    | `tasks` | None | a JSONL path or a list of task dicts |
    | `max_turns` | 20 | turns before truncation |
    | `max_action_chars` | 32768 | longer actions are cut and reported |
    | `render_mode` | None | `"ansi"` returns the transcript |

    Costs are in [benchmarks.md](docs/benchmarks.md#workplace).

    ## Version history

    - v0: initial release.
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
        db = parts["db"]
        self._session.db.deserialize(self.world.patch(db["chunks"], blobs[db["blob"]], db["length"]))
        self._session.rows.restore({name: set(ids) for name, ids in parts["touched"].items()}, parts["indexed"])
        self._answer = ground_truth_calls(self.task.answer or [])
        self._oracle_done = bool(parts["oracle_done"])

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
