"""One session: an env instance, its episode, and the frames that report it.

A session serialises each message of the conversation once: messages never change after they
are made (``textgym.messages``), so a step encodes only its new messages and joins the cached
bytes, instead of re-encoding the whole conversation on every step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import orjson

from textgym.error import ResetNeeded
from textgym.serve.protocol import ErrorCode, ProtocolError, encode, env_action, reset_arguments


class Session:
    """An env played over one connection (or one stateless request)."""

    def __init__(self, env: gym.Env, env_id: str):
        self.env = env
        self.env_id = env_id
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.task_id: str | None = None
        self.step_count = 0
        self.done = True
        self.started = False
        self.last_active = time.monotonic()
        self._sent: list[bytes] = []  # the JSON of each message of the conversation, in order
        self._last: Any = None  # the last message encoded, to check the conversation only grew

    def reset(self, data: Any) -> bytes:
        """Reset from a reset frame's ``data``; returns the observation payload as JSON."""
        kwargs, episode_id = reset_arguments(data)
        try:
            conversation, info = self.env.reset(**kwargs)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:  # a bad pinned task or option
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"reset failed: {exc}") from None
        self.episode_id, self.seed, self.step_count = episode_id, kwargs["seed"], 0
        self.task_id = info.get("task_id")
        self.started, self.done = True, False
        self._sent, self._last = [], None
        info = dict(info)
        tools = info.pop("tools", None) or []
        return self._frame(conversation, 0.0, False, False, info, tools)

    def step(self, data: Any) -> bytes:
        """Step with a step frame's ``data``; returns the observation payload as JSON."""
        action = env_action(data)
        if not self.started:
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, "step before reset: send a reset frame first")
        if self.done:
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, "the episode has ended: send a reset frame to start a new one")
        try:
            conversation, reward, terminated, truncated, info = self.env.step(action)
        except ResetNeeded as exc:
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, str(exc)) from None
        self.step_count += 1
        self.done = bool(terminated or truncated)
        return self._frame(conversation, float(reward), bool(terminated), bool(truncated), info, [])

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "env_id": self.env_id,
            "seed": self.seed,
            "task_id": self.task_id,
            "done": self.done,
        }

    def close(self) -> None:
        self.env.close()

    def _frame(self, conversation, reward: float, terminated: bool, truncated: bool, info: Mapping, tools) -> bytes:
        messages = self._messages(conversation)
        rest = encode({"tools": tools, "terminated": terminated, "truncated": truncated, "info": info})
        tail = orjson.dumps({"reward": reward, "done": terminated or truncated})
        # {"observation":{"messages":[...],<rest>},<tail>}: OpenEnv's StepResponse shape
        return b"".join((b'{"observation":{"messages":[', messages, b"],", rest[1:], b",", tail[1:]))

    def _messages(self, conversation) -> bytes:
        n = len(self._sent)
        if n > len(conversation) or (n and conversation[n - 1] is not self._last):
            self._sent, n = [], 0  # not a continuation of what was sent: encode it all
        self._sent.extend(encode(m) for m in conversation[n:])
        self._last = conversation[-1] if conversation else None
        return b",".join(self._sent)
