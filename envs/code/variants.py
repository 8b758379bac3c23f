"""Plausible wrong variants of a reference solution, for Code-v0's noisy demonstrator.

A demonstrator that sometimes submits a near miss first and the reference after the failing-test
feedback shows a model what a second attempt is for; its warm start then leaves reinforcement
learning something to improve. The near miss is the slip a reader makes when copying a statement
into code: one of the task's numbers written wrong (the ``3`` of "divisible by 3" as ``4``), else
another integer of the code, else a comparison off by its boundary (``>`` for ``>=``).
"""

from __future__ import annotations

import re

import numpy as np

_INT = re.compile(r"(?<!\w)(?<!\d\.)\d+(?!\w|\.\d)")  # integers, not parts of names or decimals
_COMPARISONS = {">=": ">", "<=": "<", ">": ">=", "<": "<=", "==": "!="}
_COMPARISON = re.compile(r"(?<![<>=!])(>=|<=|==|>|<)(?![<>=])")
_STEPS = (-2, -1, 1, 2)


def wrong_variant(solution: str, statement: str, rng: np.random.Generator) -> str:
    """``solution`` with one slip drawn with ``rng``; ``solution`` itself if it has nothing to slip on.

    Example:
        >>> code = "def f(xs):\\n    return sum(x for x in xs if x % 3 == 0)\\n"
        >>> wrong_variant(code, "divisible by 3", np.random.default_rng(0)) != code
        True
    """
    numbers = list(_INT.finditer(solution))
    stated = {int(n) for n in _INT.findall(statement)}
    candidates = [m for m in numbers if int(m.group()) in stated] or numbers
    if candidates:
        m = candidates[int(rng.integers(len(candidates)))]
        value = int(m.group())
        steps = [s for s in _STEPS if value + s >= 0]
        new = value + steps[int(rng.integers(len(steps)))]
        return solution[: m.start()] + str(new) + solution[m.end() :]
    comparisons = list(_COMPARISON.finditer(solution))
    if comparisons:
        m = comparisons[int(rng.integers(len(comparisons)))]
        return solution[: m.start()] + _COMPARISONS[m.group()] + solution[m.end() :]
    return solution
