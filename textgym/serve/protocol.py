"""The OpenEnv wire protocol as textgym speaks it: frames in, frames out, and their schemas.

Pure functions over JSON values, no sockets, so the server, the stateless HTTP routes and the
tests share one definition. The frame shapes are OpenEnv's (``openenv.core.env_server.types``):
client frames ``{"type": "reset" | "step" | "state" | "close", "data": ...}``; server frames
``{"type": "observation", "data": {"observation": OBS, "reward": float, "done": bool}}``,
``{"type": "state", "data": {...}}`` and ``{"type": "error", "data": {"message", "code"}}``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson


class ErrorCode(str, enum.Enum):
    """OpenEnv's WebSocket error codes (``WSErrorCode``)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    SESSION_ERROR = "SESSION_ERROR"


class ProtocolError(Exception):
    """A frame the server answers with an ``error`` frame; the session goes on."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


MESSAGE_TYPES = ("reset", "step", "state", "close")
RESET_KEYS = ("seed", "episode_id", "options")
# "metadata" is the field every OpenEnv Action model carries; typed clients always send it.
ACTION_KEYS = ("content", "tool_calls", "role", "metadata")


def parse_frame(raw: str | bytes, max_bytes: int) -> tuple[str, Any]:
    """A client frame's ``(type, data)``; raises :class:`ProtocolError` for anything else."""
    if len(raw) > max_bytes:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"frame of {len(raw)} bytes exceeds the limit of {max_bytes}")
    try:
        frame = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise ProtocolError(ErrorCode.INVALID_JSON, f"expected a JSON object, got {_json_name(frame)}")
    kind = frame.get("type")
    if kind not in MESSAGE_TYPES:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind!r}; expected one of {', '.join(MESSAGE_TYPES)}")
    return kind, frame.get("data")


def reset_arguments(data: Any) -> tuple[dict[str, Any], str | None]:
    """``env.reset`` keyword arguments and the episode id from a reset frame's ``data``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"reset data must be an object, got {_json_name(data)}")
    unknown = sorted(set(data) - set(RESET_KEYS))
    if unknown:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"unknown reset field(s) {unknown}; expected {list(RESET_KEYS)}")
    seed, episode_id, options = data.get("seed"), data.get("episode_id"), data.get("options")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"seed must be a non-negative integer or null, got {seed!r}")
    if episode_id is not None and not isinstance(episode_id, str):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"episode_id must be a string or null, got {_json_name(episode_id)}")
    if options is not None and not isinstance(options, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"options must be an object or null, got {_json_name(options)}")
    return {"seed": seed, "options": options}, episode_id


def env_action(data: Any) -> str | dict[str, Any]:
    """The in-process action for a step frame's ``data`` (``{"content", "tool_calls"?}``).

    Plain content becomes the str action, so text tool calls and answers parse exactly as they
    do in-process; with ``tool_calls`` it becomes the assistant message dict. What the env can
    judge itself (a malformed tool call, an unknown tool) is left to it, as feedback.
    """
    if not isinstance(data, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f'the action must be an object {{"content": str}}, got {_json_name(data)}')
    unknown = sorted(set(data) - set(ACTION_KEYS))
    if unknown:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"unknown action field(s) {unknown}; expected content and tool_calls")
    content, tool_calls = data.get("content"), data.get("tool_calls")
    if data.get("role", "assistant") != "assistant":
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"the action's role must be 'assistant', got {data['role']!r}")
    if tool_calls is not None and not (isinstance(tool_calls, list) and all(isinstance(c, dict) for c in tool_calls)):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, "tool_calls must be a list of objects in the OpenAI shape")
    if not isinstance(content, str) and not (content is None and tool_calls):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"the action needs a string 'content', got {_json_name(content)}")
    if not tool_calls:
        assert content is not None  # without tool calls it is a string (checked above)
        return content
    return {"role": "assistant", "content": content or "", "tool_calls": tool_calls}


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: mappings to objects, sequences to lists, numpy to numbers.

    Non-finite floats become null (JSON has no NaN) and anything else unknown its ``str``, so
    an env's ``info`` always travels, whatever it holds.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    return str(value)


def encode(value: Any) -> bytes:
    """``json_safe(value)`` as JSON bytes, without building the copy when orjson can say it directly.

    orjson writes dicts, lists, tuples, numbers and numpy arrays natively (and NaN as null), and
    asks :func:`_default` about the rest (immutable messages, sets, numpy scalars); a structure
    it refuses (a non-str dict key) takes the :func:`json_safe` path. Both give the same JSON.
    """
    try:
        return orjson.dumps(value, default=_default, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        return orjson.dumps(json_safe(value))


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def error_frame(code: ErrorCode, message: str, **extra: Any) -> str:
    return orjson.dumps({"type": "error", "data": {"message": message, "code": code.value, **extra}}).decode()


def state_frame(state: Mapping[str, Any]) -> str:
    return orjson.dumps({"type": "state", "data": json_safe(state)}).decode()


def _json_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


# ----- JSON Schemas served at GET /schema -----

_MESSAGE = {
    "type": "object",
    "properties": {
        "role": {"enum": ["system", "user", "assistant", "tool"]},
        "content": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
    "required": ["role", "content"],
}

ACTION_SCHEMA = {
    "title": "TextGymAction",
    "description": "The assistant's turn: its text, optionally with OpenAI-shaped tool calls.",
    "type": "object",
    "properties": {
        "content": {"type": ["string", "null"], "description": "The assistant's text (null only with tool_calls)."},
        "tool_calls": {
            "type": "array",
            "description": 'OpenAI tool calls: {"id", "type": "function", "function": {"name", "arguments"}}.',
            "items": {"type": "object"},
        },
        "metadata": {"type": "object", "description": "Ignored; OpenEnv's Action base field."},
    },
    "required": ["content"],
    "additionalProperties": False,
}

OBSERVATION_SCHEMA = {
    "title": "TextGymObservation",
    "description": "The whole conversation so far, the tools (on reset), and how the episode stands.",
    "type": "object",
    "properties": {
        "messages": {"type": "array", "items": _MESSAGE},
        "tools": {"type": "array", "items": {"type": "object"}, "description": "OpenAI tool schemas; sent on reset."},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "info": {
            "type": "object",
            "description": "The env's info, JSON-safe: task_id, turn, error; at the end success and verification.",
        },
    },
    "required": ["messages", "tools", "terminated", "truncated", "info"],
}

STATE_SCHEMA = {
    "title": "TextGymState",
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer", "minimum": 0},
        "env_id": {"type": "string"},
        "seed": {"type": ["integer", "null"]},
        "task_id": {"type": ["string", "null"]},
        "done": {"type": "boolean"},
    },
    "required": ["episode_id", "step_count"],
}
