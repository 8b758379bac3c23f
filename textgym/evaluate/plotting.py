"""The profile as a PNG bar chart (matplotlib, an optional extra imported only here)."""

from __future__ import annotations

import numpy as np

from textgym.error import require
from textgym.evaluate.reward_profile import PolicyReport


def plot(reports: list[PolicyReport], path: str, title: str = "") -> None:
    """A grouped bar plot of success, pass@k and pass^k per policy (and success by category)."""
    Figure = require("matplotlib.figure", "plot").Figure  # lazy: plotting is optional

    k = reports[0].k
    categories = sorted({c for r in reports for c in r.by_category})
    panels = [("metric", ["success", f"pass@{k}", f"pass^{k}"], lambda r: [r.success, r.pass_at_k, r.pass_hat_k])]
    if categories:
        panels.append(("category", categories, lambda r: [r.by_category.get(c, 0.0) for c in categories]))
    fig = Figure(figsize=(6 + 0.6 * len(categories), 3.5 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    width = 0.8 / len(reports)
    for ax, (xlabel, labels, values) in zip(axes, panels):
        x = np.arange(len(labels))
        for i, r in enumerate(reports):
            bars = ax.bar(x + (i - (len(reports) - 1) / 2) * width, values(r), width, label=r.name)
            ax.bar_label(bars, fmt="%.2f", fontsize="x-small")
        ax.set_xticks(x, labels, rotation=20 if xlabel == "category" else 0)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("success rate" if xlabel == "category" else "rate")
        ax.legend(fontsize="small")
    axes[0].set_title(title)
    fig.savefig(path, dpi=120)
