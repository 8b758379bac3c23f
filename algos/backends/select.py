"""Choosing a backend: import ``textgym.algos.jax`` or ``textgym.algos.torch`` when a run asks for
it (with its CPU threads set first), and build its learner, on a JAX device mesh when one is given.

Both backend packages export ``load_model`` and ``Learner`` (:data:`textgym.algos.backends.contract.CONTRACT`),
so nothing after this point depends on which one was chosen.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from textgym.algos.config.mesh import parse_mesh
from textgym.algos.config.optimizer import OptimizerConfig

if TYPE_CHECKING:
    from textgym.policies.model import ModelPolicy

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
    module = importlib.import_module(BACKENDS[name])
    if threads is not None:
        importlib.import_module(f"{BACKENDS[name]}.threads").set_threads(int(threads))
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


def processes_mesh(backend: ModuleType) -> str | None:
    """The mesh of a run of several processes: one data-parallel axis over every process's devices
    on a backend with meshes (JAX), else None (torch's ranks are data-parallel without one)."""
    return f"data={backend.device_count()}" if hasattr(backend, "device_count") else None


def make_learner(
    backend: ModuleType,
    model: Any,
    config: Any,
    mesh: str | None = None,
    data_parallel: str = "ddp",
    optimizer: OptimizerConfig | None = None,
) -> Any:
    """``backend.Learner(model, config)``, on a JAX device mesh when ``mesh`` is given, sharded over
    torch's ranks with ``data_parallel="fsdp"``, with ``optimizer``'s settings instead of ``config``'s
    when given."""
    options: dict[str, Any] = {} if optimizer is None else {"optimizer": optimizer}
    if mesh is None:
        return backend.Learner(model, config, **options, **({"data_parallel": data_parallel} if data_parallel != "ddp" else {}))
    if not hasattr(backend, "make_mesh"):
        raise ValueError("--mesh is for the JAX backend; torch runs data-parallel ranks with torchrun")
    return backend.Learner(model, config, mesh=backend.make_mesh(**parse_mesh(mesh)), **options)


def load_model_policy(
    model: str,
    *,
    backend: str = "torch",
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    seed: int = 0,
    threads: int | None = None,
    progress: bool = True,
) -> ModelPolicy:
    """A :class:`~textgym.policies.model.ModelPolicy` sampling from ``model`` with the ``jax`` or
    ``torch`` backend's language model.

    Args:
        model: A HF directory, a ``.gguf`` file (converted once, cached) or a preset
            (``tiny``, ``smollm2-135m``): see :func:`textgym.algos.models.resolve`.
        backend: ``jax`` or ``torch``.
        max_new_tokens, temperature, seed: As for the ``ModelPolicy`` constructor.
        threads: The backend's intra-op CPU threads (see :func:`load_backend`).
        progress: Show a GGUF conversion's progress.

    Raises:
        FileNotFoundError: ``model`` names nothing loadable, or its directory has no tokenizer.
    """
    from textgym.algos import models
    from textgym.policies.model import ModelPolicy

    models.quiet_transformers()
    path = models.resolve(model, seed=seed, progress=progress)
    tokenizer = models.load_tokenizer(path)  # before the backend: a missing tokenizer fails fast
    policy = ModelPolicy(load_backend(backend, threads).load_model(path), max_new_tokens, temperature, seed)
    policy.tokenizer = tokenizer
    return policy
