"""Workplace tasks: the seeded generator and the loaders for our JSONL and NeMo Gym's format.

A task is a :class:`~textgym.tasks.Task` with ``data = {"query": ...}``, ``answer`` = the ground
truth as a list of ``{"name", "arguments"}`` state-changing calls, and ``metadata`` with
``category`` (email, calendar, analytics, project_management, crm, multi_domain), ``difficulty``
(easy, medium, hard), ``template``, ``noop`` and ``num_calls``.

Accepted input dicts (``reset(options={"task": ...})``, ``tasks=`` JSONL rows):

* our pinned format: ``{"query": str, "ground_truth": [{"name": ..., "arguments": {...}}],
  "category"?: str, "difficulty"?: str, "id"?: str}`` (arguments may also be a JSON string);
* NeMo Gym's workplace_assistant rows: ``{"responses_create_params": {"input": [messages]},
  "ground_truth": [{"name": ..., "arguments": "<JSON string>"}], "category"?: ...}``; the query
  is the text of the user messages (the env writes its own system prompt);
* a Task record (``{"id", "data", "answer", "metadata"}``), e.g. a line written by
  :func:`textgym.tasks.write_jsonl`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from textgym.envs.workplace import templates, templates_records
from textgym.envs.workplace.facts import facts
from textgym.envs.workplace.templates import MAX_CALLS, Template
from textgym.envs.workplace.tools import TOOL_NAMES
from textgym.envs.workplace.world import World
from textgym.error import InvalidTask
from textgym.parsing import arguments_dict, decode_json
from textgym.tasks import Task, task_id

TEMPLATES: tuple[Template, ...] = (*templates.TEMPLATES, *templates_records.TEMPLATES)
CATEGORIES: tuple[str, ...] = ("email", "calendar", "analytics", "project_management", "crm", "multi_domain")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
NEMO_CATEGORY_PREFIX = "workplace_assistant_"
NEMO_CATEGORIES = {"customer_relationship_manager": "crm"}
MAX_DRAWS = 200


def select_templates(
    categories: Sequence[str] | None = None, difficulty: str | None = None, templates: Sequence[str] | None = None
) -> tuple[Template, ...]:
    """The templates the generator draws from, filtered by category, difficulty and name."""
    if categories is not None:
        unknown = sorted(set(categories) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"categories must be among {list(CATEGORIES)}, got {unknown}")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {list(DIFFICULTIES)}, got {difficulty!r}")
    if templates is not None:
        unknown = sorted(set(templates) - {t.name for t in TEMPLATES})
        if unknown:
            raise ValueError(f"templates must be among {sorted(t.name for t in TEMPLATES)}, got {unknown}")
    pool = tuple(
        t
        for t in TEMPLATES
        if (categories is None or t.category in categories)
        and (difficulty is None or t.difficulty == difficulty)
        and (templates is None or t.name in templates)
    )
    if not pool:
        raise ValueError(f"no template has category in {categories}, difficulty {difficulty!r} and name in {templates}")
    return pool


def generate(world: World, rng: np.random.Generator, pool: Sequence[Template] = TEMPLATES) -> Task:
    """Draw a template, then its parameters and ground truth from the world."""
    f = facts(world)
    for _ in range(MAX_DRAWS):
        tpl = pool[int(rng.integers(len(pool)))]
        task = instantiate(tpl, f, rng, world)
        if task is not None:
            return task
    raise InvalidTask(f"no template could be instantiated in world {world.name!r} after {MAX_DRAWS} draws")


def instantiate(tpl: Template, f, rng: np.random.Generator, world: World) -> Task | None:
    """One task from one template, or None when this draw does not fit the world."""
    drawn = tpl.draw(f, rng)
    if drawn is None:
        return None
    params, calls = drawn
    if tpl.noop != (not calls) or len(calls) > MAX_CALLS:
        return None
    phrasing = int(rng.integers(len(tpl.phrasings)))
    query = tpl.phrasings[phrasing].format(**params)
    metadata = {
        "category": tpl.category,
        "difficulty": tpl.difficulty,
        "template": tpl.name,
        "phrasing": phrasing,
        "noop": tpl.noop,
        "num_calls": len(calls),
        "world": world.name,
        "source": "generated",
    }
    return Task(task_id("workplace", tpl.name, query, calls), {"query": query}, calls, metadata)


def task_from_dict(d: Mapping[str, Any]) -> Task:
    """A task from any accepted input dict (see the module docstring)."""
    if Task.is_record(d):
        task = Task.from_dict(d)
        calls = ground_truth_calls(task.answer or [])
        if not isinstance(task.data.get("query"), str):
            raise InvalidTask("a workplace task record needs data['query'] as a string")
        meta = {"category": "pinned", "difficulty": "unknown", "noop": not calls, "num_calls": len(calls)} | dict(task.metadata)
        return Task(task.id, dict(task.data), calls, meta)
    if "responses_create_params" in d:
        return _from_nemo(d)
    if "query" in d:
        return _pinned(str(d["query"]), d.get("ground_truth", []), d, source="pinned")
    raise InvalidTask("a workplace task needs 'query' and 'ground_truth' (or NeMo Gym's 'responses_create_params')")


def _from_nemo(d: Mapping[str, Any]) -> Task:
    params = d["responses_create_params"]
    messages = params.get("input") if isinstance(params, Mapping) else None
    if isinstance(messages, str):
        query = messages
    elif isinstance(messages, Sequence):
        query = "\n".join(_text(m.get("content")) for m in messages if isinstance(m, Mapping) and m.get("role") == "user")
    else:
        raise InvalidTask("responses_create_params.input must be a string or a list of messages")
    if not query.strip():
        raise InvalidTask("responses_create_params.input holds no user message")
    category = str(d.get("category") or "pinned")
    category = category.removeprefix(NEMO_CATEGORY_PREFIX)
    meta = {"category": NEMO_CATEGORIES.get(category, category)}
    return _pinned(query, d.get("ground_truth", []), {**d, **meta}, source="nemo_gym")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # Responses-API content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _pinned(query: str, ground_truth: Any, d: Mapping[str, Any], source: str) -> Task:
    calls = ground_truth_calls(ground_truth)
    meta = {
        "category": str(d.get("category") or "pinned"),
        "difficulty": str(d.get("difficulty") or "unknown"),
        "noop": not calls,
        "num_calls": len(calls),
        "source": source,
    }
    ident = str(d["id"]) if d.get("id") is not None else task_id("workplace", query, calls)
    return Task(ident, {"query": query}, calls, meta)


def ground_truth_calls(ground_truth: Any) -> list[dict[str, Any]]:
    """Ground-truth calls as ``[{"name", "arguments": dict}]``; arguments may be JSON strings.

    Raises:
        InvalidTask: not a list of calls to known tools with object (or JSON-object) arguments.
    """
    if isinstance(ground_truth, str):
        try:
            ground_truth = decode_json(ground_truth)
        except ValueError as exc:
            raise InvalidTask(f"ground_truth is a string but not JSON ({exc})") from None
    if isinstance(ground_truth, (str, bytes)) or not isinstance(ground_truth, Sequence):
        raise InvalidTask(f"ground_truth must be a list of calls, got {type(ground_truth).__name__}")
    calls = []
    for i, c in enumerate(ground_truth):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise InvalidTask(f"ground_truth[{i}] must be an object with a tool 'name'")
        if c["name"] not in TOOL_NAMES:
            raise InvalidTask(f"ground_truth[{i}] names unknown tool {c['name']!r}")
        try:
            args = arguments_dict(c.get("arguments", {}), c["name"])
        except ValueError as exc:
            raise InvalidTask(f"ground_truth[{i}]: {exc}") from None
        calls.append({"name": c["name"], "arguments": args})
    return calls
