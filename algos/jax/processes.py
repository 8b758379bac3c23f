"""The JAX side of a run of several processes (:mod:`textgym.algos.distributed.processes`):
joining ``jax.distributed`` and the collectives the loop needs. :mod:`textgym.algos.torch.processes`
has the same functions."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils


def joined() -> bool:
    return jax.distributed.is_initialized()


def join(explicit: dict[str, Any], timeout: int) -> None:
    """``jax.distributed.initialize`` (from ``explicit`` or a cluster launcher's environment),
    with gloo collectives on CPUs so that local processes form one mesh."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**explicit, initialization_timeout=timeout)


def rank() -> int:
    return jax.process_index()


def world_size() -> int:
    return jax.process_count()


def barrier() -> None:
    multihost_utils.sync_global_devices("textgym")


def gather(items: Sequence[Any]) -> list[Any]:
    """Every process's ``items`` in process order: pickled bytes, padded to the longest, all-gathered."""
    data = np.frombuffer(pickle.dumps(list(items)), np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.array([data.size], np.int64))).reshape(-1)
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: data.size] = data
    rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(sizes), -1)
    return [item for row, n in zip(rows, sizes) for item in pickle.loads(row[:n].tobytes())]


def leave() -> None:
    jax.distributed.shutdown()
