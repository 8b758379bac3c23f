"""The resource limits of one sandboxed program, and how each is enforced."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Every field is enforced outside the program's reach.

    Attributes:
        call_timeout: Wall seconds per test (per call), enforced by the zygote's clock.
        total_timeout: Wall seconds per submission, all tests together; ``cpu_time`` is
            derived from it and enforced by ``RLIMIT_CPU``.
        memory: Bytes of address space per process (``RLIMIT_AS``); the worker's memory
            cgroup holds all of the program's processes to ``memory`` plus the zygote.
        processes: Processes and threads per worker (pids cgroup, and ``RLIMIT_NPROC`` for
            the unprivileged uid).
        max_output: Bytes of stdout kept per stdin/stdout test; more is reported as truncated.
        max_console: Bytes a program may print to its console; past that it is killed.
        max_result: Bytes of one encoded return value; past that the program is killed.
        tmp_size: Bytes of the private tmpfs (the only writable place).
        file_size: Bytes of any one file the program writes (``RLIMIT_FSIZE``).
        open_files: File descriptors per process (``RLIMIT_NOFILE``).
    """

    call_timeout: float = 2.0
    total_timeout: float = 10.0
    memory: int = 512 * MiB
    processes: int = 32
    max_output: int = 64 * 1024
    max_console: int = 64 * 1024
    max_result: int = 1 * MiB
    tmp_size: int = 16 * MiB
    file_size: int = 8 * MiB
    open_files: int = 64

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")

    @property
    def cpu_time(self) -> int:
        """CPU seconds per forked child (``RLIMIT_CPU``): the submission's wall budget, rounded up."""
        return math.ceil(self.total_timeout) + 1

    @property
    def cgroup_memory(self) -> int:
        """The worker's memory cgroup: the program's budget plus room for the zygote and tmpfs."""
        return self.memory + self.tmp_size + 96 * MiB

    def zygote_config(self) -> dict:
        """The limits as the zygote reads them."""
        return {**asdict(self), "cpu_time": self.cpu_time}
