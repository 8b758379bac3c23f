"""The JAX backend's CPU threads, set before JAX is imported: XLA has no thread setting and sizes
its pools once, from the CPUs the process may use, at its first import (so this module imports no
JAX). :mod:`textgym.algos.torch.threads` has the same function."""

from __future__ import annotations

import os
import sys


def set_threads(threads: int) -> None:
    """1 turns off XLA's multi-threaded Eigen; N > 1 restricts the process to N CPUs, rotated by
    process id so that runs side by side do not share them. A JAX already imported keeps its threads."""
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
