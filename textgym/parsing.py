"""The one parser for assistant turns, shared by every env.

An action is either raw text or an OpenAI-style assistant message dict. From either we read:

* tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks in text, or the
  dict's ``tool_calls`` (arguments as a JSON string or a dict);
* a final answer: the text after the last ``<answer>`` (up to ``</answer>`` when present);
* code: the last fenced block (```python preferred).

Each ``<tool_call>`` body is read with a real JSON decoder, so a literal ``</tool_call>`` inside a
JSON string is part of the argument, not the end of the block. Problems are collected as
human-readable ``errors`` for the agent; the parser itself never raises on agent text, nor on a
dict action's values: JSON nested past the decoder's recursion limit, numbers past Python's
int-string limit, arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` and values that are not
JSON (bytes, sets, objects) are all errors for the agent, never crashes. ``max_chars`` bounds a dict
action like a text one: content plus its tool calls counted as the same turn written as text.
"""

from __future__ import annotations

import json
import re
import sys
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
_scan = _DECODER.scan_once  # the C scanner behind raw_decode
_SPACE = re.compile(r"\s*")
MAX_ARGUMENT_DEPTH = 32
"""Arrays and objects nest at most this deep in tool-call arguments (deeper breaks recursion)."""
_CALL_CHARS = len(TOOL_OPEN + '{"name": "", "arguments": }' + TOOL_CLOSE)  # a call's text beyond name and arguments
_SCALARS = frozenset((str, float, bool, type(None)))
_UNSET = object()
_MAX_INT_BITS = 14_000  # about 4,200 digits: Python refuses to print longer ints (sys.get_int_max_str_digits)
# A decoded call object of at most this many characters always passes ``_not_json``: JSON text only
# decodes to JSON values, nesting past MAX_ARGUMENT_DEPTH inside "arguments" takes two brackets
# per level plus the call's own keys (over 90 characters), and a too-long int some 4,200 digits.
_SHORT_CALL = 2 * MAX_ARGUMENT_DEPTH + 16
NO_TOOLS = "this environment has no tools, so tool_calls are not accepted; write your answer in the message's content"


def _always_match(pattern: re.Pattern[str], text: str, pos: int, endpos: int = sys.maxsize) -> re.Match[str]:
    """``pattern.match``, for the patterns of one ``*`` that match anywhere (if only the empty
    string): typed without the None that cannot come."""
    match = pattern.match(text, pos, endpos)
    assert match is not None
    return match


# The records below are made for every call and turn, so they are slotted dataclasses rather than
# frozen ones (a frozen dataclass's __init__ costs about five times as much); treat them as read-only.


@dataclass(slots=True)
class ToolCall:
    """One requested tool call: ``arguments`` is always a dict once parsed."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, default=_plain)},
        }


@dataclass(slots=True)
class ParsedTurn:
    """What the agent said in one turn, and what was wrong with it."""

    message: FrozenDict
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    errors: tuple[str, ...] = ()
    cut: bool = False
    """``max_chars`` cut the action (its text, its content or its tool calls): the env ends such a
    turn's episode as ``length``."""
    _code: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @property
    def error(self) -> str | None:
        return "; ".join(self.errors) if self.errors else None

    @property
    def code(self) -> str | None:
        """The last fenced code block of the text (found on first use: only Code-v0 asks)."""
        if self._code is _UNSET:
            self._code = extract_code(self.text)
        return self._code


def parse_turn(action: Any, *, call_id_prefix: str = "call", max_chars: int | None = None, tools: bool = True) -> ParsedTurn:
    """Parse one assistant action (raw text or an OpenAI assistant dict).

    Args:
        action: The assistant's turn.
        call_id_prefix: Ids of text tool calls (and dict calls without one) are ``<prefix>_<i>``.
        max_chars: Longer actions are cut to this many characters and reported as an error; a
            dict counts its content plus each tool call as it would be written in text.
        tools: False for an env without tools (Code-v0): ``<tool_call>`` in text is then plain
            text (a program may well print the tag), and a dict's ``tool_calls`` are an error.

    Raises:
        InvalidAction: the action is neither a str nor a mapping (a caller bug).
    """
    if isinstance(action, str):
        if max_chars is not None and len(action) > max_chars:
            turn = _parse_text(action[:max_chars], call_id_prefix, tools)
            return _with_error(turn, f"the action is {len(action)} characters; the limit is {max_chars}", cut=True)
        return _parse_text(action, call_id_prefix, tools)
    if isinstance(action, Mapping):
        turn = _parse_dict(action, call_id_prefix, max_chars, tools)
        return turn if tools or not action.get("tool_calls") else _with_error(turn, NO_TOOLS)
    raise InvalidAction(f"expected the assistant turn as a str or a message dict, got {type(action).__name__}")


def _with_error(turn: ParsedTurn, error: str, cut: bool = False) -> ParsedTurn:
    return ParsedTurn(turn.message, turn.text, turn.tool_calls, turn.answer, (error, *turn.errors), cut or turn.cut)


