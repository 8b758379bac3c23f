"""The four task formats of Code-v0, read into one Task record.

Accepted dicts (in JSONL files and in ``reset(options={"task": ...})``):

* function tests ``{"prompt", "entry_point", "tests": [{"args", "kwargs"?, "expected"}]}``
* stdin/stdout ``{"prompt", "tests": [{"input", "output"}]}``
* HumanEval ``{"prompt", "entry_point", "test": "def check(candidate): ..."}``
* MBPP ``{"text", "test_list": ["assert ..."], "test_setup_code"?}``

Each may carry a reference solution (``solution``, HumanEval's ``canonical_solution``, MBPP's
``code``) for the oracle. Every test becomes one of three kinds, kept in ``Task.answer``:

* ``call``: call a function with arguments; its value is compared with ``expected`` on the host;
* ``stdio``: run the program on an input; its stdout is compared with ``output`` on the host;
* ``check``: a HumanEval ``check`` or MBPP assertion too rich to turn into a comparison; it runs
  on the host (it is the dataset's trusted code) against a proxy whose every call goes into the
  sandbox and returns a plain value.

Simple ``assert f(x) == y`` lines (also ``is True``, ``not f(x)``, bare ``f(x)``, with literal
arguments) are turned into ``call`` tests, so their expected values never enter the sandbox.
"""

from __future__ import annotations

import ast
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from textgym.envs.code.check_program import is_noop
from textgym.error import InvalidTask
from textgym.sandbox.zygote import decode, encode
from textgym.tasks import Task, task_id


def cached_task_from_dict(d: Mapping[str, Any]) -> Task:
    """:func:`task_from_dict`, remembered while some env still holds the task it gave.

    An env reset with the same pinned task again (a GRPO group, a benchmark) skips parsing its
    tests (~1 ms for a HumanEval problem). The cache keeps tasks weakly: once no env holds one
    (a served client left), its data is gone. The key keeps types apart (a tuple is not a list),
    and a dict holding anything but plain data is parsed every time.
    """
    try:
        key = _plain_key(d)
    except (TypeError, RecursionError):
        return task_from_dict(d)
    with _cache_lock:
        task = _cache.get(key)
    if task is None:
        task = task_from_dict(d)
        with _cache_lock:
            task = _cache.setdefault(key, task)
    return task


_cache: weakref.WeakValueDictionary[Any, Task] = weakref.WeakValueDictionary()
_cache_lock = threading.Lock()


