"""How a worker is started: the bubblewrap command line, or no isolation at all.

A :class:`Backend` turns the zygote script into a command line and says what the zygote may
assume (its own PID namespace, a uid to drop to, a private tmp dir). ``bwrap`` gives each worker
fresh PID, network, IPC, UTS and mount namespaces whose file system holds only the interpreter,
its standard library and the shared libraries those need, read-only, plus a small private
tmpfs, and (on x86-64) a seccomp filter (:mod:`textgym.sandbox.seccomp`). ``unsafe`` runs the same zygote with resource limits but no namespaces and exists only
for machines without bubblewrap, behind an explicit opt-in.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from typing import Literal

from textgym.error import SandboxUnavailable
from textgym.sandbox.limits import Limits
from textgym.sandbox.seccomp import filter_program

BackendName = Literal["auto", "bwrap", "unsafe"]
ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")
SANDBOX_PYTHON = "/python"
SANDBOX_ZYGOTE = "/sandbox/zygote.py"
WORKDIR = "/tmp/run"
NOBODY = 65534
# Root inside the sandbox keeps only what the zygote needs to drop a child to the unprivileged
# uid, own its tmp dir and kill whatever the child leaves behind. The child gets none of them.
ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) "
    "and allow namespaces, or pass backend='unsafe' to run untrusted code WITHOUT isolation"
)


@dataclass(frozen=True)
class PythonLayout:
    """Where the interpreter, its stdlib and its shared libraries are, on the host and inside."""

    executable: str
    stdlib: str
    libraries: tuple[tuple[str, str], ...] = field(default=())

    @property
    def version(self) -> str:
        return f"python{sys.version_info.major}.{sys.version_info.minor}"

    def binds(self) -> list[tuple[str, str]]:
        """(host path, sandbox path) pairs to mount read-only."""
        return [
            (self.executable, f"{SANDBOX_PYTHON}/bin/python3"),
            (self.stdlib, f"{SANDBOX_PYTHON}/lib/{self.version}"),
            *self.libraries,
        ]


@functools.lru_cache(maxsize=1)
def python_layout() -> PythonLayout:
    """The running interpreter's binary, stdlib and the libraries it and its extensions load."""
    executable = os.path.realpath(sys.executable)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    prefix_lib = os.path.join(os.path.realpath(sys.base_prefix), "lib")
    objects = [executable, *glob.glob(os.path.join(stdlib, "lib-dynload", "*.so"))]
    libraries = {}
    for path in _shared_libraries(objects):
        real = os.path.realpath(path)
        # libpythonX.Y.so of a shared build goes to /python/lib, on the sandbox's LD_LIBRARY_PATH.
        inside = f"{SANDBOX_PYTHON}/lib/{os.path.basename(path)}" if os.path.dirname(real) == prefix_lib else path
        libraries[inside] = real
    if os.path.exists("/etc/ld.so.cache"):
        libraries["/etc/ld.so.cache"] = "/etc/ld.so.cache"
    return PythonLayout(executable, stdlib, tuple(sorted((host, inside) for inside, host in libraries.items())))


def _shared_libraries(objects: list[str]) -> list[str]:
    """Every shared library ``ldd`` resolves for ``objects`` (the loader included)."""
    if shutil.which("ldd") is None:
        raise SandboxUnavailable("ldd was not found, so the interpreter's libraries cannot be mounted; " + INSTALL_HINT)
    out = subprocess.run(["ldd", *objects], capture_output=True, text=True, check=False).stdout
    found = set()
    for line in out.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].split()
            if target and target[0].startswith("/"):
                found.add(target[0])
        elif line.startswith("/") and "(" in line:
            found.add(line.split()[0])
    return sorted(found)


@dataclass(frozen=True)
class Backend:
    """A way to start workers; ``config`` is what the zygote is told about its surroundings."""

    name: str
    isolated: bool
    uid: int | None
    seccomp: bool = False

    def command(self, limits: Limits) -> tuple[list[str], dict, list[int]]:
        """The command line of one worker, the zygote's configuration, and the descriptors to
        pass on (the seccomp filter's); the caller closes those once the worker has started."""
        if self.name == "bwrap":
            fds = [seccomp_pipe()] if self.seccomp else []
            cmd = bwrap_command(limits, privileged=self.uid is not None, seccomp_fd=fds[0] if fds else None)
            return cmd, self._config(limits, WORKDIR), fds
        workdir = tempfile.mkdtemp(prefix="textgym-sandbox-")
        os.chmod(workdir, 0o711)  # the dropped child must reach its run dir inside
        return [sys.executable, "-S", "-s", "-B", ZYGOTE], self._config(limits, os.path.join(workdir, "run")), []

    def _config(self, limits: Limits, workdir: str) -> dict:
        return {
            **limits.zygote_config(),
            "isolated": self.isolated,
            "uid": self.uid,
            "gid": self.uid,
            "workdir": workdir,
        }


