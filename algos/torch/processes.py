"""The torch side of a run of several processes (:mod:`textgym.algos.distributed.processes`):
the process group ``torchrun`` starts and the collectives the loop needs.
:mod:`textgym.algos.jax.processes` has the same functions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist


def joined() -> bool:
    return dist.is_available() and dist.is_initialized()


def join() -> None:
    """Gloo on a CPU, NCCL on GPUs (each rank on ``cuda:LOCAL_RANK``)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")


def rank() -> int:
    return dist.get_rank()


def world_size() -> int:
    return dist.get_world_size()


def barrier() -> None:
    dist.barrier()


def gather(items: Sequence[Any]) -> list[Any]:
    """Every rank's ``items`` in rank order."""
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, list(items))
    return [item for part in parts for item in part]


def leave() -> None:
    dist.destroy_process_group()
