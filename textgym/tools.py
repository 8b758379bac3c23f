"""Tools from typed Python functions: OpenAI JSON schemas, validation and calls.

A tool is a plain (often bound) function with type hints and a Google-style docstring::

    def place(row: int, col: int, digit: int) -> str:
        \"\"\"Write a digit into an empty cell.

        Args:
            row: Row number, 1-indexed.
        \"\"\"

``Tool.from_function`` derives the schema (str, int, float, bool, ``Literal``, ``list[T]``,
``dict``, ``T | None`` and ``Annotated[T, Param(...)]`` for formats, patterns and bounds).
``Toolset.call`` validates and coerces the arguments by that schema, calls the function and
returns JSON text; bad arguments and :class:`~textgym.error.ToolError` come back as an error
result and change nothing.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from textgym.error import ToolError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# name@domain where the domain has a dot with text on both sides. Written so that no two parts can
# match the same characters (the domain's first dot after its first character ends its first
# part), which keeps matching linear: the obvious ``@[^@\s]+\.[^@\s]+$`` backtracks
# quadratically on "a@" + "b." * 16284 + "@" (~5 s).
EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s][^@\s.]*\.[^@\s]+$")


_PLAIN_TYPES = {"integer": int, "number": float, "boolean": bool, "string": str}
_CHECKED_KEYS = frozenset(("enum", "format", "pattern", "minimum", "maximum", "nullable", "items"))


@dataclass(frozen=True)
class Param:
    """Extra schema facts for an argument, attached with ``Annotated[T, Param(...)]``."""

    description: str | None = None
    format: str | None = None  # "email", "date", "date-time"
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None


@dataclass(slots=True)
class ToolResult:
    """What a call produced: JSON text for the ``tool`` message and the error, if any."""

    content: str
    error: str | None = None


class Encoded(dict):
    """A tool's dict result that carries its own JSON text (``json``, exactly what
    :func:`to_json` gives for the dict): :meth:`Toolset.call` sends that text instead of encoding
    the dict again. For results built from parts encoded once, such as a search page of a world's
    rows, whose encoding is otherwise the larger part of a call."""

    __slots__ = ("json",)

    def __init__(self, value: dict[str, Any], text: str):
        super().__init__(value)
        self.json = text


class Tool:
    """One callable tool with its OpenAI schema."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name must match {NAME_PATTERN.pattern}, got {self.name!r}")
        target, bound = getattr(fn, "__func__", fn), inspect.ismethod(fn)
        try:
            described = _describe(target, self.name, bound)
        except TypeError as exc:  # an unhashable callable: described without the cache
            if "unhashable" not in str(exc):
                raise
            described = _describe.__wrapped__(target, self.name, bound)
        self.description = described.description
        self.parameters: dict[str, dict[str, Any]] = copy.deepcopy(described.parameters)
        self.required: list[str] = list(described.required)
        self.defaults: dict[str, Any] = dict(described.defaults)
        # Arguments given as exactly their plain type (an int for an integer without bounds...)
        # leave validation nothing to check or convert: when all are, that is the whole check.
        self._required = frozenset(self.required)
        self._plain = {
            k: _PLAIN_TYPES[v["type"]] for k, v in self.parameters.items() if v["type"] in _PLAIN_TYPES and not (_CHECKED_KEYS & v.keys())
        }

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> Tool:
        return cls(fn, name)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this function."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": self.parameters,
                    "required": list(self.required),
                    "additionalProperties": False,
                },
            },
        }

    def _already_valid(self, arguments: Mapping[str, Any]) -> bool:
        """Whether every argument is known and has exactly its plain type, and none is missing:
        then validation has nothing to check or convert (the usual call, every step)."""
        plain = self._plain
        for key, value in arguments.items():
            if type(value) is not plain.get(key):
                return False
        return arguments.keys() >= self._required

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check and coerce arguments by the schema; raises ToolError with every problem."""
        if self._already_valid(arguments):
            return dict(arguments)
        problems = [f"unknown argument {k!r}" for k in arguments if k not in self.parameters]
        problems += [f"missing required argument {k!r}" for k in self.required if k not in arguments]
        clean: dict[str, Any] = {}
        for key, value in arguments.items():
            if key not in self.parameters:
                continue
            try:
                clean[key] = coerce(value, self.parameters[key], key)
            except ToolError as exc:
                problems.append(str(exc))
        if problems:
            expected = ", ".join(f"{k}: {_type_name(s)}" for k, s in self.parameters.items())
            raise ToolError(f"{self.name}: " + "; ".join(problems) + f" (expected {expected or 'no arguments'})")
        return clean

    def __call__(self, arguments: Mapping[str, Any]) -> Any:
        return self.fn(**self.validate(arguments))


@dataclass(frozen=True)
class _Description:
    description: str
    parameters: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    defaults: dict[str, Any]


@functools.lru_cache(maxsize=1024)
def _describe(fn: Callable[..., Any], name: str, bound: bool) -> _Description:
    """A function's schema from its hints and docstring, worked out once per function: every env
    binds its tools to itself, and reading type hints is most of making an env (or a clone)."""
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    hints = typing.get_type_hints(fn, include_extras=True)
    parameters, required, defaults = {}, [], {}
    params = list(inspect.signature(fn).parameters.items())
    for pname, p in params[1:] if bound else params:  # a bound method's self is given
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args/**kwargs are not supported")
        if pname not in hints:
            raise TypeError(f"tool {name}: parameter {pname!r} needs a type hint")
        schema = _hint_schema(hints[pname])
        if arg_docs.get(pname) and "description" not in schema:
            schema["description"] = arg_docs[pname]
        parameters[pname] = schema
        if p.default is p.empty:
            required.append(pname)
        else:
            defaults[pname] = p.default
    return _Description(summary, parameters, tuple(required), defaults)


class Toolset(Mapping):
    """An ordered, name-indexed collection of tools."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]]):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else Tool(t)
            if t.name in self._tools:
                raise ValueError(f"duplicate tool name {t.name!r}")
            self._tools[t.name] = t

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self):
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema for t in self._tools.values()]

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one tool; unknown names, bad arguments and ToolErrors become error results."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return _error(f"unknown tool {name!r}; available tools: {known}")
        try:
            result = tool.fn(**(arguments if tool._already_valid(arguments) else tool.validate(arguments)))
        except ToolError as exc:
            return _error(str(exc))
        if type(result) is Encoded:
            return ToolResult(result.json)
        return ToolResult(_encode_str(result) if type(result) is str else _ENCODER.encode(result))


