"""MBPP-style assertions that call the program's helpers by name, as in the program's namespace."""

from __future__ import annotations

import pytest

from textgym.envs.code import CodeEnv

# MBPP 601: the test builds ``Pair`` objects with the program's own class and passes them in.
PAIR = {
    "text": "Find the longest chain which can be formed from the given set of pairs.",
    "test_list": [
        "assert max_chain_length([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3",
        "assert max_chain_length([Pair(1, 2), Pair(3, 4), Pair(5, 6), Pair(7, 8)], 4) == 4",
    ],
    "code": (
        "class Pair(object):\n"
        "    def __init__(self, a, b):\n"
        "        self.a = a\n"
        "        self.b = b\n"
        "def max_chain_length(arr, n):\n"
        "    mcl = [1 for i in range(n)]\n"
        "    for i in range(1, n):\n"
        "        for j in range(0, i):\n"
        "            if arr[i].a > arr[j].b and mcl[i] < mcl[j] + 1:\n"
        "                mcl[i] = mcl[j] + 1\n"
        "    return max(mcl)\n"
    ),
}
HELPER = {
    "text": "Sort a list; the tests check the result with the program's own is_sorted helper.",
    "test_list": ["assert is_sorted(sort_list([3, 1, 2]))", "assert not is_sorted([2, 1])", "assert sort_list([2, 1]) == [1, 2]"],
    "code": "def is_sorted(xs):\n    return all(a <= b for a, b in zip(xs, xs[1:]))\n\ndef sort_list(xs):\n    return sorted(xs)\n",
}


@pytest.fixture(scope="module")
def env():
    e = CodeEnv(max_attempts=1)
    yield e
    e.close()


def solve(env, task, code: str) -> float:
    env.reset(seed=0, options={"task": task})
    return env.step(f"```python\n{code}\n```")[1]


def test_objects_the_program_makes_can_be_passed_back_to_it(env):
    assert solve(env, PAIR, PAIR["code"]) == 1.0
    assert solve(env, PAIR, PAIR["code"].replace("mcl[j] + 1\n", "mcl[j]\n")) == 0.0


def test_an_object_of_the_program_decides_nothing_on_the_host(env):
    """A ``Pair`` stays in the sandbox: comparing it, or asking its truth, fails the test."""
    task = {"text": "t", "test_list": ["assert Pair(1, 2) == Pair(1, 2)", "assert bool(Pair(1, 2))"]}
    code = "class Pair:\n    def __init__(self, a, b):\n        pass\n    def __eq__(self, other):\n        return True\n    def __bool__(self):\n        return True\n"
    env.reset(seed=0, options={"task": task})
    tests = env.step(f"```python\n{code}\n```")[4]["verification"]["tests"]
    assert [t["passed"] for t in tests] == [False, False]


def test_a_helper_the_program_defines_is_the_programs(env):
    assert solve(env, HELPER, HELPER["code"]) == 1.0
    assert solve(env, HELPER, HELPER["code"].replace("a <= b", "True")) == 0.0