def _plain_key(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return kind.__name__, value
    if kind in (list, tuple):
        return kind.__name__, tuple(map(_plain_key, value))
    if kind is dict and all(type(k) is str for k in value):
        return "dict", tuple(sorted((k, _plain_key(v)) for k, v in value.items()))
    raise TypeError(kind.__name__)


def task_from_dict(d: Mapping[str, Any]) -> Task:
    """Read any of the four formats (or an already-converted Task record)."""
    if Task.is_record(d):
        return checked_record(Task.from_dict(d))
    if "test_list" in d:
        return _mbpp(d)
    if "test" in d and "entry_point" in d:
        return _humaneval(d)
    if "tests" in d:
        tests = _require(d, "tests", list)
        if tests and all(isinstance(t, Mapping) and "input" in t and "output" in t for t in tests):
            return _stdio(d)
        return _function(d)
    raise InvalidTask("a code task needs 'tests' (function or stdin/stdout), 'test' (HumanEval) or 'test_list' (MBPP)")


FORMATS = ("function", "stdio", "humaneval", "mbpp")
COMPARES = ("python", "json", "is", "truthy", "falsy")


def checked_record(task: Task) -> Task:
    """``task`` if it has the shape :func:`_make` gives (a pinned record or a state's task may
    hold anything): a known format, str prompt, and at least one well-formed test of its format."""
    data, answer = task.data, task.answer
    fmt = data.get("format")
    if fmt not in FORMATS or not isinstance(data.get("prompt"), str) or not isinstance(data.get("setup", ""), str):
        raise InvalidTask(f"a code task record needs data with 'format' in {FORMATS} and a str 'prompt'")
    if fmt != "stdio" and not isinstance(data.get("entry_point"), str):
        raise InvalidTask(f"a {fmt} code task record needs a str 'entry_point'")
    shown = data.get("shown_tests", [])
    if not (isinstance(shown, list) and all(isinstance(line, str) for line in shown)):
        raise InvalidTask("a code task record's 'shown_tests' must be a list of str")
    tests = answer.get("tests") if isinstance(answer, Mapping) else None
    if not isinstance(tests, list) or not tests:
        raise InvalidTask("a code task needs at least one test (answer['tests'], a non-empty list)")
    for i, test in enumerate(tests):
        if not _well_formed(test, stdio=fmt == "stdio"):
            raise InvalidTask(
                f"test {i} of the code task record is not a well-formed {'stdio' if fmt == 'stdio' else 'call or check'} test"
            )
    if not isinstance(answer.get("solution"), (str, type(None))):
        raise InvalidTask("a code task record's solution must be a str or null")
    return task


def _well_formed(test: Any, stdio: bool) -> bool:
    kind = test.get("kind") if isinstance(test, Mapping) else None
    if stdio or kind == "stdio":
        return stdio and kind == "stdio" and isinstance(test.get("input"), str) and isinstance(test.get("output"), str)
    if kind == "check":
        return isinstance(test.get("code"), str) and all(isinstance(test.get(k), (str, type(None))) for k in ("call", "candidate"))
    if kind != "call" or not isinstance(test.get("name"), str) or "expected" not in test:
        return False
    if test.get("compare", "python") not in COMPARES:
        return False
    try:
        args, kwargs = decode(test.get("args")), decode(test.get("kwargs") or {})
        decode(test["expected"])
    except (TypeError, ValueError, KeyError, RecursionError):
        return False
    return isinstance(args, list) and isinstance(kwargs, dict)


def _function(d: Mapping[str, Any]) -> Task:
    prompt, name = _require(d, "prompt", str), _require(d, "entry_point", str)
    tests = []
    for i, t in enumerate(_require(d, "tests", list)):
        if not isinstance(t, Mapping) or "expected" not in t:
            raise InvalidTask(f"function test {i} needs 'args' and 'expected'")
        args, kwargs = t.get("args", []), t.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, Mapping):
            raise InvalidTask(f"function test {i}: 'args' must be a list and 'kwargs' an object")
        tests.append(call_test(name, args, dict(kwargs), t["expected"], "json"))
    return _make("function", prompt, name, tests, d.get("solution"), d)


def _stdio(d: Mapping[str, Any]) -> Task:
    prompt = _require(d, "prompt", str)
    tests = [{"kind": "stdio", "input": str(t["input"]), "output": str(t["output"])} for t in d["tests"]]
    return _make("stdio", prompt, None, tests, d.get("solution"), d)


def _humaneval(d: Mapping[str, Any]) -> Task:
    prompt, name, test = _require(d, "prompt", str), _require(d, "entry_point", str), _require(d, "test", str)
    try:
        tree = ast.parse(test)
    except SyntaxError as exc:
        raise InvalidTask(f"the HumanEval test does not parse: {exc}") from None
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None or not check.args.args:
        raise InvalidTask("the HumanEval test must define check(candidate)")
    aliases = {check.args.args[0].arg, name}
    body = [s for s in check.body if not is_noop(s)]
    simple = [simple_assert(s, aliases) for s in body]
    if body and all(simple):
        tests = [call_test(name, *parts[1:]) for parts in simple]
    else:
        tests = [{"kind": "check", "code": test, "call": "check", "candidate": name}]
    solution = d.get("solution") or (prompt + d["canonical_solution"] if d.get("canonical_solution") else None)
    return _make("humaneval", prompt, name, tests, solution, d)


