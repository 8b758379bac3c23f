"""Env states as bytes: the format that ``TextEnv.get_state`` writes and ``set_state`` reads.

A state is ``MAGIC``, a 4-byte big-endian header length, a UTF-8 JSON header, then raw blobs
(a SQLite image) whose lengths the header lists. JSON and raw bytes, never pickle: a state is
data, like a record, and restoring one runs no code whoever wrote it.

The header names the env id, the state version and the env's constructor arguments, so that a
state restored into an env it does not fit is refused with :class:`~textgym.error.InvalidState`
instead of giving a silently different episode.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
from typing import Any

import numpy as np

from textgym.error import InvalidState
from textgym.messages import FrozenDict, freeze

MAGIC = b"textgym-state\n"
FORMAT = 1
"""The layout version of the bytes themselves (an env's own parts carry ``state_version``)."""
BIT_GENERATORS = {
    kind.__name__: kind for kind in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64)
}
"""The generators a state may name (a name from the state is looked up here, never in a module)."""
_LONG = 200  # JSON characters past which a constructor argument is compared by digest


def pack(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    """The state's bytes: ``header`` (JSON values) plus ``blobs`` appended raw."""
    head = json.dumps({**header, "format": FORMAT, "blobs": [len(b) for b in blobs]}, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(head).to_bytes(4, "big"), head, *blobs])


def unpack(state: Any) -> tuple[dict[str, Any], list[bytes]]:
    """The header and blobs of a state; :class:`InvalidState` for anything that is not one.

    Every size the header gives is checked against the bytes present before anything is sliced.
    """
    if not isinstance(state, (bytes, bytearray, memoryview)):
        raise InvalidState(f"expected a state as bytes (from get_state()), got {type(state).__name__}")
    data = bytes(state)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise InvalidState("not a textgym env state (it does not start with the state format's marker)")
    start = len(MAGIC) + 4
    end = start + int.from_bytes(data[len(MAGIC) : start], "big")
    if end > len(data):
        raise InvalidState(f"a truncated or corrupt textgym env state (its header runs past its {len(data)} bytes)")
    try:
        header = json.loads(data[start:end])
    except (ValueError, RecursionError) as exc:
        raise InvalidState(f"a corrupt textgym env state (its header does not parse: {type(exc).__name__})") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(type(n) is int and n >= 0 for n in sizes):
        raise InvalidState("a corrupt textgym env state (its header lists no blob sizes of whole bytes)")
    if header.get("format") != FORMAT:
        raise InvalidState(f"a state in format {header.get('format')!r}; this textgym reads format {FORMAT}")
    if end + sum(sizes) != len(data):
        said = end + sum(sizes)
        raise InvalidState(f"a truncated or corrupt textgym env state ({len(data)} bytes, the header says {said})")
    blobs = []
    for size in sizes:
        blobs.append(data[end : end + size])
        end += size
    return header, blobs


def check(header: dict[str, Any], env_id: str, version: int, kwargs: dict[str, Any]) -> None:
    """Refuse a state of another env id, state version or constructor arguments, saying which."""
    if header.get("env") != env_id:
        raise InvalidState(f"the state is of {header.get('env')!r}, this env is {env_id!r}")
    if header.get("version") != version:
        theirs = header.get("version")
        raise InvalidState(f"the state is {env_id} state version {theirs!r}; this env reads version {version}")
    theirs = header.get("kwargs")
    if not isinstance(theirs, dict):
        raise InvalidState(f"a corrupt textgym env state (its constructor arguments are a {type(theirs).__name__}, not an object)")
    differ = sorted(k for k in set(theirs) | set(kwargs) if theirs.get(k) != kwargs.get(k))
    if differ:
        said = ", ".join(f"{k}={theirs.get(k)!r} (this env: {kwargs.get(k)!r})" for k in differ)
        raise InvalidState(f"the state is of a {env_id} made with other arguments: {said}")


def typed(parts: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    """``parts[key]`` when ``parts`` is an object and the value exactly a ``kind`` (a bool is no
    int here), else ``ValueError``: a restore reads every field through this or a stricter check."""
    if not isinstance(parts, dict) or key not in parts:
        raise ValueError(f"{key!r} is missing")
    value = parts[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if type(value) not in kinds:
        raise ValueError(f"{key!r} is a {type(value).__name__}")
    return value


def conversation(value: Any) -> tuple[FrozenDict, ...]:
    """A state's conversation as immutable messages, each in the shape the env writes: a role,
    str content, and a role's own fields (an assistant's normalised ``tool_calls``, a tool
    result's ``tool_call_id`` and ``name``), ending with the env's message."""
    if not isinstance(value, list) or not value:
        raise ValueError("the conversation is not a list of messages")
    for m in value:
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _MESSAGE_KEYS or not isinstance(m.get("content"), str) or not set(m) <= _MESSAGE_KEYS[role]:
            raise ValueError("a message is not one the env writes (role, str content and that role's fields)")
        if role == "tool" and not (isinstance(m.get("tool_call_id"), str) and isinstance(m.get("name"), str)):
            raise ValueError("a tool message lacks its str tool_call_id and name")
        if "tool_calls" in m and not (isinstance(m["tool_calls"], list) and all(map(_is_call, m["tool_calls"]))):
            raise ValueError("an assistant message's tool_calls are not the env's normalised calls")
    if value[-1]["role"] == "assistant":
        raise ValueError("the conversation ends with the agent's message; the env's comes last")
    return tuple(freeze(m) for m in value)


_MESSAGE_KEYS = {
    "system": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls"},
    "tool": {"role", "content", "tool_call_id", "name"},
}


def _is_call(call: Any) -> bool:
    if not isinstance(call, dict):
        return False
    fn = call.get("function")
    return (
        set(call) == {"id", "type", "function"}
        and isinstance(call["id"], str)
        and call["type"] == "function"
        and isinstance(fn, dict)
        and set(fn) == {"name", "arguments"}
        and isinstance(fn["name"], str)
        and isinstance(fn["arguments"], str)
    )


def env_id(cls: type) -> str:
    """The registered id of an env class (a state from ``gym.make`` fits a directly made env)."""
    from textgym.registration import ENVS

    for entry in ENVS:
        module, name = entry.entry_point.split(":")
        if getattr(sys.modules.get(module), name, None) is cls:
            return entry.id
    return f"{cls.__module__}:{cls.__qualname__}"


def constructor_kwargs(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the constructor's defaults filled in, as comparable JSON values: the same
    configuration compares equal however it was spelled (``gym.make(id)`` or ``size=9``)."""
    bound = inspect.signature(cls.__init__).bind_partial(None, **kwargs)
    bound.apply_defaults()
    params = {k: v for k, v in bound.arguments.items() if k != "self"}
    params.update(params.pop("kwargs", None) or {})
    return {k: _comparable(v) for k, v in sorted(params.items())}


def _comparable(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return f"<{type(value).__name__}>"  # a sandbox object: its kind is what can be compared
    if len(text) > _LONG:  # a list of tasks: a digest keeps every state small
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return json.loads(text)
