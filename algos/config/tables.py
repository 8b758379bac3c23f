"""The field tables of docs/trainers.md, regenerated from the configs' own field docs:
``python -m textgym.algos.config.tables docs/trainers.md``.

It sits above the configs it lists, so that :mod:`~textgym.algos.config.fields`, which every
config imports, imports none of them."""

from __future__ import annotations

import sys
from pathlib import Path

from textgym.algos.config import GRPOConfig, SFTConfig, TrainConfig
from textgym.algos.config.fields import render_tables


def config_classes() -> dict[str, type]:
    """The configs whose field tables docs/trainers.md shows."""
    return {"GRPOConfig": GRPOConfig, "TrainConfig": TrainConfig, "SFTConfig": SFTConfig}


if __name__ == "__main__":
    for name in sys.argv[1:]:
        page = Path(name)
        page.write_text(render_tables(page.read_text(encoding="utf-8"), config_classes()), encoding="utf-8")
