"""Per-worker control groups: a hard cap on processes and memory that no uid escapes.

``RLIMIT_NPROC`` does nothing for root and counts per uid across the whole host, so fork bombs
are held by a pids cgroup per worker instead (and memory by a memory cgroup, which also charges
the worker's tmpfs). Both cgroup v1 (one hierarchy per controller) and v2 (one unified tree)
are supported; where neither is writable the worker runs without one and the rlimits remain.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from textgym.sandbox.limits import Limits

ROOT = "/sys/fs/cgroup"
OVERHEAD = 3  # bwrap outside, bwrap as the namespace's init, and the zygote


@dataclass(frozen=True)
class WorkerCgroup:
    """The cgroup directories one worker lives in (one per v1 controller, or one v2 dir)."""

    dirs: tuple[str, ...]
    version: int

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def remove(self) -> None:
        """Kill whatever is left in the group and delete it."""
        for d in self.dirs:
            if self.version == 2 and os.path.exists(os.path.join(d, "cgroup.kill")):
                _write(os.path.join(d, "cgroup.kill"), "1")
            else:
                for pid in _read(os.path.join(d, "cgroup.procs")).split():
                    try:
                        os.kill(int(pid), 9)
                    except (ProcessLookupError, PermissionError):
                        pass
        for d in self.dirs:
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # tasks still exiting
                    time.sleep(0.005)


def create(name: str, limits: Limits) -> WorkerCgroup | None:
    """Make the cgroup for one worker, or None when this host does not let us."""
    if os.geteuid() != 0:
        return None
    return _create_v2(name, limits) or _create_v1(name, limits)


def _create_v1(name: str, limits: Limits) -> WorkerCgroup | None:
    pids, memory = os.path.join(ROOT, "pids"), os.path.join(ROOT, "memory")
    if not (os.path.isdir(pids) and os.path.exists(os.path.join(pids, "cgroup.procs"))):
        return None
    settings = {pids: {"pids.max": str(limits.processes + OVERHEAD)}}
    if os.path.exists(os.path.join(memory, "memory.limit_in_bytes")):
        settings[memory] = {
            "memory.limit_in_bytes": str(limits.cgroup_memory),
            "memory.memsw.limit_in_bytes": str(limits.cgroup_memory),
        }
    dirs = []
    for base, files in settings.items():
        d = os.path.join(base, "textgym", name)
        try:
            os.makedirs(d, exist_ok=True)
            for fname, value in files.items():
                if os.path.exists(os.path.join(d, fname)):
                    _write(os.path.join(d, fname), value)
        except OSError:
            WorkerCgroup(tuple(dirs + [d]), 1).remove()
            return None
        dirs.append(d)
    return WorkerCgroup(tuple(dirs), 1)


def _create_v2(name: str, limits: Limits) -> WorkerCgroup | None:
    """A v2 group under the visible root, if the pids and memory controllers can be enabled there."""
    if not os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        return None
    base = os.path.join(ROOT, "textgym")
    try:
        os.makedirs(base, exist_ok=True)
        _write(os.path.join(ROOT, "cgroup.subtree_control"), "+pids +memory")
        _write(os.path.join(base, "cgroup.subtree_control"), "+pids +memory")
        d = os.path.join(base, name)
        os.makedirs(d, exist_ok=True)
        _write(os.path.join(d, "pids.max"), str(limits.processes + OVERHEAD))
        _write(os.path.join(d, "memory.max"), str(limits.cgroup_memory))
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            _write(os.path.join(d, "memory.swap.max"), "0")
    except OSError:
        return None
    return WorkerCgroup((d,), 2)


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""
