"""Reward profiling: ``textgym eval <id> --policy ... [--policy ...]`` compares policies on the same seeds.

Each policy plays ``--episodes`` tasks (seeds ``S``, ``S+1``, ...) ``--k`` times each. We report
success (pass@1), the unbiased pass@k and pass^k estimators over the ``k`` attempts per task,
mean turns and reward, success by task category when the env has categories, a table, an
optional PNG plot and the rollouts as JSONL. A profile with the oracle near 1.0 and random near
0.0 is the first check of a new env's verifier; a real model lands in between.

Example::

    textgym eval textgym/Workplace-v0 --policy oracle --policy random \\
        --policy openai:Qwen/Qwen3-8B@http://localhost:8000/v1 --episodes 50 --k 4 --plot profile.png

A ``model:<dir|file.gguf|preset>`` policy plays in token space: its episodes run through a
:class:`~textgym.wrappers.TokenObservation` of the same env and seeds, batched through the
``--backend``'s sampler, and land in the same table, plot and JSONL (with their token ids).
"""

from textgym.evaluate.estimators import pass_at_k, pass_hat_k
from textgym.evaluate.plotting import plot
from textgym.evaluate.reward_profile import PolicyReport, evaluate, task_categories

__all__ = ["PolicyReport", "evaluate", "pass_at_k", "pass_hat_k", "plot", "task_categories"]
