"""Every setting of a run, once: documented fields (:mod:`~textgym.algos.config.fields`), the
configs built from them (``GRPOConfig``, ``TrainConfig``, ``SFTConfig``, and the ``OptimizerConfig``
both learners take theirs from), the flags generated from those (:mod:`~textgym.algos.config.flags`)
and the named presets (:mod:`~textgym.algos.config.presets`), where flags and a preset merge into
a config in one place.

Its modules import nothing of ``textgym.algos`` beyond the seed tree's offsets and the model
presets' names: every other part reads its settings from here."""

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.config.optimizer import OptimizerConfig
from textgym.algos.config.run import SFTConfig, TrainConfig

__all__ = ["GRPOConfig", "OptimizerConfig", "SFTConfig", "TrainConfig"]
