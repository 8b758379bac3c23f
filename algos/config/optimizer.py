"""The optimiser of both backends' learners: AdamW, a global gradient-norm clip, and a learning
rate that warms up linearly, then stays or decays. GRPO takes its settings from
:class:`~textgym.algos.config.GRPOConfig`'s fields, the SFT warm start has its own
(:attr:`~textgym.algos.config.SFTConfig.optimizer`).

:meth:`OptimizerConfig.learning_rate` is the schedule, written once: torch sets each step's rate
from it, and JAX's optax reads it through a table of its values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

LRSchedule = Literal["constant", "linear", "cosine"]


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig:
    """AdamW's settings and the learning-rate schedule.

    Example:
        >>> schedule = OptimizerConfig(lr=1.0, lr_schedule="linear", warmup_steps=2, total_steps=6)
        >>> [schedule.learning_rate(step) for step in range(8)]
        [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    """

    lr: float
    lr_schedule: LRSchedule = "constant"
    warmup_steps: int = 0
    total_steps: int | None = None
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0

    @property
    def decay_steps(self) -> int:
        """The schedule's horizon: ``total_steps``, or 1000 when no run has derived it."""
        return 1000 if self.total_steps is None else self.total_steps

    def learning_rate(self, step: int) -> float:
        """The rate of optimiser step ``step`` (0-based): a linear warm-up from 0 to ``lr`` over
        ``warmup_steps``, then ``lr``, or a linear or cosine decay to 0 at ``total_steps``."""
        if step < self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if self.lr_schedule == "constant":
            return self.lr
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.decay_steps - self.warmup_steps))
        if self.lr_schedule == "linear":
            return self.lr * (1.0 - progress)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * progress))

    def learning_rates(self) -> list[float]:
        """:meth:`learning_rate` of steps ``0 .. max(warmup_steps, decay_steps)``; every later step
        has the last one's."""
        return [self.learning_rate(step) for step in range(max(self.warmup_steps, self.decay_steps) + 1)]
