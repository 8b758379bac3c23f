"""Several processes, one run: which rank does what, and the few collectives the loop needs.

A torch run under ``torchrun`` (or ``textgym train --nproc N``, which launches exactly that) has
``N`` ranks; a JAX run joins ``jax.distributed`` (``--coordinator HOST:PORT --num-processes N
--process-id I``, a cluster launcher's environment, or ``--backend jax --nproc N``), and its
processes' devices form one mesh. Each GRPO step, rank ``r`` collects its own contiguous block of the step's groups (a
group never straddles ranks, so advantages stay within the rank that played it), then every
rank gathers every block, in rank order, and packs the same global batch. The learner trains
each rank on its share of the rows with the loss weights of the *global* token count, and DDP's
all-reduce adds the shares up, so N ranks take exactly the step one process takes on that batch;
metrics computed from the gathered rollouts are the same on every rank. Rank 0 alone writes the
run's files (checkpoints, metrics, rollouts, ``summary.json``).

Without a process group every function here is the one-process case: rank 0 of a world of 1, no
waiting, nothing to gather. The framework's side lives in each backend's ``processes`` module (the
same functions in both), imported only when a run is distributed.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from textgym.error import TextGymError

T = TypeVar("T")

COORDINATOR_WAIT = 60.0  # seconds a process waits for the coordinator to accept connections

_jax_joined = False  # this process joined jax.distributed (through init)


def launched_world_size() -> int:
    """The world size a launcher (``torchrun``, Slurm's ``srun`` with the variables set) gave this process."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init(backend: str, *, coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None) -> None:
    """Join the processes of a launched run; a run that was not launched as several is left alone.

    Torch (``torchrun`` sets ``WORLD_SIZE``, ``RANK``, ...): gloo on a CPU, NCCL on GPUs (each rank
    on ``cuda:LOCAL_RANK``). JAX: ``jax.distributed.initialize`` from the three arguments, or from a
    cluster launcher's environment (Slurm, Open MPI, TPU pods, ``JAX_COORDINATOR_ADDRESS``), with
    gloo collectives on CPUs so that local processes form one mesh.

    Raises:
        TextGymError: The coordinator cannot be reached, or the backend and the launcher disagree.
        ValueError: Only some of ``coordinator``, ``num_processes`` and ``process_id`` given.
    """
    if backend == "jax":
        _init_jax(coordinator, num_processes, process_id)
        return
    if coordinator is not None or num_processes is not None or process_id is not None:
        raise ValueError("--coordinator, --num-processes and --process-id are for the JAX backend; torch runs under torchrun")
    if launched_world_size() <= 1:
        return
    if backend != "torch":
        raise TextGymError(
            f"this process was launched as one of {launched_world_size()} torch ranks, but the backend is "
            f"{backend!r}; run the JAX backend with --nproc, or with --coordinator/--num-processes/--process-id"
        )
    group = _backend_processes("torch")
    if group.joined():
        return
    _die_with_launcher()
    group.join()


def _die_with_launcher() -> None:
    """Have the kernel kill this rank when its launcher dies (Linux; elsewhere nothing changes).

    ``torchrun`` starts each rank in a session of its own, so a ``torchrun`` killed by SIGKILL
    (which it cannot pass on: a job killed, the launcher's process group killed) would leave its
    ranks running unsupervised, still writing into the run directory that the resumed run uses.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    launcher = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != launcher:  # it died before the kernel was told
        os.kill(os.getpid(), signal.SIGKILL)


def _init_jax(coordinator: str | None, num_processes: int | None, process_id: int | None) -> None:
    global _jax_joined
    given = (coordinator, num_processes, process_id)
    if all(g is None for g in given):
        if not _launched_as_jax_processes():
            return
        explicit: dict[str, Any] = {}
    elif coordinator is None or num_processes is None or process_id is None:
        raise ValueError("--coordinator HOST:PORT, --num-processes N and --process-id I go together")
    elif not 0 <= process_id < num_processes:
        raise ValueError(f"--process-id must be in [0, {num_processes}), got {process_id}")
    else:
        if process_id != 0:  # process 0 starts the coordinator; the others must reach it
            _wait_for(coordinator, COORDINATOR_WAIT)
        explicit = {"coordinator_address": coordinator, "num_processes": num_processes, "process_id": process_id}
    group = _backend_processes("jax")
    if not group.joined():
        try:
            group.join(explicit, int(COORDINATOR_WAIT))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TextGymError(f"cannot join the JAX processes (coordinator {coordinator or 'from the environment'}): {first}") from None
    _jax_joined = True


def _launched_as_jax_processes() -> bool:
    """Whether a cluster launcher started this process as one of several, in a way that
    ``jax.distributed.initialize()`` detects by itself (Slurm, Open MPI, TPU pods) or was told."""
    env = os.environ
    return (
        bool(env.get("JAX_COORDINATOR_ADDRESS"))
        or int(env.get("SLURM_NTASKS", "1")) > 1
        or int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1
        or "," in env.get("TPU_WORKER_HOSTNAMES", "")
    )


def _wait_for(address: str, seconds: float) -> None:
    """Connect to ``host:port`` until it accepts, for at most ``seconds``; then one clear error."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TextGymError(f"cannot reach the JAX coordinator at {address} after {seconds:.0f} s: {exc.strerror or exc}") from None
            time.sleep(0.5)


def _backend_processes(backend: str) -> Any:
    """``textgym.algos.<backend>.processes``: the framework's side of the functions here."""
    return importlib.import_module(f"textgym.algos.{backend}.processes")


def _group() -> Any:
    """The ``processes`` module of the backend whose processes this one joined, else None (a
    torch process group counts only when torch is imported: torch is never imported here)."""
    if _jax_joined:
        return _backend_processes("jax")
    if "torch" in sys.modules:
        group = _backend_processes("torch")
        if group.joined():
            return group
    return None


def rank() -> int:
    group = _group()
    return group.rank() if group is not None else 0


def world_size() -> int:
    group = _group()
    return group.world_size() if group is not None else 1


def is_writer() -> bool:
    """Whether this process writes the run's files (rank 0)."""
    return rank() == 0


def barrier() -> None:
    group = _group()
    if group is not None:
        group.barrier()


def writer_first(make: Callable[[], T]) -> T:
    """``make()`` on rank 0, then on the others: what rank 0 creates on disk (a tiny model, a
    converted checkpoint) the others then find instead of writing it at the same time."""
    if world_size() == 1:
        return make()
    if is_writer():
        result = make()
        barrier()
        return result
    barrier()
    return make()


def writer_only(act: Callable[[], Any]) -> None:
    """``act()`` on rank 0 alone (removing or moving run files), then every rank waits for it."""
    if is_writer():
        act()
    barrier()


def gather(items: Sequence[T]) -> list[T]:
    """Every rank's ``items``, concatenated in rank order, on every rank."""
    group = _group()
    return list(items) if group is None else group.gather(items)


def my_block(n: int, what: str = "prompts_per_step") -> range:
    """This rank's contiguous block of ``n`` groups.

    Raises:
        ValueError: ``n`` is not a multiple of the world size (a group would straddle ranks).
    """
    world = world_size()
    if n % world:
        raise ValueError(f"{what} ({n}) must be a multiple of the number of processes ({world}): each process plays whole GRPO groups")
    share = n // world
    return range(rank() * share, (rank() + 1) * share)


def destroy() -> None:
    """Leave the process group at the end of a run."""
    global _jax_joined
    group = _group()
    if group is not None:
        group.leave()
    _jax_joined = False