def _parse_text(text: str, prefix: str, tools: bool = True) -> ParsedTurn:
    calls, errors = _tool_calls_from_text(text, prefix) if tools else ((), ())
    answer = _last_answer(text) if "<answer>" in text else None
    return ParsedTurn(assistant(text), text, tuple(calls), answer, tuple(errors))


def _parse_dict(action: Mapping, prefix: str, max_chars: int | None, tools: bool) -> ParsedTurn:
    role = action.get("role", "assistant")
    content = action.get("content")
    if content is None:
        content = ""
    too_long = None
    if isinstance(content, str) and max_chars is not None and len(content) > max_chars:
        too_long = f"the action's content is {len(content)} characters; the limit is {max_chars}"
        content = content[:max_chars]
    if role != "assistant" or not isinstance(content, str):
        text = content if isinstance(content, str) else ""
        return ParsedTurn(
            message=assistant(text),
            text=text,
            errors=(f"an assistant message needs role 'assistant' and str content, got role={role!r}",),
            cut=too_long is not None,
        )
    raw_calls = action.get("tool_calls")
    if not raw_calls:
        turn = _parse_text(content, prefix, tools)
        return _with_error(turn, too_long, cut=True) if too_long else turn
    if too_long:  # the content alone uses up the budget: no call is kept
        return ParsedTurn(assistant(content), content, (), _last_answer(content), (too_long + "; its tool calls were dropped",), True)
    calls, errors, openai_calls, cut = [], [], [], False
    if not isinstance(raw_calls, (list, tuple)):
        raw_calls, errors = [], ["tool_calls must be a list"]
    budget = None if max_chars is None else max_chars - len(content)
    for i, raw in enumerate(raw_calls):
        if budget is not None and _raw_arguments_chars(raw) > budget:  # too long to be worth decoding
            errors.insert(0, _over_limit(max_chars, i))
            cut = True
            break
        default_id = f"{prefix}_{i}"
        try:
            call = _call_from_openai(raw, default_id)
        except ValueError as exc:
            errors.append(f"tool call {i + 1}: {exc}")
            continue
        openai = call.to_openai()
        if budget is not None:  # a caller's own id is text it adds; ours is not
            own_id = len(call.id) if call.id != default_id else 0
            budget -= _CALL_CHARS + own_id + len(call.name) + len(openai["function"]["arguments"])
            if budget < 0:
                errors.insert(0, _over_limit(max_chars, i))
                cut = True
                break
        calls.append(call)
        openai_calls.append(openai)
    return ParsedTurn(
        message=assistant(content, tool_calls=openai_calls),
        text=content,
        tool_calls=tuple(calls),
        answer=_last_answer(content),
        errors=tuple(errors),
        cut=cut,
    )


def _over_limit(max_chars: int, index: int) -> str:
    return (
        f"the action is over {max_chars} characters (content plus tool calls as text); the limit is {max_chars}, "
        f"so tool calls {index + 1} and later were dropped"
    )


def _raw_arguments_chars(raw: Any) -> int:
    """Length of a dict action's call arguments when they are a string (what decoding would cost)."""
    fn = raw.get("function", raw) if isinstance(raw, Mapping) else None
    args = fn.get("arguments") if isinstance(fn, Mapping) else None
    return len(args) if isinstance(args, str) else 0


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
    if type(name) is not str or not name:
        if not isinstance(name, str) or not name:
            raise ValueError("missing tool 'name'")
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters", {})
    return name, arguments_dict(args, name)


def arguments_dict(args: Any, name: str) -> dict[str, Any]:
    """Tool-call arguments as a dict: from a mapping, a JSON-object string, or None/"" (no arguments).

    Raises:
        ValueError: not JSON, or not an object; the message names the tool.
    """
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            args = decode_json(args) if args.strip() else {}
        except ValueError as exc:
            raise ValueError(f"arguments of {name!r} are not valid JSON ({exc})") from None
    if type(args) is not dict:
        if not isinstance(args, Mapping):
            raise ValueError(f"arguments of {name!r} must be a JSON object, got {type(args).__name__}")
        args = dict(args)
    problem = _not_json(args)
    if problem:
        raise ValueError(f"arguments of {name!r} {problem}")
    return args


_NESTED = "arrays or objects nested too deeply"
MAX_JSON_DEPTH = 512
"""Arrays and objects nested deeper than this are refused before decoding. The decoder's own
limit is the interpreter's recursion limit, which any imported library may raise."""
_BRACKETS = re.compile(r'[\[\]{}"\\]')


def _too_deep(text: str, start: int = 0) -> bool:
    """Whether the JSON at ``text[start:]`` opens more than :data:`MAX_JSON_DEPTH` arrays or
    objects at once (brackets inside strings do not count)."""
    if text.count("[", start) + text.count("{", start) <= MAX_JSON_DEPTH:
        return False
    depth, in_string, escaped = 0, False, -1  # escaped: the index a backslash escapes
    for match in _BRACKETS.finditer(text, start):
        i, ch = match.start(), match.group()
        if i == escaped:
            continue
        if in_string:
            if ch == "\\":
                escaped = i + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def decode_json(text: str) -> Any:
    """``json.loads`` whose every failure is a ValueError with a short reason.

    The decoder also raises RecursionError (deep nesting) and a bare ValueError (an integer past
    Python's digit limit) on hostile text; callers that report errors catch ValueError alone.
    """
    if _too_deep(text):
        raise ValueError(_NESTED)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(_json_failure(exc, 0)) from None


