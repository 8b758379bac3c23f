"""HumanEval and MBPP checks: planned and run in a sandboxed process of their own, never on the host.

A check (HumanEval's ``check(candidate)`` with its prompt, an MBPP assertion too rich to be one
comparison, a task record's ``check``) is code from a task, and a task may come from anyone (a
client of ``textgym serve`` pins one), so none of it runs here: :mod:`.check_program` runs it,
as the program of a sandboxed process that holds no submission, in a pool of workers apart from
the submissions' (:func:`check_sandbox`). The submission never shares a process with the check
that judges it; only plain values pass between them, through the host:

1. **planned**, once per distinct test: the check runs with every call into the program
   answered by an unknown and lists the calls whose arguments it knows; these go to the
   submission's sandbox in the submission's one batch;
2. **judged**, once per submission: the checks run again, each call taking the answer of the
   next planned one; at a call that was not planned (its arguments came from an earlier
   answer), that check starts over with every call live, in one session of the program, the
   check process asking for one call at a time.

A plan never sees a program, so it is kept for as long as some env holds the task (a GRPO group
verifies one task many times) and no longer: :func:`plan_checks` keeps them weakly.

One verification's plans, judging and live calls go to one check process (:class:`Checker`),
a child forked for that verification alone from a worker that has the check program loaded
and warm (:data:`CHECKER`): a task's first submission costs one such fork, not one per step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textgym.sandbox import Call, CallResult, Preload, Sandbox, Session
from textgym.sandbox.zygote import decode, encode
from textgym.tasks import Task

PROGRAM = Path(__file__).with_name("check_program.py").read_text(encoding="utf-8")
MAX_LIVE_CALLS = 1000  # calls a check may make one at a time, on earlier answers

# What every check worker serves itself before it forks (the program's module body and these
# runs of it are ours, not a task's), so a check's process starts with the program loaded and
# its paths quickened: a HumanEval check with a finished helper and its own ``random``, planned,
# then judged passing, failing, and at a call it was not answered; an MBPP line planned and judged.
_SAMPLE = {
    "code": "import random\n\ndef check(candidate):\n    assert candidate([1, 2], k=3) == (3, 'x')\n"
    "    assert helper(candidate([random.randint(0, 0)])) == {1: 2}\n",
    "humaneval": True,
    "candidate": "f",
    "prompt": 'from typing import List\n\n\ndef f(xs: List[int], k=0):\n    """Doc."""\n\n\ndef helper(x):\n    return x\n',
}
_SAMPLE_CALLS = (["f", [[1, 2]], {"k": 3}], ["f", [[0]], {}])
_MBPP_SAMPLE = {"code": "assert f(1) == math.floor(2.5)", "humaneval": False, "candidate": None, "prompt": ""}


def _judging(spec: dict[str, Any], answered: Sequence[tuple[list, dict]]) -> Call:
    return Call(name="judge", args=[json.dumps([[spec, [[wire, tree] for wire, tree in answered]]])])


CHECKER = Preload(
    PROGRAM,
    warm_up=(
        Call(name="plan", args=[json.dumps(_SAMPLE, sort_keys=True)]),
        _judging(_SAMPLE, list(zip(_SAMPLE_CALLS, [{"value": {"__tuple__": [3, "x"]}}, {"value": {"__dict__": [[1, 2]]}}]))),
        _judging(_SAMPLE, list(zip(_SAMPLE_CALLS, [{"value": 3}, {"error": "ValueError"}]))),
        _judging(_SAMPLE, []),
        Call(name="plan", args=[json.dumps(_MBPP_SAMPLE, sort_keys=True)]),
        _judging(_MBPP_SAMPLE, [(["f", [1], {}], {"value": 2})]),
    ),
)


class Check:
    """One check test of a task: its spec (plain data, run only in the sandbox) and its plan."""

    __slots__ = ("__weakref__", "plan", "shown", "spec", "wires")

    def __init__(self, spec: dict[str, Any], wires: Sequence[list]):
        self.spec = spec
        self.shown = "check(candidate)" if spec["humaneval"] else spec["code"]
        calls = [(w, _call(w)) for w in wires]
        self.wires = tuple(w for w, c in calls if c is not None)
        self.plan = tuple(c for w, c in calls if c is not None)


def spec_of(test: dict[str, Any], task: Task) -> dict[str, Any]:
    """What the check program needs to run a ``check`` test of ``task``."""
    humaneval = test.get("call") == "check"
    return {
        "code": test["code"],
        "humaneval": humaneval,
        "candidate": test.get("candidate"),
        "prompt": task.data.get("prompt", "") if humaneval else "",
    }


_plans: weakref.WeakValueDictionary[str, Check] = weakref.WeakValueDictionary()
_plans_lock = threading.Lock()


def plan_checks(task: Task, checker: Checker) -> dict[int, Check]:
    """The checks of ``task`` by test index, planned in ``checker`` for those not planned yet; the
    caller holds them (the env, for its task), which is what keeps them planned."""
    specs = {i: spec_of(t, task) for i, t in enumerate(task.answer["tests"]) if t["kind"] == "check"}
    keys = {i: json.dumps(s, sort_keys=True) for i, s in specs.items()}
    with _plans_lock:
        checks = {i: _plans.get(keys[i]) for i in specs}
    missing = [i for i, c in checks.items() if c is None]
    for i in missing:
        result = checker("plan", keys[i])
        wires = _parse_json(result.value, list) if result.ok else []  # a check that cannot be planned is judged live
        checks[i] = Check(specs[i], wires or [])
    with _plans_lock:
        for i in missing:
            checks[i] = _plans.setdefault(keys[i], checks[i])
    return checks


def judge(
    checks: dict[int, Check], answers: dict[int, Sequence[CallResult]], checker: Checker, live: LiveSession
) -> dict[int, tuple[bool, str | None]]:
    """``(passed, error)`` of each check on the answers to its planned calls; a check that makes
    a call that was not planned runs again on ``live`` answers (see the module docstring)."""
    order = list(checks)
    request = [[checks[i].spec, [[w, _tree(r)] for w, r in zip(checks[i].wires, answers[i])]] for i in order]
    verdicts: dict[int, tuple[bool, str | None]] = {}
    for i, outcome in zip(order, _judged(checker, request)):
        if "need" not in outcome:
            verdicts[i] = _verdict(outcome)
            continue
        pairs: list[list] = []
        for _ in range(MAX_LIVE_CALLS):
            (outcome,) = _judged(checker, [[checks[i].spec, pairs]])
            if "need" not in outcome:
                break
            call = _call(outcome["need"])
            if call is None:
                outcome = {"passed": False, "error": "the check program answered out of protocol"}
                break
            pairs.append([outcome["need"], _tree(live(call))])
        else:
            outcome = {"passed": False, "error": f"the check made more than {MAX_LIVE_CALLS} calls on earlier answers"}
        verdicts[i] = _verdict(outcome)
    return verdicts


def _judged(checker: Checker, request: list) -> list[dict[str, Any]]:
    """One call of the check program's ``judge``; a check that fails it (loops past the time
    limit, or eats the memory, which ends its process) fails every check of the call."""
    result = checker("judge", json.dumps(request))
    outcomes = _parse_json(result.value, list) if result.ok else None
    if outcomes is None or len(outcomes) != len(request) or not all(isinstance(o, dict) for o in outcomes):
        error = result.error or "the check program answered out of protocol"
        return [{"passed": False, "error": f"the check failed in its sandbox: {error}"}] * len(request)
    return outcomes


def _verdict(outcome: dict[str, Any]) -> tuple[bool, str | None]:
    error = outcome.get("error")
    return outcome.get("passed") is True, None if error is None else str(error)


class CheckSandboxFailed(Exception):
    """The checks' sandbox itself failed: no verdict is the program's."""


def _parse_json(value: Any, kind: type) -> Any:
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, kind) else None


def _call(wire: Any) -> Call | None:
    """A call of the program from its wire form ``[name, args, kwargs]`` (typed trees), or None
    for anything else (the check program's output is the task's doing)."""
    if not (isinstance(wire, list) and len(wire) == 3 and isinstance(wire[0], str)):
        return None
    if not (isinstance(wire[1], list) and isinstance(wire[2], dict)):
        return None
    try:
        return Call(name=wire[0], args=decode(wire[1]), kwargs=decode(wire[2]), refs=True)
    except (TypeError, ValueError, RecursionError):
        return None


def _tree(result: CallResult) -> dict[str, Any]:
    """An answer as the check program reads it: the typed tree of its value, or its error."""
    return {"value": encode(result.value)} if result.ok else {"error": result.error}


_boxes: dict[tuple, Sandbox] = {}
_boxes_lock = threading.Lock()


def check_sandbox(sandbox: Sandbox) -> Sandbox:
    """The pool that runs checks next to ``sandbox``: same backend and limits, its own workers,
    each with the check program loaded and warm before it forks (:data:`CHECKER`).

    Apart, so that a check judged while its program's live session holds a worker never waits
    for a worker of the same pool (with one worker, or every worker so held, it would wait forever).
    A check process lives through its submission's run (:class:`Checker`), so its time limit
    is three of the submission's: the plans, the submission's run, and the judging.
    """
    key = (os.getpid(), sandbox.backend.name, sandbox.limits)
    with _boxes_lock:
        if key not in _boxes:
            limits = dataclasses.replace(sandbox.limits, total_timeout=3 * sandbox.limits.total_timeout)
            _boxes[key] = Sandbox(limits, backend=sandbox.backend.name, preload=CHECKER)
        return _boxes[key]


class Checker:
    """The check program, open in one sandboxed process of the check pool for one verification.

    The plans of a task's first submission, the judging after its run and any live calls all go
    to this one process, forked once per verification (not once per step). It holds no
    submission and serves one verification of one task. It opens on first use, before the
    caller takes a worker of the program's pool, and stays open through the submission's run:
    every verification takes the two pools in that order, so none can wait for a check worker
    while it holds a program worker that the holder of that check worker waits for.
    """

    def __init__(self, sandbox: Sandbox):
        self._box = check_sandbox(sandbox)
        self._session: Session | None = None

    def __call__(self, name: str, request: str) -> CallResult:
        """The check program's ``name(request)``.

        Raises:
            CheckSandboxFailed: the check's sandbox itself failed (no verdict is the program's).
        """
        if self._session is None:
            self._session = self._box.session(PROGRAM)
        session = self._session
        result = session.call(Call(name=name, args=[request])) if session.loaded else None
        if session.sandbox_error:
            raise CheckSandboxFailed(session.sandbox_error)
        if result is None:
            raise CheckSandboxFailed(f"the check program did not load: {session.load_error}")
        return result

    def close(self) -> None:
        if self._session is not None:
            self._session.close()


class LiveSession:
    """A session of the program opened on the first call that was not planned, closed with the
    verification."""

    def __init__(self, sandbox: Sandbox, program: str, mode: str):
        self._open = lambda: sandbox.session(program, mode=mode)
        self.session: Session | None = None

    def __call__(self, call: Call) -> CallResult:
        if self.session is None:
            self.session = self._open()
        if not self.session.loaded:
            return CallResult(error=self.session.load_error)
        return self.session.call(call)

    @property
    def load_error(self) -> str | None:
        return self.session.load_error if self.session is not None else None

    @property
    def sandbox_error(self) -> str | None:
        return self.session.sandbox_error if self.session is not None else None

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
