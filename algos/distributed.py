"""Several processes, one run: which rank does what, and the few collectives the loop needs.

A run under ``torchrun`` (or ``textgym train --nproc N``, which launches exactly that) has ``N``
ranks. Each GRPO step, rank ``r`` collects its own contiguous block of the step's groups (a
group never straddles ranks, so advantages stay within the rank that played it), then every
rank gathers every block, in rank order, and packs the same global batch. The learner trains
each rank on its share of the rows with the loss weights of the *global* token count, and DDP's
all-reduce adds the shares up, so N ranks take exactly the step one process takes on that batch;
metrics computed from the gathered rollouts are the same on every rank. Rank 0 alone writes the
run's files (checkpoints, metrics, rollouts, ``summary.json``).

Without ``torch.distributed`` initialised every function here is the one-process case: rank 0 of
a world of 1, no waiting, nothing to gather. This module imports torch only when a run is
distributed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from textgym.error import TextGymError

T = TypeVar("T")

LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def launched_world_size() -> int:
    """The world size a launcher (``torchrun``, Slurm's ``srun`` with the variables set) gave this process."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init(backend: str) -> None:
    """Join the process group of a launched run (``torchrun`` sets ``WORLD_SIZE``, ``RANK``, ...).

    Torch: gloo on a CPU, NCCL on GPUs (each rank on ``cuda:LOCAL_RANK``). A run that was not
    launched as several processes is left alone.

    Raises:
        TextGymError: The JAX backend under a torch launcher (it has its own, see docs/scaling.md).
    """
    if launched_world_size() <= 1:
        return
    if backend != "torch":
        raise TextGymError(f"this process was launched as one of {launched_world_size()} torch ranks, but the backend is "
                           f"{backend!r}; run the JAX backend with --nproc, or with --coordinator/--num-processes/--process-id")
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")


def _dist() -> Any:
    """``torch.distributed`` when a process group is up, else None (torch is never imported here)."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def rank() -> int:
    dist = _dist()
    return dist.get_rank() if dist is not None else 0


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


def is_writer() -> bool:
    """Whether this process writes the run's files (rank 0)."""
    return rank() == 0


def barrier() -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier()


def writer_first(make: Callable[[], T]) -> T:
    """``make()`` on rank 0, then on the others: what rank 0 creates on disk (a tiny model, a
    converted checkpoint) the others then find instead of writing it at the same time."""
    if world_size() == 1:
        return make()
    result = make() if is_writer() else None
    barrier()
    return result if is_writer() else make()


def writer_only(act: Callable[[], Any]) -> None:
    """``act()`` on rank 0 alone (removing or moving run files), then every rank waits for it."""
    if is_writer():
        act()
    barrier()


def gather(items: Sequence[T]) -> list[T]:
    """Every rank's ``items``, concatenated in rank order, on every rank."""
    dist = _dist()
    if dist is None:
        return list(items)
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, list(items))
    return [item for part in parts for item in part]


def my_block(n: int, what: str = "prompts_per_step") -> range:
    """This rank's contiguous block of ``n`` groups.

    Raises:
        ValueError: ``n`` is not a multiple of the world size (a group would straddle ranks).
    """
    world = world_size()
    if n % world:
        raise ValueError(f"{what} ({n}) must be a multiple of the number of processes ({world}): "
                         "each process plays whole GRPO groups")
    share = n // world
    return range(rank() * share, (rank() + 1) * share)


def destroy() -> None:
    """Leave the process group at the end of a run."""
    dist = _dist()
    if dist is not None:
        dist.destroy_process_group()
