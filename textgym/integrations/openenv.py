"""textgym envs as OpenEnv ``Environment`` classes, for hosts that load them by dotted path.

NeMo Gym's OpenEnv resources server, OpenEnv's own ``create_app`` and anything else that runs an
``openenv.core.env_server.Environment`` in-process take these unchanged: one class per id,
constructible without arguments, with its Action and Observation models::

    env_class: textgym.integrations.openenv.SudokuEnvironment
    action_class: textgym.integrations.openenv.TextGymAction

The frames are the ones ``textgym serve`` sends (the same :class:`~textgym.serve.session.Session`
makes them), so an OpenEnv-hosted textgym env and ``textgym serve`` look alike to any client.

OpenEnv's own server checks no ``Origin`` or ``Host`` and takes no token; :func:`create_app`
builds it behind ``textgym serve``'s :class:`~textgym.serve.guard.Guard`, which refuses what a
web page could forge (see docs/serving.md, Security).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import gymnasium as gym
import orjson
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

import textgym
from textgym.registration import ENVS
from textgym.serve.session import Session


class TextGymAction(Action):
    """The assistant's turn: its text, optionally with OpenAI-shaped tool calls."""

    content: str | None = Field(default=None, description="The assistant's text (None only with tool_calls).")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="OpenAI tool calls.")


class TextGymObservation(Observation):
    """The whole conversation, the tools (on reset), how the episode stands, and the env's info."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class TextGymState(State):
    """OpenEnv's state (``episode_id``, ``step_count``) plus the env id, seed and task."""

    env_id: str = ""
    seed: int | None = None
    task_id: str | None = None
    done: bool = True


class TextGymEnvironment(Environment[TextGymAction, TextGymObservation, TextGymState]):
    """One textgym env behind OpenEnv's ``Environment`` interface.

    Args:
        env_id: A registered id; subclasses fix it (``ENV_ID``) so they need no arguments.
        **env_kwargs: Passed to ``gym.make``.
    """

    ENV_ID: ClassVar[str | None] = None
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True  # every instance owns its env

    def __init__(self, env_id: str | None = None, **env_kwargs: Any):
        super().__init__()
        env_id = env_id or self.ENV_ID
        if env_id is None:
            raise TypeError("TextGymEnvironment needs an env_id (or use a per-id subclass)")
        self.session = Session(gym.make(env_id, disable_env_checker=True, **env_kwargs), env_id)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TextGymObservation:
        data = {"seed": seed, "episode_id": episode_id, **kwargs}
        return _observation(self.session.reset({k: v for k, v in data.items() if v is not None}))

    def step(self, action: TextGymAction | dict[str, Any], timeout_s: float | None = None, **kwargs: Any) -> TextGymObservation:
        if isinstance(action, Action):
            action = action.model_dump(exclude={"metadata"}, exclude_none=True)
        return _observation(self.session.step(action))

    @property
    def state(self) -> TextGymState:
        return TextGymState(**self.session.state())

    def get_metadata(self) -> EnvironmentMetadata:
        entry = next((e for e in ENVS if e.id == self.session.env_id), None)
        return EnvironmentMetadata(
            name=self.session.env_id,
            description=entry.description if entry else self.session.env_id,
            version=textgym.__version__,
        )

    def close(self) -> None:
        self.session.close()


def _observation(payload: bytes) -> TextGymObservation:
    data = orjson.loads(payload)
    return TextGymObservation(**data["observation"], reward=data["reward"], done=data["done"])


def environment_class(env_id: str) -> type[TextGymEnvironment]:
    """A zero-argument ``Environment`` class for ``env_id`` (what OpenEnv's ``create_app`` takes)."""
    name = env_id.split("/")[-1].split("-")[0] + "Environment"
    return type(name, (TextGymEnvironment,), {"ENV_ID": env_id, "__module__": __name__, "__doc__": f"{env_id} as an OpenEnv Environment."})


def create_app(
    env_id: str,
    *,
    token: str | None = None,
    allow_origins: Iterable[str] = (),
    allow_hosts: Iterable[str] = (),
    **openenv_kwargs: Any,
) -> Any:
    """OpenEnv's ``create_app`` serving ``env_id``, behind :class:`~textgym.serve.guard.Guard`.

    Args:
        env_id: A registered textgym id.
        token: The shared token clients send as ``Authorization: Bearer <token>`` (default: the
            ``TEXTGYM_SERVE_TOKEN`` environment variable, if set); non-empty printable ASCII.
        allow_origins: Browser origins allowed to connect.
        allow_hosts: ``Host`` names allowed besides ``localhost`` and IP addresses.
        **openenv_kwargs: Passed to OpenEnv's ``create_app`` (``max_concurrent_envs``, ...).
    """
    from textgym.remote import checked_token, shared_token

    token = checked_token(shared_token(token))  # before OpenEnv's server stack loads (seconds): "" is no token to serve with
    from openenv.core.env_server.http_server import create_app as openenv_create_app

    from textgym.serve.guard import Guard

    app = openenv_create_app(environment_class(env_id), TextGymAction, TextGymObservation, **openenv_kwargs)
    app.add_middleware(Guard, token=token, allow_origins=allow_origins, allow_hosts=allow_hosts)
    return app


SudokuEnvironment = environment_class("textgym/Sudoku-v0")
WorkplaceEnvironment = environment_class("textgym/Workplace-v0")
CodeEnvironment = environment_class("textgym/Code-v0")

__all__ = [
    "CodeEnvironment",
    "SudokuEnvironment",
    "TextGymAction",
    "TextGymEnvironment",
    "TextGymObservation",
    "TextGymState",
    "WorkplaceEnvironment",
    "create_app",
    "environment_class",
]
