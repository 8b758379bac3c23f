"""Run a submission against a task's tests and decide, on the host, which ones pass.

The program's sandbox only ever sees the program and the test inputs. Values come back as plain
data and are compared here; HumanEval/MBPP checks that are not simple comparisons run in a
sandboxed process of their own, on those plain values (:mod:`.checks`): no code of a task runs
on the host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from textgym.envs.code.checks import Check, Checker, CheckSandboxFailed, LiveSession, judge, plan_checks
from textgym.sandbox import Call, CallResult, Sandbox, same_stdout, values_equal
from textgym.sandbox.worker import WorkerDied
from textgym.sandbox.zygote import decode
from textgym.tasks import Task

CLIP = 300


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... [truncated, {len(text)} chars]"


def program_for(task: Task, code: str) -> tuple[str, int]:
    """The program that runs and how many lines come before the agent's code.

    MBPP setup code, or the HumanEval prompt (so that a bare body completes it), goes first.
    """
    head = task.data.get("prompt", "") if task.data.get("format") == "humaneval" else task.data.get("setup", "")
    if head and not head.endswith("\n"):
        head += "\n"
    return head + code, head.count("\n")


_LINE = re.compile(r'(File "solution\.py", line )(\d+)')


def _renumber(text: str | None, offset: int) -> str | None:
    """Traceback line numbers as the agent wrote them (the prepended prompt or setup not counted)."""
    if not text or not offset:
        return text

    def shift(m: re.Match) -> str:
        line = int(m.group(2)) - offset
        return m.group(1) + (str(line) if line > 0 else f"{m.group(2)} (in the task's own code)")

    return _LINE.sub(shift, text)


def verify(sandbox: Sandbox, task: Task, code: str, checks: dict[int, Check] | None = None) -> dict[str, Any]:
    """Per-test results for ``code``: ``{"passed", "total", "all_passed", "load_error", "tests",
    "sandbox_error"}``; ``sandbox_error`` (else None) says the sandbox itself failed, so the
    verdict is not the program's.

    ``checks`` holds the task's planned checks for the caller (filled here when empty): an env
    passes the same dict for every submission to its task, which keeps their plans.
    """
    checker = Checker(sandbox)  # opened by the first plan or judging, then kept to the end
    try:
        return _run_checks(sandbox, task, code, checks, checker)
    except (WorkerDied, CheckSandboxFailed) as exc:  # no worker could be started
        total = len(task.answer["tests"])
        return {"passed": 0, "total": total, "all_passed": False, "load_error": None, "tests": [], "sandbox_error": str(exc)}
    finally:
        checker.close()


def _run_checks(sandbox: Sandbox, task: Task, code: str, held: dict[int, Check] | None, checker: Checker) -> dict[str, Any]:
    tests = task.answer["tests"]
    program, offset = program_for(task, code)
    mode = "stdio" if task.data.get("format") == "stdio" else "function"
    batch = [i for i, t in enumerate(tests) if t["kind"] != "check"]
    checks = held or plan_checks(task, checker)
    if held is not None:
        held.update(checks)
    # One submission: the plain call tests, then every call the checks were planned to make.
    calls = [_call(tests[i]) for i in batch] + [c for check in checks.values() for c in check.plan]
    outcomes: dict[int, dict[str, Any]] = {}
    load_error = failed = None
    call_results: list[CallResult] = []
    if calls:
        run = sandbox.run(program, calls, mode=mode)
        load_error, failed, call_results = run.load_error, run.sandbox_error, list(run.results)
        for i, result in zip(batch, call_results):
            outcomes[i] = _call_test_outcome(i, tests[i], result)
    start, answers = len(batch), {}
    for i, check in checks.items():
        answers[i], start = call_results[start : start + len(check.plan)], start + len(check.plan)
    live = LiveSession(sandbox, program, mode)
    try:
        verdicts = {} if load_error or not checks else judge(checks, answers, checker, live)
    finally:
        live.close()
    for i, check in checks.items():
        passed, error = verdicts.get(i, (False, load_error))
        got = "they hold" if passed else None
        outcomes[i] = _outcome(i, "check", passed, check.shown, "the assertions hold", got, CallResult(error=error) if error else None)
    load_error, failed = load_error or live.load_error, failed or live.sandbox_error
    results = [outcomes[i] for i in range(len(tests))]
    for r in results:
        r["error"] = _renumber(r["error"], offset)
    passed = sum(r["passed"] for r in results)
    return {
        "passed": passed,
        "total": len(results),
        "all_passed": passed == len(results),
        "load_error": clip(_renumber(load_error, offset), 2000) if load_error else None,
        "tests": results,
        "sandbox_error": failed,
    }


def _call(test: Mapping[str, Any]) -> Call:
    if test["kind"] == "stdio":
        return Call(kind="stdio", input=test["input"])
    return Call(name=test["name"], args=decode(test["args"]), kwargs=decode(test.get("kwargs") or {}))


def _call_test_outcome(index: int, test: Mapping[str, Any], result: CallResult) -> dict[str, Any]:
    if test["kind"] == "stdio":
        expected, shown_input = test["output"], test["input"]
        passed = result.ok and not result.truncated and same_stdout(expected, result.value)
        got = result.value if result.ok else None
        return _outcome(index, "stdio", passed, shown_input, expected, got, result)
    expected = decode(test["expected"])
    compare = test.get("compare", "python")
    passed = result.ok and _matches(expected, result.value, compare)
    args = ", ".join([*map(repr, decode(test["args"])), *(f"{k}={decode(v)!r}" for k, v in (test.get("kwargs") or {}).items())])
    shown_expected = {"truthy": "a true value", "falsy": "a false value"}.get(compare, repr(expected))
    return _outcome(index, "call", passed, f"{test['name']}({args})", shown_expected, repr(result.value) if result.ok else None, result)


def _matches(expected: Any, got: Any, compare: str) -> bool:
    if compare == "is":
        return got is expected
    if compare in ("truthy", "falsy"):
        return bool(got) == (compare == "truthy")
    return values_equal(expected, got, json_like=compare == "json")


def _outcome(index, kind, passed, shown_input, expected, got, result: CallResult | None) -> dict[str, Any]:
    return {
        "index": index,
        "kind": kind,
        "passed": bool(passed),
        "input": clip(shown_input),
        "expected": clip(expected),
        "got": None if got is None else clip(got),
        "error": clip(result.error, 1500) if result is not None and result.error else None,
        "timeout": bool(result.timeout) if result is not None else False,
    }


def feedback(verification: Mapping[str, Any], attempts_left: int, *, max_shown: int = 3) -> str:
    """What the agent reads after a failing submission."""
    if verification["load_error"]:
        head = f"Your program failed before any test could run:\n{verification['load_error']}"
    else:
        head = f"Your solution passed {verification['passed']} of {verification['total']} tests."
    parts = [head]
    failed = [t for t in verification["tests"] if not t["passed"]]
    if not verification["load_error"]:
        for t in failed[:max_shown]:
            lines = [f"Test {t['index'] + 1} failed:", _field("input", t["input"]), _field("expected", t["expected"])]
            if t["got"] is not None:
                lines.append(_field("got", t["got"]))
            if t["error"]:
                lines.append(_field("error", t["error"]))
            parts.append("\n".join(lines))
        if len(failed) > max_shown:
            parts.append(f"({len(failed) - max_shown} more failing tests not shown.)")
    if attempts_left > 0:
        plural = "s" if attempts_left != 1 else ""
        parts.append(f"Fix the code and submit the whole program again in a ```python block ({attempts_left} attempt{plural} left).")
    return "\n\n".join(parts)


def _field(name: str, text: str) -> str:
    """``  name: text`` for one line; several lines (stdin/stdout, tracebacks) go indented below."""
    text = str(text).rstrip("\n")
    if not text:
        return f"  {name}: (empty)"
    if "\n" not in text:
        return f"  {name}: {text}"
    return f"  {name}:\n" + "\n".join("    " + line for line in text.splitlines())
