"""A random policy that needs to know nothing about the env: the baseline every reward profile shows.

It reads the OpenAI tool schemas that each env gives in ``info["tools"]`` at reset and builds
random calls from them (right names, argument values of the declared types, formats and bounds),
mixed with random final answers and free text. A random policy should score about 0 on every
env; one that scores well exposes a verifier that can be gamed.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np

from textgym.parsing import TOOL_CLOSE, TOOL_OPEN, ToolCall
from textgym.policies.base import PolicyOutput, SlotTools

_WORDS = ("yes", "no", "done", "42", "none", "alice", "bob", "meeting", "report", "1", "2", "3", "x", "todo")
_CHARS = np.array(list(string.ascii_letters + string.digits + " _-.@"))
_EPOCH = date(2024, 1, 1)


class RandomPolicy:
    """Random tool calls, answers and text, drawn from the tools each env declared at reset.

    Per-env state: the ``tools`` of ``infos[i]`` are remembered for batch slot ``i`` until an
    info with new tools arrives (a reset or an autoreset), because step infos do not repeat them.

    Args:
        seed: Seed of the policy's own generator; the same seed, observations and infos give the
            same actions.
        p_tool: Probability of a tool call when the env has tools.
        p_answer: Probability that a turn without a tool call is an ``<answer>`` (else free text).

    Example:
        >>> policy = RandomPolicy(seed=0)
        >>> schema = {"type": "function", "function": {"name": "add", "parameters": {
        ...     "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
        >>> out = policy.act([()], [{"tools": [schema]}])
        >>> len(out.actions)
        1
    """

    def __init__(self, seed: int | None = None, *, p_tool: float = 0.6, p_answer: float = 0.75):
        if not (0 <= p_tool <= 1 and 0 <= p_answer <= 1):
            raise ValueError(f"p_tool and p_answer must be probabilities, got {p_tool} and {p_answer}")
        self.rng = np.random.default_rng(seed)
        self.p_tool = p_tool
        self.p_answer = p_answer
        self.tools = SlotTools()

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        self.tools.update(infos)
        return PolicyOutput([self._action(self.tools[i]) for i in range(len(observations))])

    def _action(self, tools: list[Mapping[str, Any]]) -> str | dict[str, Any]:
        if tools and self.rng.random() < self.p_tool:
            fn = tools[int(self.rng.integers(len(tools)))].get("function", {})
            name = fn.get("name", "tool")
            arguments = random_value(fn.get("parameters") or {"type": "object"}, self.rng)
            if self.rng.random() < 0.5:  # both action forms the envs accept
                return f"{TOOL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{TOOL_CLOSE}"
            call = ToolCall("random", name, arguments)
            return {"role": "assistant", "content": "", "tool_calls": [call.to_openai()]}
        if self.rng.random() < self.p_answer:
            return f"<answer>{self._text()}</answer>"
        return self._text()

    def _text(self) -> str:
        n = int(self.rng.integers(1, 6))
        return " ".join(str(w) for w in self.rng.choice(_WORDS, size=n))


def random_value(schema: Mapping[str, Any], rng: np.random.Generator, depth: int = 0) -> Any:
    """A random JSON value for a JSON-schema fragment (the subset ``textgym.tools`` emits).

    Values usually respect the declared type, enum, format and bounds, so calls reach the tool's
    logic instead of stopping at validation; ``nullable`` fields are sometimes null.
    """
    if schema.get("nullable") and rng.random() < 0.2:
        return None
    if "enum" in schema and schema["enum"]:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    kind = schema.get("type", "string")
    if kind == "object":
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        return {
            k: random_value(v, rng, depth + 1)
            for k, v in props.items()
            if isinstance(v, Mapping) and depth < 3 and (k in required or rng.random() < 0.5)
        }
    if kind == "array":
        items = schema.get("items") or {"type": "string"}
        return [random_value(items, rng, depth + 1) for _ in range(int(rng.integers(0, 4)) if depth < 3 else 0)]
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", max(low, 0) + 10))
        return int(rng.integers(low, high + 1))
    if kind == "number":
        low = float(schema.get("minimum", 0.0))
        high = float(schema.get("maximum", low + 100.0))
        return round(float(rng.uniform(low, high)), 2)
    if kind == "boolean":
        return bool(rng.random() < 0.5)
    return _random_string(schema.get("format"), rng)


def _random_string(fmt: str | None, rng: np.random.Generator) -> str:
    day = _EPOCH + timedelta(days=int(rng.integers(0, 730)))
    if fmt == "date":
        return day.isoformat()
    if fmt == "date-time":
        return f"{day.isoformat()} {int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 4)) * 15:02d}:00"
    if fmt == "email":
        return f"{rng.choice(_WORDS[5:7])}{int(rng.integers(100))}@example.com"
    n = int(rng.integers(1, 12))
    return "".join(rng.choice(_CHARS, size=n))
