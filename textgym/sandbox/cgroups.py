"""Per-worker control groups: a hard cap on processes and memory that no uid escapes.

``RLIMIT_NPROC`` does nothing for root and counts per uid across the whole host, so fork bombs
are held by a pids cgroup per worker instead (and memory by a memory cgroup, which also charges
the worker's tmpfs). Both cgroup v1 (one hierarchy per controller) and v2 (one unified tree)
are supported. Whether this host lets us make them is probed once per process: where it does
not, workers run without one and the rlimits remain; where it does, a group that cannot be made
stops the worker from starting (never a worker without its group). Groups are named
``textgym/<pid>-<n>`` after the process that made them, and the empty groups of processes that
ended without removing theirs (``os._exit``, SIGKILL) are swept each time a worker starts.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

from textgym.error import SandboxUnavailable
from textgym.sandbox.limits import Limits

ROOT = "/sys/fs/cgroup"
PARENT = "textgym"
OVERHEAD = 3  # bwrap outside, the zygote (the namespace's init) and its forker


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
    """Make the cgroup for one worker; None only where this host never lets us.

    Raises:
        SandboxUnavailable: cgroups work here, but this one could not be made.
    """
    version = supported()
    if version is None:
        return None
    sweep()
    try:
        return _make(version, name, limits)
    except OSError as exc:
        raise SandboxUnavailable(f"the sandbox worker's cgroup could not be made ({exc}); it does not run without one") from None


@functools.lru_cache(maxsize=1)
def supported() -> int | None:
    """The cgroup version this process can give workers (2 or 1), or None; probed once."""
    if os.geteuid() != 0:
        return None
    for version in (2, 1):
        try:
            _make(version, f"{os.getpid()}-probe", Limits()).remove()
            return version
        except OSError:
            continue
    return None


def bases() -> list[str]:
    """The hierarchies worker groups are made in (under ``PARENT``)."""
    if os.path.exists(os.path.join(ROOT, "cgroup.controllers")) and supported() == 2:
        return [ROOT]
    memory = os.path.join(ROOT, "memory")
    return [os.path.join(ROOT, "pids")] + ([memory] if os.path.exists(os.path.join(memory, "memory.limit_in_bytes")) else [])


def owner_alive(group: str) -> bool:
    """Whether the process named in ``<pid>-<n>`` still runs (unparsable names count as alive)."""
    try:
        os.kill(int(os.path.basename(group).split("-")[0]), 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError):
        pass
    return True


def sweep() -> None:
    """Remove the empty groups whose process is gone (another container's stay: they are not empty)."""
    for base in bases():
        parent = os.path.join(base, PARENT)
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            group = os.path.join(parent, name)
            if os.path.isdir(group) and not owner_alive(group) and not _read(os.path.join(group, "cgroup.procs")).strip():
                try:
                    os.rmdir(group)
                except OSError:
                    pass


def _make(version: int, name: str, limits: Limits) -> WorkerCgroup:
    """Make and configure the group, or raise ``OSError`` with nothing left behind."""
    dirs: list[str] = []
    try:
        if version == 2:
            if not os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
                raise FileNotFoundError(os.path.join(ROOT, "cgroup.controllers"))
            base = os.path.join(ROOT, PARENT)
            os.makedirs(base, exist_ok=True)
            _write(os.path.join(ROOT, "cgroup.subtree_control"), "+pids +memory")
            _write(os.path.join(base, "cgroup.subtree_control"), "+pids +memory")
            settings = {
                os.path.join(base, name): {
                    "pids.max": str(limits.processes + OVERHEAD),
                    "memory.max": str(limits.cgroup_memory),
                    "memory.swap.max": "0",
                }
            }
        else:
            pids, memory = os.path.join(ROOT, "pids"), os.path.join(ROOT, "memory")
            if not os.path.exists(os.path.join(pids, "cgroup.procs")):
                raise FileNotFoundError(os.path.join(pids, "cgroup.procs"))
            settings = {os.path.join(pids, PARENT, name): {"pids.max": str(limits.processes + OVERHEAD)}}
            if os.path.exists(os.path.join(memory, "memory.limit_in_bytes")):
                settings[os.path.join(memory, PARENT, name)] = {
                    "memory.limit_in_bytes": str(limits.cgroup_memory),
                    "memory.memsw.limit_in_bytes": str(limits.cgroup_memory),
                }
        for d, files in settings.items():
            os.makedirs(d, exist_ok=True)
            dirs.append(d)
            for fname, value in files.items():
                # memory.swap.max and memory.memsw.* exist only where swap accounting is on
                if os.path.exists(os.path.join(d, fname)) or fname in ("pids.max", "memory.max", "memory.limit_in_bytes"):
                    _write(os.path.join(d, fname), value)
    except OSError:
        WorkerCgroup(tuple(dirs), version).remove()
        raise
    return WorkerCgroup(tuple(dirs), version)


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""
