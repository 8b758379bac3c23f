"""The learning curve of a run as a PNG: training reward and held-out success against steps."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from textgym.error import require


def plot_curve(records: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    """Draw ``train/reward`` (and ``train/success``) per step and ``eval/success`` where evaluated.

    Step 0 is the model GRPO started from (after the SFT warm start, when there was one). A
    mixture's records (``eval/<env>/success``) add one held-out line per env.
    """
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if "train/reward" in r]
    evals = [r for r in records if "eval/success" in r]
    fig, ax = plt.subplots(figsize=(9, 4))
    if train:
        ax.plot([r["step"] for r in train], [r["train/reward"] for r in train], label="train reward (mean of rollouts)", alpha=0.6)
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval/success"] for r in evals], "o-", label="held-out success", linewidth=2)
        for key in sorted(k for k in evals[0] if k.startswith("eval/") and k.endswith("/success") and k != "eval/success"):
            ax.plot([r["step"] for r in evals], [r[key] for r in evals], ".--", label=f"held-out success, {key[5:-8]}")
    ax.set_xlabel("GRPO step")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # beside the axes: it never hides a curve
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
