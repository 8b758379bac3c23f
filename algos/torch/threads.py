"""The torch backend's intra-op CPU threads. :mod:`textgym.algos.jax.threads` has the same function."""

from __future__ import annotations

import torch


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
