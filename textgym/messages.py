"""Chat messages in the OpenAI shape, held as immutable mappings.

An observation is the whole conversation as a tuple of messages. Because messages never change
once made, every later observation shares them: a step appends one message instead of copying
the conversation (Gymnasium's ``check_env`` lets observations share immutable objects).
``thaw`` turns them back into plain dicts for JSON, chat templates and HTTP clients.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

ROLES = ("system", "user", "assistant", "tool")


class FrozenDict(Mapping):
    """A hashable, picklable, read-only dict (``MappingProxyType`` cannot be pickled)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, *args: Any, **kwargs: Any):
        _set_data(self, dict(*args, **kwargs))

    @classmethod
    def _of(cls, data: dict) -> FrozenDict:
        """Wrap ``data`` itself, not a copy (for dicts made here and never shared): a step makes
        three messages, and the copying ``__init__`` costs several times the wrapping."""
        self = _new(cls)
        _set_data(self, data)
        return self

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenDict is read-only")

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:  # first use: computed once, as messages never change
            _set_hash(self, hash(tuple(sorted(self._data.items(), key=lambda kv: kv[0]))))
            return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self):
        return (type(self), (self._data,))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenDict:
        # Immutable all the way down (``freeze``), so vector envs' deep copies can share it.
        return self


_new = object.__new__
_set_data = FrozenDict._data.__set__  # the slots' own setters: FrozenDict.__setattr__ refuses writes
_set_hash = FrozenDict._hash.__set__
_STR = frozenset({str})


def all_str(values: Iterable[Any]) -> bool:
    """Whether every value is exactly a ``str``: one C loop (``issuperset`` over ``map(type, ...)``),
    cheaper than a generator's frames on the hot paths that ask it of each message."""
    return _STR.issuperset(map(type, values))


def freeze(value: Any) -> Any:
    """Recursively turn dicts into FrozenDicts and lists into tuples."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict._of({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Recursively turn FrozenDicts into dicts and tuples into lists (JSON-ready)."""
    kind = type(value)
    if kind is str:  # most values: answered before the abstract-class checks below
        return value
    if kind is FrozenDict:
        data = value._data
        if all_str(data.values()):  # a message of strs (most): one copy
            return dict(data)
        return {k: v if type(v) is str else thaw(v) for k, v in data.items()}
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def message(role: str, content: str, **extra: Any) -> FrozenDict:
    """Make one chat message; ``extra`` holds ``tool_calls``, ``tool_call_id`` or ``name``."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if not isinstance(content, str):
        raise TypeError(f"content must be a str, got {type(content).__name__}")
    data = {"role": role, "content": content, **extra}
    if all(type(v) is str for v in extra.values()):
        return FrozenDict._of(data)  # nothing nested to freeze
    return freeze(data)


# The helpers below are message() for one role each, written out down to the slot write: every
# step makes two or three messages, and they are a good part of a Sudoku step (the
# cheapest possible step appends one message). Anything but plain str arguments goes through message().


def system(content: str) -> FrozenDict:
    return message("system", content)


def user(content: str) -> FrozenDict:
    if type(content) is not str:
        return message("user", content)  # raises the TypeError (or accepts a str subclass)
    msg = _new(FrozenDict)
    _set_data(msg, {"role": "user", "content": content})
    return msg


def assistant(content: str, tool_calls: Sequence[Mapping] | None = None) -> FrozenDict:
    if tool_calls or type(content) is not str:
        return message("assistant", content, **({"tool_calls": tool_calls} if tool_calls else {}))
    msg = _new(FrozenDict)
    _set_data(msg, {"role": "assistant", "content": content})
    return msg


def tool(content: str, tool_call_id: str, name: str) -> FrozenDict:
    if type(content) is not str or type(tool_call_id) is not str or type(name) is not str:
        return message("tool", content, tool_call_id=tool_call_id, name=name)
    msg = _new(FrozenDict)
    _set_data(msg, {"role": "tool", "content": content, "tool_call_id": tool_call_id, "name": name})
    return msg


def render(conversation: Sequence[Mapping]) -> str:
    """Plain-text transcript of a conversation, for ``render_mode="ansi"`` and the CLI."""
    lines = []
    for msg in conversation:
        header = msg["role"]
        if msg["role"] == "tool":
            header = f"tool {msg.get('name', '')}".rstrip()
        lines.append(f"[{header}]")
        if msg["content"]:
            lines.append(msg["content"])
        for call in msg.get("tool_calls") or ():
            fn = call["function"]
            lines.append(f"-> {fn['name']}({fn['arguments']})")
    return "\n".join(lines) + "\n"
