"""One seed tree per run: every seed derives from the run's root seed by its place in the run.

A seed is ``numpy.random.SeedSequence(root, spawn_key=(phase, step, turn, row))`` reduced to 31
bits (what ``torch.Generator.manual_seed`` and ``jax.random.key`` both take). Distinct paths give
independent seeds, so no two sampler calls of a run share one (integer arithmetic such as
``root * K + step + call`` made turn 1 of step ``s`` reuse turn 0 of step ``s + 1``), and a seed is
a pure function of its path, so a resumed run draws exactly what the uninterrupted one would.

An episode's sampling draws are keyed the same way (:meth:`SeedTree.episode_key`): by its step,
its group and its index in the group, never by the process, batch or slot that plays it, so the
run samples the same episodes however it is split (see :mod:`textgym.draws`).

Held-out evaluation tasks are *not* drawn from the tree: they are fixed seeds
(:data:`EVAL_SEED_OFFSET` ``+ i``) on purpose, so runs with different ``--seed`` are scored on the
same tasks and their results compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

Phase = Literal["train_tasks", "train_sampler", "eval_sampler", "sft_tasks", "sft_order", "lora_init", "branch_starts", "branch_sampler"]
# New phases go last: a phase's index is part of its seeds.
PHASES: tuple[str, ...] = get_args(Phase)

TASK_SEEDS = 500_000
"""Training task seeds lie in ``[0, TASK_SEEDS)``, demonstration seeds in ``[SFT_SEED_OFFSET, +TASK_SEEDS)``."""
SFT_SEED_OFFSET = 500_000
"""Oracle demonstrations use task seeds from here (disjoint from GRPO's and evaluation's)."""
EVAL_SEED_OFFSET = 1_000_000
"""Held-out evaluation seeds start here and do not depend on the run's seed."""


@dataclass(frozen=True)
class SeedTree:
    """The seeds of one run, all derived from ``root``.

    Example:
        >>> tree = SeedTree(0)
        >>> tree.seed("train_sampler", step=3, turn=1) == tree.seed("train_sampler", step=4, turn=0)
        False
        >>> tree.task_seeds(0, 2) == SeedTree(1).task_seeds(0, 2)
        False
    """

    root: int

    def seed(self, phase: Phase, step: int = 0, turn: int = 0, row: int = 0) -> int:
        """The 31-bit seed at ``(phase, step, turn, row)``."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        sequence = np.random.SeedSequence(int(self.root), spawn_key=(PHASES.index(phase), int(step), int(turn), int(row)))
        return int(sequence.generate_state(1, np.uint32)[0] >> 1)

    def episode_key(self, phase: Phase, step: int, group: int, member: int, row: int = 0) -> int:
        """The 64-bit key of the draws of episode ``member`` of group ``group`` at ``(phase, step)``
        (``row``: the env's index in a mixture)."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        path = (PHASES.index(phase), int(step), int(row), int(group), int(member))
        return int(np.random.SeedSequence(int(self.root), spawn_key=path).generate_state(1, np.uint64)[0])

    def task_seeds(self, step: int, n: int) -> list[int]:
        """The ``n`` training task seeds of GRPO step ``step``, in ``[0, TASK_SEEDS)``."""
        return [self.seed("train_tasks", step, row=i) % TASK_SEEDS for i in range(n)]

    def demo_seeds(self, n: int) -> list[int]:
        """The task seeds of ``n`` oracle demonstrations, in ``[SFT_SEED_OFFSET, SFT_SEED_OFFSET + TASK_SEEDS)``."""
        return [SFT_SEED_OFFSET + self.seed("sft_tasks", row=i) % TASK_SEEDS for i in range(n)]

    def rng(self, phase: Phase, step: int = 0) -> np.random.Generator:
        """A numpy generator for a phase's own draws (e.g. the order of demonstrations)."""
        return np.random.default_rng(self.seed(phase, step))


def eval_seeds(n: int) -> list[int]:
    """The held-out evaluation task seeds: the same for every run, whatever its root seed."""
    return list(range(EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + n))