def _json_default(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False)  # built once: json.dumps with options builds one per call
_encode_str = json.encoder.encode_basestring  # what _ENCODER.encode does with a str, without its Python frame


def to_json(value: Any) -> str:
    """Serialise a tool result; dates become ISO strings (a str without the encoder's frame)."""
    return _encode_str(value) if type(value) is str else _ENCODER.encode(value)


def _error(message: str) -> ToolResult:
    return ToolResult(json.dumps({"error": message}, ensure_ascii=False), message)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary paragraph and ``Args:`` descriptions."""
    summary_lines, args, current = [], {}, None
    section = "summary"
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            section = "args"
            continue
        if stripped.endswith(":") and stripped[:-1] in ("Returns", "Raises", "Examples", "Yields"):
            section = "other"
            continue
        if section == "summary":
            if not stripped and summary_lines:
                section = "body"
            elif stripped:
                summary_lines.append(stripped)
        elif section == "args" and stripped:
            m = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
            if m and line.startswith(" " * 4) and not line.startswith(" " * 8):
                current = m.group(1)
                args[current] = m.group(2)
            elif current:
                args[current] += " " + stripped
    return " ".join(summary_lines), args


def _hint_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(hint)
        schema = _hint_schema(base)
        for m in meta:
            if isinstance(m, Param):
                for key in ("description", "format", "pattern", "minimum", "maximum"):
                    if getattr(m, key) is not None:
                        schema[key] = getattr(m, key)
        return schema
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unions other than Optional are not supported: {hint}")
        schema = _hint_schema(args[0])
        schema["nullable"] = True
        return schema
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        return {"type": _json_type(type(values[0])), "enum": values}
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        args = typing.get_args(hint)
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _hint_schema(args[0])
        return schema
    if origin in (dict, typing.Mapping) or hint is dict:
        return {"type": "object"}
    return {"type": _json_type(hint)}


def _json_type(py: Any) -> str:
    for t, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if py is t:
            return name
    raise TypeError(f"unsupported tool argument type {py!r}")


def _type_name(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + "/".join(map(str, schema["enum"]))
    name = schema.get("format") or schema["type"]
    return name + (" or null" if schema.get("nullable") else "")


def coerce(value: Any, schema: Mapping[str, Any], key: str) -> Any:
    """Validate ``value`` against a schema fragment, converting numeric/boolean strings."""
    if value is None:
        if schema.get("nullable"):
            return None
        raise ToolError(f"{key!r} must not be null")
    kind = schema["type"]
    if kind == "integer":
        value = _to_int(value, key)
    elif kind == "number":
        value = _to_float(value, key)
    elif kind == "boolean":
        value = _to_bool(value, key)
    elif kind == "string":
        if not isinstance(value, str):
            raise ToolError(f"{key!r} must be a string, got {_json_name(value)}")
        value = _check_format(value, schema, key)
    elif kind == "array":
        if not isinstance(value, (list, tuple)):
            raise ToolError(f"{key!r} must be an array, got {_json_name(value)}")
        item = schema.get("items")
        value = [coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)] if item else list(value)
    elif kind == "object":
        if not isinstance(value, Mapping):
            raise ToolError(f"{key!r} must be an object, got {_json_name(value)}")
        value = dict(value)
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"{key!r} must be one of {schema['enum']}, got {value!r}")
    if "minimum" in schema and value < schema["minimum"]:
        raise ToolError(f"{key!r} must be >= {schema['minimum']}, got {value!r}")
    if "maximum" in schema and value > schema["maximum"]:
        raise ToolError(f"{key!r} must be <= {schema['maximum']}, got {value!r}")
    return value


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, bool):
        raise ToolError(f"{key!r} must be an integer, got boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,18}\s*", value):
        return int(value)
    raise ToolError(f"{key!r} must be an integer, got {_json_name(value)} {_short(value)}")


def _to_float(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ToolError(f"{key!r} must be a number, got boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ToolError(f"{key!r} must be a number, got {_json_name(value)} {_short(value)}")


def _to_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ToolError(f"{key!r} must be true or false, got {_json_name(value)} {_short(value)}")


def _check_format(value: str, schema: Mapping[str, Any], key: str) -> str:
    fmt = schema.get("format")
    if fmt == "email" and not EMAIL_PATTERN.match(value.strip()):
        raise ToolError(f"{key!r} must be an email address, got {_short(value)}")
    if fmt == "date":
        try:
            date.fromisoformat(value.strip())
        except ValueError:
            raise ToolError(f"{key!r} must be a date as YYYY-MM-DD, got {_short(value)}") from None
    if fmt == "date-time":
        try:
            datetime.fromisoformat(value.strip())
        except ValueError:
            raise ToolError(f"{key!r} must be a date-time as YYYY-MM-DD HH:MM:SS, got {_short(value)}") from None
    if "pattern" in schema and not re.fullmatch(schema["pattern"], value):
        raise ToolError(f"{key!r} must match {schema['pattern']}, got {_short(value)}")
    return value


def _json_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
