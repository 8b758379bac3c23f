"""Training runs, one job per module: the GRPO loop (:func:`train`, :mod:`~textgym.algos.train.loop`),
one step of it (:mod:`~textgym.algos.train.step`), the episodes it plays
(:mod:`~textgym.algos.train.episodes`), the run directory (:mod:`~textgym.algos.train.run_dir`),
what it reports (:mod:`~textgym.algos.train.report`), the SFT warm start
(:mod:`~textgym.algos.train.sft`) and the two commands (:mod:`~textgym.algos.train.command`)."""

from textgym.algos.backends import load_backend
from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.grpo import GRPOConfig
from textgym.algos.train.loop import train

# The configs and the backend loader, where ``textgym.algos.train`` offered them before it was a package.
__all__ = ["GRPOConfig", "SFTConfig", "TrainConfig", "load_backend", "train"]