def seccomp_pipe() -> int:
    """A pipe's read end holding the seccomp filter, for ``bwrap --seccomp FD``."""
    read, write = os.pipe()
    os.write(write, filter_program())
    os.close(write)
    return read


def bwrap_command(limits: Limits, *, privileged: bool, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command that starts one zygote.

    The zygote runs as the PID namespace's init (``--as-pid-1``), so that its forker's
    ``kill(-1)`` spares it. As root, bwrap creates the namespaces itself and the zygote keeps
    only ``ZYGOTE_CAPS`` so each child can drop to ``nobody`` (a different uid from the zygote, so it can neither
    signal nor ptrace it). Without root, a user namespace is added and nothing is kept.
    """
    layout = python_layout()
    cmd = ["bwrap", "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    cmd += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--cap-drop", "ALL"]
    if privileged:
        for cap in ZYGOTE_CAPS:
            cmd += ["--cap-add", cap]
    else:
        cmd += ["--unshare-user", "--disable-userns"]
    binds = [*layout.binds(), (ZYGOTE, SANDBOX_ZYGOTE)]
    # bwrap makes missing parents 0700 as root; the dropped child must be able to traverse them.
    for parent in sorted({p for _, inside in binds for p in _parents(inside)}):
        cmd += ["--perms", "0755", "--dir", parent]
    for host, inside in binds:
        cmd += ["--ro-bind", host, inside]
    site = os.path.join(layout.stdlib, "site-packages")
    if os.path.isdir(site):  # third-party packages stay outside
        cmd += ["--tmpfs", f"{SANDBOX_PYTHON}/lib/{layout.version}/site-packages"]
    # The IPC namespace is the worker's, so the zygote removes what each program leaves in it;
    # the mqueue mount is how it can see POSIX message queues at all.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd += ["--size", str(limits.tmp_size), "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv"]
    for key, value in {
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUTF8": "1",
        "LANG": "C.UTF-8",
        "HOME": WORKDIR,
        "TMPDIR": WORKDIR,
        "PATH": f"{SANDBOX_PYTHON}/bin",
        "LD_LIBRARY_PATH": f"{SANDBOX_PYTHON}/lib",  # libpythonX.Y.so of a shared build
    }.items():
        cmd += ["--setenv", key, value]
    cmd += [f"{SANDBOX_PYTHON}/bin/python3", "-S", "-s", "-B", *(["-P"] if sys.version_info >= (3, 11) else [])]
    return cmd + [SANDBOX_ZYGOTE]


def _parents(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


@functools.cache
def resolve_backend(name: BackendName = "auto") -> Backend:
    """The backend to use, checked once per process.

    Raises:
        SandboxUnavailable: ``bwrap`` (or ``auto``) was asked for and cannot isolate here.
    """
    if name == "unsafe":
        return Backend("unsafe", isolated=False, uid=NOBODY if os.geteuid() == 0 else None)
    if name not in ("auto", "bwrap"):
        raise ValueError(f"backend must be 'auto', 'bwrap' or 'unsafe', got {name!r}")
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(f"no sandbox available: bwrap (bubblewrap) is not installed; {INSTALL_HINT}")
    privileged = os.geteuid() == 0
    seccomp = filter_program() is not None and _probe(privileged, seccomp=True) is None
    error = None if seccomp else _probe(privileged, seccomp=False)
    if error is not None:
        raise SandboxUnavailable(f"no sandbox available: bwrap failed ({error[:300]}); {INSTALL_HINT}")
    return Backend("bwrap", isolated=True, uid=NOBODY if privileged else None, seccomp=seccomp)


def _probe(privileged: bool, *, seccomp: bool) -> str | None:
    """Start the sandbox's interpreter once; bwrap's error message if that fails."""
    fd = seccomp_pipe() if seccomp else None
    try:
        cmd = bwrap_command(Limits(), privileged=privileged, seccomp_fd=fd)[:-1] + ["-c", "pass"]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False, pass_fds=[fd] if seccomp else ())
    finally:
        if fd is not None:
            os.close(fd)
    return None if result.returncode == 0 else result.stderr.strip() or f"exit status {result.returncode}"
