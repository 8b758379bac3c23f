"""Draw a problem from the families and compute its expected outputs with the reference.

The references are this package's own code, so they run on the host (in-process, fast and
deterministic); only agent code goes to the sandbox. The result is a task dict in the function
or stdin/stdout format, exactly what a user could write into a JSONL file.
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from textgym.envs.code.families import FAMILIES, Problem


def generate(rng: np.random.Generator, *, families: Sequence[str] | None = None, num_tests: int = 8) -> dict[str, Any]:
    """A task dict drawn with ``rng``: the family, then its parameters and test inputs."""
    names = sorted(families or FAMILIES)
    fam = FAMILIES[names[int(rng.integers(len(names)))]]
    problem = fam.make(rng, num_tests)
    outputs = reference_outputs(problem, fam.format)
    meta = {"family": fam.name}
    if fam.format == "stdio":
        tests = [{"input": i, "output": o} for i, o in zip(problem.inputs, outputs)]
        return {"prompt": problem.statement, "tests": tests, "solution": problem.solution, "metadata": meta}
    tests = [{"args": list(a), "expected": o} for a, o in zip(problem.inputs, outputs)]
    return {
        "prompt": problem.statement,
        "entry_point": problem.entry_point,
        "tests": tests,
        "solution": problem.solution,
        "metadata": meta,
    }


def reference_outputs(problem: Problem, fmt: str) -> list[Any]:
    """Run the trusted reference on every input: return values, or stdout for stdio problems."""
    namespace: dict[str, Any] = {"__name__": "__reference__"}
    code = compile(problem.solution, f"<reference {problem.entry_point or 'stdio'}>", "exec")
    if fmt == "function":
        exec(code, namespace)
        fn = namespace[problem.entry_point]
        return [fn(*copy.deepcopy(args)) for args in problem.inputs]
    outputs = []
    for text in problem.inputs:
        out = io.StringIO()
        stdin, sys.stdin = sys.stdin, io.StringIO(text)
        try:
            with contextlib.redirect_stdout(out):
                exec(code, {"__name__": "__main__"})
        finally:
            sys.stdin = stdin
        outputs.append(out.getvalue())
    return outputs
