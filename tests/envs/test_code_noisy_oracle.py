"""Code-v0's noisy demonstrator: a near miss first, the reference after the feedback, drawn from the task."""

from __future__ import annotations

import numpy as np
import pytest

from textgym.envs.code import CodeEnv
from textgym.envs.code.families import FAMILIES
from textgym.envs.code.generator import generate
from textgym.envs.code.variants import wrong_variant

SHORT = ["sum_multiples", "count_above", "clamp_list", "chunk_sums", "digit_power_sum", "long_word_lengths"]


@pytest.fixture(scope="module")
def env():
    e = CodeEnv(max_attempts=2, families=SHORT)
    yield e
    e.close()


def _play(env: CodeEnv, seed: int, noise: float) -> tuple[list[str], float]:
    env.reset(seed=seed)
    actions, terminated, reward = [], False, 0.0
    while not terminated:
        actions.append(env.oracle_action(noise=noise))
        _, reward, terminated, _, _ = env.step(actions[-1])
    return actions, reward


def test_noise_zero_is_the_reference(env):
    env.reset(seed=0)
    assert env.oracle_action(noise=0.0) == env.oracle_action() == f"```python\n{env.task.answer['solution']}\n```"


def test_the_noisy_demonstrator_still_solves_every_task(env):
    second = 0
    for seed in range(24):
        actions, reward = _play(env, seed, noise=1.0)
        assert reward == 1.0 and len(actions) <= 2
        if len(actions) == 2:  # a near miss can pass every test; one that fails is followed by the reference
            second += 1
            assert actions[0] != actions[1] == f"```python\n{env.task.answer['solution']}\n```"
    assert second >= 18


def test_the_draw_is_a_function_of_the_task(env):
    runs = [[_play(env, seed, noise=0.5)[0] for seed in range(16)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert 2 < sum(len(a) == 2 for a in runs[0]) < 14  # about half the tasks get a near miss first


def test_the_near_miss_miscopies_a_number_of_the_statement(env):
    env.reset(seed=1)
    reference = env.task.answer["solution"]
    miss = env.oracle_action(noise=1.0)
    assert miss != f"```python\n{reference}\n```"
    assert [a for a, b in zip(miss.splitlines()[1:], reference.splitlines()) if a != b]  # one line changed


def test_variants_of_every_family_compile_and_nearly_all_differ():
    changed = 0
    for name in FAMILIES:
        task = generate(np.random.default_rng(3), families=[name])
        variant = wrong_variant(task["solution"], task["prompt"], np.random.default_rng(0))
        compile(variant, name, "exec")
        changed += variant != task["solution"]
    assert changed >= len(FAMILIES) - 4  # four references have no number or comparison to slip on


def test_a_solution_without_numbers_or_comparisons_stays_as_it_is():
    code = "def f(s):\n    return s.upper()\n"
    assert wrong_variant(code, "upper case", np.random.default_rng(0)) == code
