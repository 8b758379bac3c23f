"""Choosing a backend: import ``textgym.algos.jax`` or ``textgym.algos.torch`` when a run asks for
it (with its CPU threads set first), and build its learner, on a JAX device mesh when one is given.

Both backend packages export ``load_policy`` and ``Learner`` (:data:`textgym.algos.lazy.CONTRACT`),
so nothing after this point depends on which one was chosen.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

BACKENDS = {"jax": "textgym.algos.jax", "torch": "textgym.algos.torch"}
"""Backend name -> the package that implements it."""


def load_backend(name: str, threads: int | None = None) -> ModuleType:
    """``textgym.algos.jax`` or ``textgym.algos.torch`` (imported now, not before).

    Args:
        name: ``jax`` or ``torch``.
        threads: Intra-op CPU threads (None: the framework's default). One thread is the fastest
            for tiny models, whose matrices are too small to split, and on shared machines,
            where threads that spin-wait on each other are slower than one. Torch sets its
            thread count; XLA has no such setting and sizes its pools once, from the CPUs the
            process may use, when JAX is first imported: 1 turns off its multi-threaded Eigen,
            N > 1 restricts the process to N CPUs (rotated by process id, so that runs side by
            side do not share them). A JAX already imported keeps its threads (a warning says so).

    Raises:
        ValueError: ``name`` is not a backend, or ``threads < 1``.
    """
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {name!r}")
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads is not None and name == "jax":
        _limit_xla_threads(int(threads))
    module = importlib.import_module(BACKENDS[name])
    if threads is not None and name == "torch":
        import torch

        torch.set_num_threads(int(threads))
    return module


def idle_cpus() -> int:
    """The CPUs this process may use that the last minute's load average left free, at least 1.

    A default for a command's ``--threads``: an intra-op thread whose core another process keeps
    busy spin-waits at every barrier, so on a loaded machine two threads cost several times the
    CPU of one (``textgym eval`` of SmolLM2-135M on 2 cores at load 9: 7x the CPU seconds, see
    docs/benchmarks.md), while on an idle machine they share the work.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(cpus, cpus - round(load)))


def _limit_xla_threads(threads: int) -> None:
    if "jax" in sys.modules:
        import warnings

        warnings.warn(f"JAX is already imported: threads={threads} cannot change its thread pools", stacklevel=3)
        return
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()
        return
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if threads < len(cpus):
        start = os.getpid() % len(cpus)
        os.sched_setaffinity(0, {cpus[(start + i) % len(cpus)] for i in range(threads)})


def parse_mesh(spec: str) -> dict[str, int]:
    """``"data=N,fsdp=M"`` (either axis may be left out: 1 for data, the rest of the devices for fsdp).

    Example:
        >>> parse_mesh("data=2,fsdp=4")
        {'data': 2, 'fsdp': 4}

    Raises:
        ValueError: Another axis, a repeated one, or a size that is not a positive integer.
    """
    axes: dict[str, int] = {}
    for part in spec.split(","):
        name, _, size = part.strip().partition("=")
        if name not in ("data", "fsdp") or name in axes or not size.isdigit() or int(size) < 1:
            raise ValueError(f"expected a mesh like 'data=2,fsdp=4', got {spec!r}")
        axes[name] = int(size)
    return axes


def make_learner(backend: ModuleType, policy: Any, config: Any, mesh: str | None = None, data_parallel: str = "ddp") -> Any:
    """``backend.Learner(policy, config)``, on a JAX device mesh when ``mesh`` is given, sharded over
    torch's ranks with ``data_parallel="fsdp"``."""
    if mesh is None:
        return backend.Learner(policy, config, **({"data_parallel": data_parallel} if data_parallel != "ddp" else {}))
    if not hasattr(backend, "make_mesh"):
        raise ValueError("--mesh is for the JAX backend; torch runs data-parallel ranks with torchrun")
    return backend.Learner(policy, config, mesh=backend.make_mesh(**parse_mesh(mesh)))
