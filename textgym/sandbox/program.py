"""What goes into the sandbox (a program and its calls) and what comes out (plain values).

Only inputs travel in; expected outputs stay on the host. Outputs come back as typed JSON trees
(:func:`textgym.sandbox.zygote.encode`) and are rebuilt here from builtin types only, so whatever
the program returned, the host compares plain ``int``/``str``/``list``/... values with its own
``==``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from textgym.sandbox.zygote import decode, encode

Mode = Literal["function", "stdio"]


@dataclass(frozen=True)
class Call:
    """One test run: call ``name(*args, **kwargs)``, or run the program with ``input`` on stdin."""

    kind: Literal["function", "stdio"] = "function"
    name: str = ""
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    input: str = ""
    refs: bool = False

    def request(self, call_id: int) -> dict[str, Any]:
        """The wire form; raises ``TypeError`` for arguments that are not plain values.

        With ``refs``, a returned object that is not plain data comes back as a
        :class:`~textgym.sandbox.zygote.Ref` (a handle for later calls), not as an error.
        """
        if self.kind == "stdio":
            return {"op": "call", "id": call_id, "kind": "stdio", "input": str(self.input)}
        request = {
            "op": "call",
            "id": call_id,
            "kind": "function",
            "name": self.name,
            "args": [encode(a) for a in self.args],
            "kwargs": {str(k): encode(v) for k, v in self.kwargs.items()},
        }
        if self.refs:
            request["refs"] = True
        return request


@dataclass(frozen=True)
class Preload:
    """The host's own program, loaded once in each worker before it forks (never a task's code).

    A run of exactly ``code`` as a function module then costs its child no compile and no run of
    the module body, and ``warm_up`` (calls the worker serves itself first, before any fork)
    leaves its bytecode quickened: Code tasks' check program is one. ``code`` and ``warm_up`` run
    in the worker with its own privileges, so both must be the host's, never data from a task.
    """

    code: str
    warm_up: tuple[Call, ...] = ()

    def config(self) -> dict[str, Any]:
        """What the worker reads (``zygote.preload``)."""
        return {"code": self.code, "warm_up": [call.request(i) for i, call in enumerate(self.warm_up)]}


@dataclass(frozen=True)
class CallResult:
    """The outcome of one call. ``value`` is a plain Python value (stdout text for stdio calls).

    ``ok`` means the program returned normally, not that the value is right: the caller
    compares ``value`` with what it expected, outside the sandbox.
    """

    value: Any = None
    error: str | None = None
    timeout: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any]) -> CallResult:
        error = reply.get("error")
        if error is not None and not isinstance(error, str):
            error = "the program sent a malformed error"
        try:
            value = decode(reply.get("value"))
        except (TypeError, ValueError, RecursionError) as exc:
            return cls(error=f"the program returned a value that could not be decoded: {str(exc)[:200]}")
        return cls(value=value, error=error, timeout=bool(reply.get("timeout")), truncated=bool(reply.get("truncated")))


@dataclass(frozen=True)
class RunResult:
    """Everything a submission produced: whether it loaded, each call's result, its console.

    ``sandbox_error`` says that the sandbox's worker itself stopped during the run (after the
    retry on a fresh one): the results it left unanswered are not the program's doing.
    """

    loaded: bool
    results: tuple[CallResult, ...]
    load_error: str | None = None
    console: str = ""
    sandbox_error: str | None = None


def values_equal(expected: Any, got: Any, *, json_like: bool = False) -> bool:
    """Compare plain values the way a test means them.

    With ``json_like`` (tests written as JSON), tuples equal lists, ``bool`` is never a number,
    and floats compare with a relative tolerance of 1e-6; otherwise Python's ``==`` decides (as
    the ``assert f(x) == y`` the test came from would).
    """
    if not json_like:
        try:
            return bool(expected == got)
        except Exception:  # plain values compare without raising; be safe anyway
            return False
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, int) and isinstance(got, int):
            return expected == got
        return math.isclose(expected, got, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(expected) and math.isnan(got))
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(expected) == len(got) and all(values_equal(e, g, json_like=True) for e, g in zip(expected, got))
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(values_equal(expected[k], got[k], json_like=True) for k in expected)
    return type(expected) is type(got) and expected == got


def same_stdout(expected: str, got: str) -> bool:
    """Program output matches when the lines agree up to trailing spaces and blank lines at the end."""
    return _lines(expected) == _lines(got)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in str(text).rstrip().splitlines()]
