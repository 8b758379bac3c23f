"""Parsing a command line's values: argparse types and the env an id names, each with a one-line error.

Every command (``textgym play``, ``eval``, ``train``, ``serve``, ...) reads its arguments with
these, so a bad seed, a malformed JSON object or an unknown env id reads the same everywhere.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TypeVar

from textgym.error import TextGymError

T = TypeVar("T")


def json_object(text: str) -> dict:
    """argparse type for a JSON object argument (``--env-kwargs '{"size": 4}'``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def seed_int(text: str) -> int:
    """argparse type for a seed: numpy's generators take only integers >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed must be an integer >= 0, got {value}")
    return value


def comma_separated(kind: Callable[[str], T]) -> Callable[[str], tuple[T, ...]]:
    """argparse type for ``0.5,0.5``: a tuple of ``kind`` values.

    Example:
        >>> comma_separated(int)("1,2,3")
        (1, 2, 3)
    """

    def parse(text: str) -> tuple[T, ...]:
        try:
            return tuple(kind(x) for x in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__} values, got {text!r}") from None

    return parse


def check_env_ids(env_ids: Any) -> None:
    """A one-line error for an id that is not registered, before anything is built or imported
    (``gym.make`` would import a ``module:Env`` id's module)."""
    import gymnasium as gym  # the ids are registered: this module is part of the textgym package

    for env_id in [env_ids] if isinstance(env_ids, str) else env_ids:
        if env_id not in gym.registry:
            known = ", ".join(e for e in gym.registry if e.startswith("textgym/"))
            raise TextGymError(f"unknown environment id {env_id!r}; known ids: {known}")


def make_env(env_id: str, **kwargs: Any):
    """``gym.make`` with a one-line error for an unknown id or a bad keyword argument."""
    import gymnasium as gym

    check_env_ids(env_id)
    try:
        return gym.make(env_id, **kwargs)
    except TypeError as exc:  # an unknown or mistyped keyword argument
        raise TextGymError(f"cannot make {env_id}: {exc}") from None
