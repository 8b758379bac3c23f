"""``textgym train --nproc N`` (and ``textgym sft --nproc N``): the same command as N processes.

With the torch backend this is exactly ``torchrun --standalone --nproc-per-node N -m textgym.cli
train ...`` (the other flags passed on unchanged), so what a user learns here carries over to
``torchrun`` on a cluster (docs/scaling.md). With the JAX backend it starts N local processes of
the same command plus ``--coordinator 127.0.0.1:PORT --num-processes N --process-id I``, the flags
a user gives each process on a cluster. Before anything starts, the checks that every rank
would fail alike run once here, so a bad world size or a checkpoint of another world size is one
line, not N tracebacks.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--nproc`` option (a launcher's, not the run configuration's)."""
    group = parser.add_argument_group("processes (docs/scaling.md)")
    group.add_argument(
        "--nproc",
        type=int,
        default=1,
        metavar="N",
        help="run as N local processes: torch launches 'torchrun --standalone --nproc-per-node N' "
        "(gloo on CPUs, NCCL on GPUs), JAX N processes of one jax.distributed mesh; each "
        "process plays its share of every step's groups",
    )
    group.add_argument(
        "--coordinator", default=None, metavar="HOST:PORT", help="JAX: the address of process 0, which every process of the run is given"
    )
    group.add_argument("--num-processes", type=int, default=None, metavar="N", help="JAX: the processes of the run")
    group.add_argument("--process-id", type=int, default=None, metavar="I", help="JAX: this process's index, 0 to N-1")


def wants_launch(args: argparse.Namespace) -> bool:
    """Whether this invocation should start the processes (it is not one of them already)."""
    if args.nproc < 1:
        raise ValueError(f"--nproc must be >= 1, got {args.nproc}")
    return args.nproc > 1 and "WORLD_SIZE" not in os.environ


def process_flags(args: argparse.Namespace) -> dict[str, object]:
    """The JAX process flags as :func:`textgym.algos.distributed.processes.init`'s keyword arguments."""
    return {"coordinator": args.coordinator, "num_processes": args.num_processes, "process_id": args.process_id}


def without_nproc(argv: Sequence[str]) -> list[str]:
    """``argv`` without its ``--nproc N`` (or ``--nproc=N``).

    Example:
        >>> without_nproc(["train", "--nproc", "2", "--env", "x", "--nproc=3"])
        ['train', '--env', 'x']
    """
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def entry() -> list[str]:
    """What each process runs: ``-m textgym.cli``, or the script that called ``textgym.cli.main``
    (a project's own script registers its own envs before it hands over to textgym)."""
    import textgym.cli

    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") and os.path.isfile(sys.argv[0]) else None
    if script is None or os.path.samefile(script, textgym.cli.__file__):
        return ["-m", "textgym.cli"]
    return [script]


def torchrun_command(nproc: int, argv: Sequence[str]) -> list[str]:
    """The ``torchrun`` command line that runs ``textgym <argv>`` as ``nproc`` local ranks."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *entry(), *without_nproc(argv)]


def run_torchrun(nproc: int, argv: Sequence[str]) -> int:
    """Run the ranks; their exit status (the first failing rank's error lines are theirs)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes on a shared CPU: one thread each unless told otherwise
    return subprocess.run(torchrun_command(nproc, argv), env=env, check=False).returncode


def run_jax_processes(nproc: int, argv: Sequence[str]) -> int:
    """Run ``textgym <argv>`` as ``nproc`` local JAX processes of one run; if one fails, the
    others are stopped (they would wait for it forever). Returns the first failure's status."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [sys.executable, *entry(), *without_nproc(argv), "--coordinator", f"127.0.0.1:{port}", "--num-processes", str(nproc)]
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")  # one CPU device per process; GPUs: give each process its own (docs/scaling.md)
    procs = [subprocess.Popen([*base, "--process-id", str(i)], env=env) for i in range(nproc)]
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed or all(c == 0 for c in codes):
                return failed[0] if failed else 0
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
