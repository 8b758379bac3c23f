"""``textgym train --nproc N`` (and ``textgym sft --nproc N``): the same command as N processes.

With the torch backend this is exactly ``torchrun --standalone --nproc-per-node N -m textgym.cli
train ...`` (the other flags passed on unchanged), so what a user learns here carries over to
``torchrun`` on a cluster (docs/scaling.md). Before anything starts, the checks that every rank
would fail alike run once here, so a bad world size or a checkpoint of another world size is one
line, not N tracebacks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--nproc`` option (a launcher's, not the run configuration's)."""
    group = parser.add_argument_group("processes (docs/scaling.md)")
    group.add_argument("--nproc", type=int, default=1, metavar="N",
                       help="run as N local processes: torch launches 'torchrun --standalone --nproc-per-node N' "
                            "(gloo on CPUs, NCCL on GPUs); each process plays its share of every step's groups")


def wants_launch(args: argparse.Namespace) -> bool:
    """Whether this invocation should start the processes (it is not one of them already)."""
    if args.nproc < 1:
        raise ValueError(f"--nproc must be >= 1, got {args.nproc}")
    return args.nproc > 1 and "WORLD_SIZE" not in os.environ


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


def torchrun_command(nproc: int, argv: Sequence[str]) -> list[str]:
    """The ``torchrun`` command line that runs ``textgym <argv>`` as ``nproc`` local ranks."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "textgym.cli", *without_nproc(argv)]


def run_torchrun(nproc: int, argv: Sequence[str]) -> int:
    """Run the ranks; their exit status (the first failing rank's error lines are theirs)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes on a shared CPU: one thread each unless told otherwise
    return subprocess.run(torchrun_command(nproc, argv), env=env, check=False).returncode
