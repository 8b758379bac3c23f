"""The one table of textgym env ids, registered with Gymnasium by string entry point.

The core never imports an env to register it; ``gym.make`` imports the entry point on demand.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        "textgym/Sudoku-v0",
        "textgym.envs.sudoku:SudokuEnv",
        "Sudoku 4x4/6x6/9x9: place digits with a tool over several turns or answer the whole grid.",
    ),
    EnvEntry(
        "textgym/Workplace-v0",
        "textgym.envs.workplace:WorkplaceEnv",
        "Workplace assistant: 27 tools over SQLite email, calendar, analytics, tasks and CRM; state-verified.",
    ),
    EnvEntry(
        "textgym/Code-v0",
        "textgym.envs.code:CodeEnv",
        "Python programming: solutions run against tests in an isolated sandbox, with feedback on failures.",
    ),
)


# The client of a served env (``textgym serve`` or any OpenEnv server); not in ENVS, which lists
# the envs themselves (it needs a ``url`` to be made).
REMOTE_ID = "textgym/Remote-v0"


def register_envs() -> None:
    """Register every id; safe to call more than once.

    ``gym.make`` leaves out Gymnasium's passive env checker for these ids (``disable_env_checker=
    False`` asks for it): the checker marks its one-time reset check done before the reset runs,
    so after a first reset that raises (a pinned task that is an ``InvalidTask``) the instance's
    first step fails inside it (Gymnasium 1.4). Every env here passes the full ``check_env`` in
    the tests instead.
    """
    for entry in ENVS:
        if entry.id not in gym.registry:
            gym.register(id=entry.id, entry_point=entry.entry_point, disable_env_checker=True)
    if REMOTE_ID not in gym.registry:
        gym.register(id=REMOTE_ID, entry_point="textgym.remote:RemoteEnv", disable_env_checker=True)