def _mbpp(d: Mapping[str, Any]) -> Task:
    text, lines = _require(d, "text", str), _require(d, "test_list", list)
    if not lines:
        raise InvalidTask("test_list is empty")
    tests, names = [], []
    for i, line in enumerate(lines):
        try:
            (stmt,) = ast.parse(str(line)).body
        except (SyntaxError, ValueError):
            raise InvalidTask(f"test_list[{i}] is not one statement: {line!r}") from None
        called = [n.func.id for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        names += [n for n in called if n not in names and not _is_builtin(n)]
        parts = simple_assert(stmt, set(names))
        tests.append(call_test(*parts) if parts else {"kind": "check", "code": str(line)})
    if not names:
        raise InvalidTask("the MBPP tests call no function to test")
    setup = str(d.get("test_setup_code") or "")
    entry = names[0]
    return _make("mbpp", text, entry, tests, d.get("solution") or d.get("code"), d, setup=setup, shown=[str(x) for x in lines])


def call_test(name: str, args: list, kwargs: dict, expected: Any, compare: str) -> dict[str, Any]:
    """A ``call`` test; arguments and expected value are stored in the typed plain encoding."""
    try:
        return {
            "kind": "call",
            "name": name,
            "args": encode(list(args)),
            "kwargs": {str(k): encode(v) for k, v in kwargs.items()},
            "expected": encode(expected),
            "compare": compare,
        }
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"a test of {name!r} has a value that is not plain data: {exc}") from None


def simple_assert(stmt: ast.stmt, names: set[str]) -> tuple[str, list, dict, Any, str] | None:
    """``(name, args, kwargs, expected, compare)`` for an ``assert f(lits) == lit`` line, else None.

    ``names`` are the functions under test (``candidate`` and the entry point).

    ``compare`` is ``"python"`` for ``==``, ``"is"`` for ``is True/False/None``, and
    ``"truthy"``/``"falsy"`` for a bare ``f(x)`` or ``not f(x)`` (expected is then None).
    """
    if not isinstance(stmt, ast.Assert):
        return None
    test = stmt.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        left, right = test.left, test.comparators[0]
        if not _is_call_to(left, names):
            left, right = right, left
        if not _is_call_to(left, names) or isinstance(right, ast.Call):
            return None
        expected = _literal(right)
        is_op = isinstance(test.ops[0], ast.Is)
        if expected is _NOT_LITERAL or (is_op and expected not in (True, False, None)):
            return None
        parts = _call_parts(left)
        return None if parts is None else (left.func.id, *parts, expected, "is" if is_op else "python")
    compare = "truthy"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, compare = test.operand, "falsy"
    if _is_call_to(test, names):
        parts = _call_parts(test)
        return None if parts is None else (test.func.id, *parts, None, compare)
    return None


_NOT_LITERAL = object()


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def _call_parts(call: ast.Call) -> tuple[list, dict] | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    args = [_literal(a) for a in call.args]
    kwargs = {k.arg: _literal(k.value) for k in call.keywords}
    if any(v is _NOT_LITERAL for v in [*args, *kwargs.values()]):
        return None
    return args, kwargs


def _is_call_to(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _is_builtin(name: str) -> bool:
    import builtins

    return hasattr(builtins, name)


def _require(d: Mapping[str, Any], key: str, kind: type) -> Any:
    if not isinstance(d.get(key), kind):
        raise InvalidTask(f"a code task needs {key!r} ({kind.__name__}), got {type(d.get(key)).__name__}")
    return d[key]


def _make(fmt, prompt, entry, tests, solution, source, *, setup="", shown=None) -> Task:
    if not tests:
        raise InvalidTask("a code task needs at least one test")
    data = {"format": fmt, "prompt": prompt, "entry_point": entry, "setup": setup}
    if shown:
        data["shown_tests"] = shown
    answer = {"tests": tests, "solution": solution if isinstance(solution, str) else None}
    meta = {"source": fmt, **({"task_id": str(source["task_id"])} if "task_id" in source else {})}
    meta.update(dict(source.get("metadata") or {}))
    return Task(task_id("code", data, tests), data, answer, meta)