def _json_failure(exc: Exception, offset: int) -> str:
    """Why decoding failed, in the agent's terms (the decoder raises three kinds of error)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos - offset}"
    if isinstance(exc, RecursionError):
        return _NESTED
    return "a number with too many digits"


def _not_json(args: dict) -> str | None:
    """What makes ``args`` unfit as JSON arguments (too deep, a non-JSON value), else None.

    Iterative, so no depth of nesting can exhaust the stack. Flat arguments of plain JSON
    scalars (the usual case, every step) are settled in one pass over the items.
    """
    for key, v in args.items():
        kind = type(v)
        if type(key) is not str or (kind not in _SCALARS and (kind is not int or v.bit_length() > _MAX_INT_BITS)):
            break
    else:
        return None
    todo: list[tuple[Any, int]] = [(args, 0)]
    while todo:
        value, depth = todo.pop()
        if depth >= MAX_ARGUMENT_DEPTH:
            return f"nest arrays or objects deeper than {MAX_ARGUMENT_DEPTH} levels"
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, v in items:
            if type(key) is not str and isinstance(value, Mapping):
                return f"have a non-string key {_short(key)}"
            if type(v) in _SCALARS:
                continue
            if isinstance(v, int):
                if v.bit_length() > _MAX_INT_BITS:
                    return "hold an integer with too many digits"
            elif isinstance(v, (Mapping, list, tuple)):
                todo.append((v, depth + 1))
            elif not isinstance(v, (str, float)):
                return f"hold a value of type {type(v).__name__}, which JSON cannot represent"
    return None


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tool_calls_from_text(text: str, prefix: str) -> tuple[list[ToolCall], list[str]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    start = text.find(TOOL_OPEN)
    index = 0
    while start >= 0:
        index += 1
        body = start + len(TOOL_OPEN)
        if text[body : body + 1] != "{":  # whitespace first, or no JSON object at all
            body = _always_match(_SPACE, text, body).end()
        if _too_deep(text, body):
            errors.append(f"tool call {index}: invalid JSON ({_NESTED})")
            start = _next_open(text, body)
            continue
        try:
            obj, end = _scan(text, body)
        except StopIteration as exc:  # what raw_decode would raise, without its extra frame
            errors.append(f"tool call {index}: invalid JSON (Expecting value at char {exc.value - body})")
            start = _next_open(text, body)
            continue
        except (ValueError, RecursionError) as exc:
            errors.append(f"tool call {index}: invalid JSON ({_json_failure(exc, body)})")
            start = _next_open(text, body)
            continue
        if not text.startswith(TOOL_CLOSE, end):
            end = _always_match(_SPACE, text, end).end()
            if not text.startswith(TOOL_CLOSE, end):
                errors.append(f"tool call {index}: expected {TOOL_CLOSE} right after the JSON object")
                start = _next_open(text, end)
                continue
        start = text.find(TOOL_OPEN, end + len(TOOL_CLOSE))
        if type(obj) is not dict:
            errors.append(f"tool call {index}: expected a JSON object with 'name' and 'arguments'")
            continue
        name, args = obj.get("name"), obj.get("arguments")
        if type(name) is str and name and type(args) is dict and (end - body <= _SHORT_CALL or _not_json(args) is None):
            calls.append(ToolCall(f"{prefix}_{len(calls)}", name, args))
            continue
        try:
            calls.append(ToolCall(f"{prefix}_{len(calls)}", *_name_and_arguments(obj)))
        except ValueError as exc:
            errors.append(f"tool call {index}: {exc}")
    if not calls and not errors and TOOL_CLOSE in text:
        errors.append(f"found {TOOL_CLOSE} without a matching {TOOL_OPEN}")
    return calls, errors


def _next_open(text: str, pos: int) -> int:
    """Where the next call opens after a broken one: past its ``</tool_call>``, if it has one."""
    close = text.find(TOOL_CLOSE, pos)
    return -1 if close < 0 else text.find(TOOL_OPEN, close + len(TOOL_CLOSE))


def _last_answer(text: str) -> str | None:
    if "<answer>" not in text:
        return None
    matches = _ANSWER.findall(text)
    return matches[-1].strip() if matches else None


def _plain(value: Any) -> dict:
    """``json.dumps`` hook: read-only mappings (a FrozenDict inside dict arguments) as dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


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
        lang = _always_match(_LANG, text, pos + len(_FENCE), newline).group()
        close = text.find(_FENCE, newline + 1)
        blocks.append((lang, text[newline + 1 : len(text) if close < 0 else close]))
        pos = -1 if close < 0 else text.find(_FENCE, close + len(_FENCE))
    return blocks
