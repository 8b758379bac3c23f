"""What the demonstrators add to a task's ground-truth calls: the lookups before them, and guesses.

The ground truth names rows by id and colleagues by address, which a request never gives: an
agent finds a task or a customer by the name the request quotes and a colleague's address in the
directory. Demonstrations that make those calls first teach a model episodes of two tool-calling
turns in which the second copies what the first returned. Demonstrations whose choices (a list,
a board, a status, a product) are sometimes guessed teach the calls but not which choice a
request asks for, and leave that for reinforcement learning to learn from the verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.world import World

CHOICES: tuple[tuple[str, ...], ...] = (S.LIST_NAMES, S.BOARDS, S.STATUSES, S.PRODUCTS)
"""The closed sets a ground-truth argument can take its value from (what :func:`guessed` guesses)."""

# id argument -> (table, its name column, the search tool, the search's name argument)
_SEARCHES = {
    "task_id": ("project_tasks", "task_name", "project_management_search_tasks", "task_name"),
    "customer_id": ("customers", "customer_name", "customer_relationship_manager_search_customers", "customer_name"),
}


def lookup_calls(world: World, answer: Sequence[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """The searches that reveal every id and colleague address of ``answer`` (ground-truth calls),
    each once, in the order the calls use them; addresses by the part of the name ``query`` uses.

    Example:
        >>> from textgym.envs.workplace.world import get_world
        >>> w = get_world(0, None)
        >>> lookup_calls(w, [{"name": "email_send_email", "arguments": {"recipient": "raj.schmidt@atlas.com"}}], "Mail Raj")
        [{'name': 'company_directory_find_email_address', 'arguments': {'name': 'Raj'}}]
    """
    names = {email: name for name, email in world.people}
    calls: list[dict[str, Any]] = []
    for call in answer:
        for key, value in call["arguments"].items():
            if key in _SEARCHES:
                table, column, tool, argument = _SEARCHES[key]
                row = next((r for r in world.rows[table] if r[key] == value), None)
                found = {"name": tool, "arguments": {argument: row[column]}} if row else None
            elif isinstance(value, str) and value in names and value != S.USER_EMAIL:
                found = {"name": "company_directory_find_email_address", "arguments": {"name": _said(names[value], query)}}
            else:
                found = None
            if found is not None and found not in calls:
                calls.append(found)
    return calls


def _said(name: str, query: str) -> str:
    """The full name if ``query`` writes it, else the first of its words that ``query`` writes, else the full name."""
    if name in query:
        return name
    return next((word for word in name.split() if word in query), name)


def guessed(answer: Sequence[dict[str, Any]], noise: float, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``answer`` with each argument whose value belongs to one of :data:`CHOICES` replaced, with
    probability ``noise``, by a member of that set drawn uniformly (the right one included).

    Example:
        >>> call = {"name": "project_management_update_task", "arguments": {"task_id": "00000007", "field": "list_name", "new_value": "Backlog"}}
        >>> guessed([call], 1.0, np.random.default_rng(0))[0]["arguments"]["new_value"] in S.LIST_NAMES
        True
    """

    def guess(value: Any) -> Any:
        choices = next((c for c in CHOICES if value in c), None) if isinstance(value, str) else None
        if choices is None or rng.random() >= noise:
            return value
        return choices[int(rng.integers(len(choices)))]

    return [{**call, "arguments": {key: guess(value) for key, value in call["arguments"].items()}} for call in answer]
