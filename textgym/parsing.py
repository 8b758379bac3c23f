"""The one parser for assistant turns, shared by every env.

An action is either raw text or an OpenAI-style assistant message dict. From either we read:

* tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks in text, or the
  dict's ``tool_calls`` (arguments as a JSON string or a dict);
* a final answer: the text after the last ``<answer>`` (up to ``</answer>`` when present);
* code: the last fenced block (```python preferred).

Each ``<tool_call>`` body is read with a real JSON decoder, so a literal ``</tool_call>`` inside a
JSON string is part of the argument, not the end of the block. Problems are collected as
human-readable ``errors`` for the agent; the parser itself never raises on agent text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from textgym.error import InvalidAction
from textgym.messages import FrozenDict, assistant

TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL)
_FENCE = "```"
_LANG = re.compile(r"[A-Za-z0-9_+-]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ToolCall:
    """One requested tool call: ``arguments`` is always a dict once parsed."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class ParsedTurn:
    """What the agent said in one turn, and what was wrong with it."""

    message: FrozenDict
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    code: str | None = None
    errors: tuple[str, ...] = field(default=())

    @property
    def error(self) -> str | None:
        return "; ".join(self.errors) if self.errors else None


def parse_turn(action: Any, *, call_id_prefix: str = "call") -> ParsedTurn:
    """Parse one assistant action (raw text or an OpenAI assistant dict).

    Raises:
        InvalidAction: the action is neither a str nor a mapping (a caller bug).
    """
    if isinstance(action, str):
        return _parse_text(action, call_id_prefix)
    if isinstance(action, Mapping):
        return _parse_dict(action, call_id_prefix)
    raise InvalidAction(f"expected the assistant turn as a str or a message dict, got {type(action).__name__}")


def _parse_text(text: str, prefix: str) -> ParsedTurn:
    calls, errors = _tool_calls_from_text(text, prefix)
    return ParsedTurn(
        message=assistant(text),
        text=text,
        tool_calls=tuple(calls),
        answer=_last_answer(text),
        code=extract_code(text),
        errors=tuple(errors),
    )


def _parse_dict(action: Mapping, prefix: str) -> ParsedTurn:
    role = action.get("role", "assistant")
    content = action.get("content")
    if content is None:
        content = ""
    if role != "assistant" or not isinstance(content, str):
        text = content if isinstance(content, str) else ""
        return ParsedTurn(
            message=assistant(text),
            text=text,
            errors=(f"an assistant message needs role 'assistant' and str content, got role={role!r}",),
        )
    raw_calls = action.get("tool_calls")
    if not raw_calls:
        return _parse_text(content, prefix)
    calls, errors, openai_calls = [], [], []
    if not isinstance(raw_calls, (list, tuple)):
        raw_calls, errors = [], ["tool_calls must be a list"]
    for i, raw in enumerate(raw_calls):
        call_id = f"{prefix}_{i}"
        try:
            call = _call_from_openai(raw, call_id)
        except ValueError as exc:
            errors.append(f"tool call {i + 1}: {exc}")
            continue
        calls.append(call)
        openai_calls.append(call.to_openai())
    return ParsedTurn(
        message=assistant(content, tool_calls=openai_calls),
        text=content,
        tool_calls=tuple(calls),
        answer=_last_answer(content),
        code=extract_code(content),
        errors=tuple(errors),
    )


def _call_from_openai(raw: Any, default_id: str) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise ValueError("expected an object with 'function'")
    fn = raw.get("function", raw)
    if not isinstance(fn, Mapping):
        raise ValueError("'function' must be an object with 'name' and 'arguments'")
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else default_id
    return ToolCall(call_id, *_name_and_arguments(fn))


def _name_and_arguments(obj: Mapping) -> tuple[str, dict[str, Any]]:
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("missing tool 'name'")
    return name, arguments_dict(obj.get("arguments", obj.get("parameters", {})), name)


def arguments_dict(args: Any, name: str) -> dict[str, Any]:
    """Tool-call arguments as a dict: from a mapping, a JSON-object string, or None/"" (no arguments).

    Raises:
        ValueError: not JSON, or not an object; the message names the tool.
    """
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments of {name!r} are not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(args, Mapping):
        raise ValueError(f"arguments of {name!r} must be a JSON object, got {type(args).__name__}")
    return dict(args)


def _tool_calls_from_text(text: str, prefix: str) -> tuple[list[ToolCall], list[str]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    pos = 0
    index = 0
    while True:
        start = text.find(TOOL_OPEN, pos)
        if start < 0:
            break
        index += 1
        body = start + len(TOOL_OPEN)
        while body < len(text) and text[body].isspace():
            body += 1
        try:
            obj, end = _DECODER.raw_decode(text, body)
        except json.JSONDecodeError as exc:
            errors.append(f"tool call {index}: invalid JSON ({exc.msg} at char {exc.pos - body})")
            close = text.find(TOOL_CLOSE, body)
            pos = len(text) if close < 0 else close + len(TOOL_CLOSE)
            continue
        rest = end
        while rest < len(text) and text[rest].isspace():
            rest += 1
        if not text.startswith(TOOL_CLOSE, rest):
            errors.append(f"tool call {index}: expected {TOOL_CLOSE} right after the JSON object")
            close = text.find(TOOL_CLOSE, rest)
            pos = len(text) if close < 0 else close + len(TOOL_CLOSE)
            continue
        pos = rest + len(TOOL_CLOSE)
        if not isinstance(obj, Mapping):
            errors.append(f"tool call {index}: expected a JSON object with 'name' and 'arguments'")
            continue
        try:
            calls.append(ToolCall(f"{prefix}_{len(calls)}", *_name_and_arguments(obj)))
        except ValueError as exc:
            errors.append(f"tool call {index}: {exc}")
    if TOOL_CLOSE in text and not calls and not errors:
        errors.append(f"found {TOOL_CLOSE} without a matching {TOOL_OPEN}")
    return calls, errors


def _last_answer(text: str) -> str | None:
    matches = _ANSWER.findall(text)
    return matches[-1].strip() if matches else None


def extract_code(text: str) -> str | None:
    """The last fenced code block, preferring ```python/```py blocks; None when there is none."""
    blocks = _fenced_blocks(text)
    if not blocks:
        return None
    python = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    return (python or [body for _, body in blocks])[-1]


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block, in one forward scan (linear in ``text``).

    A fence opens at ```` ``` ```` and its line must end; the body runs to the next ```` ``` ````
    or to the end of the text (an unclosed block still counts). A regex with two overlapping
    quantifiers on the opening line was quadratic on one long unterminated line.
    """
    blocks, pos = [], text.find(_FENCE)
    while pos >= 0:
        newline = text.find("\n", pos + len(_FENCE))
        if newline < 0:
            break
        lang = _LANG.match(text, pos + len(_FENCE), newline).group()
        close = text.find(_FENCE, newline + 1)
        blocks.append((lang, text[newline + 1 : len(text) if close < 0 else close]))
        pos = -1 if close < 0 else text.find(_FENCE, close + len(_FENCE))
    return blocks
