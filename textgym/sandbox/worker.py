"""One warm worker: a zygote process in its isolation and cgroup, spoken to in JSON lines.

Requests are pipelined: a whole submission (open, every call, close) is written at once and
the replies are read as they come, with a selector so neither side can block the other. A
worker that misses its deadline or dies is killed with its cgroup and started afresh.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import select
import shlex
import shutil
import signal
import subprocess
import time
from typing import Any

from textgym.sandbox import cgroups
from textgym.sandbox.isolation import Backend
from textgym.sandbox.limits import Limits
from textgym.sandbox.program import Preload

START_TIMEOUT = 30.0
_names = itertools.count()


class WorkerDied(Exception):
    """The worker stopped answering; ``replies`` holds what it answered before."""

    def __init__(self, message: str, replies: list[dict[str, Any]]):
        super().__init__(message)
        self.replies = replies


class Worker:
    """A zygote that forks one child per program; not thread-safe (the pool hands it out)."""

    def __init__(self, backend: Backend, limits: Limits, preload: Preload | None = None):
        self.backend = backend
        self.limits = limits
        self.preload = preload
        self.proc: subprocess.Popen | None = None
        self.cgroup: cgroups.WorkerCgroup | None = None
        self._workdir: str | None = None
        self._partial: list[bytes] = []  # a reply line not complete yet
        self._owner = os.getpid()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.stop()  # what is left of a previous life (a worker that died is started again)
        self._owner = os.getpid()
        self.cgroup = cgroups.create(f"{os.getpid()}-{next(_names)}", self.limits)
        cmd, config, fds = self.backend.command(self.limits)
        if self.preload is not None:
            config["preload"] = self.preload.config()
        if not self.backend.isolated:
            self._workdir = os.path.dirname(config["workdir"])
        if self.cgroup is not None:
            # Join the cgroup before bwrap forks anything, so nothing the worker starts is outside it.
            joins = "; ".join(f"echo $$ > {shlex.quote(p)}" for p in self.cgroup.procs_files)
            cmd = ["/bin/sh", "-c", f'set -e; {joins}; exec "$@"', "sh", *cmd]
        env = {"PYTHONHASHSEED": "0", "PATH": os.defpath, "LANG": "C.UTF-8", "HOME": config["workdir"]}
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=fds,
            )
        finally:
            for fd in fds:
                os.close(fd)
        self._partial = []
        os.set_blocking(self.proc.stdin.fileno(), False)
        os.set_blocking(self.proc.stdout.fileno(), False)
        try:
            ready = self.exchange([config], START_TIMEOUT)[0]
        except WorkerDied as exc:
            os.killpg(self.proc.pid, signal.SIGKILL)
            stderr = self.proc.stderr.read(4000).decode(errors="replace").strip()
            self.stop()
            raise WorkerDied(f"the sandbox worker did not start: {stderr or exc}", []) from None
        if not ready.get("ready"):
            self.stop()
            raise WorkerDied(f"the sandbox worker did not start: {ready}", [])

    def exchange(self, requests: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
        """Send every request, return one reply per request.

        Raises:
            WorkerDied: no complete answer within ``timeout`` seconds; the caller stops the worker.
        """
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        out = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
        replies: list[dict[str, Any]] = []
        stdin, stdout = self.proc.stdin.fileno(), self.proc.stdout.fileno()  # non-blocking since start
        deadline = time.monotonic() + timeout
        out = _write_some(stdin, out)  # a submission usually fits the pipe: no poll for writing
        poller = select.poll()  # no kernel object to make and close per exchange, unlike epoll
        poller.register(stdout, select.POLLIN)
        if out:
            poller.register(stdin, select.POLLOUT)
        while len(replies) < len(requests):
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerDied("the sandbox worker did not answer in time", replies)
            for fd, _ in poller.poll(math.ceil(left * 1000)):
                if fd == stdin:
                    out = _write_some(stdin, out)
                    if not out:
                        poller.unregister(stdin)
                    continue
                try:
                    chunk = os.read(stdout, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise WorkerDied("the sandbox worker exited", replies)
                if b"\n" not in chunk:  # only new bytes are searched: linear in the reply
                    self._partial.append(chunk)
                    continue
                *lines, rest = b"".join([*self._partial, chunk]).split(b"\n")
                self._partial = [rest]
                replies.extend(_reply(line) for line in lines)
        return replies

    def stop(self) -> None:
        """Kill the worker, everything in its namespaces and cgroup, and its scratch dir.

        Only the process that started the worker may stop it: a forked copy of this object (in
        an async vector env's subprocess) must not kill its parent's workers.
        """
        if self._owner != os.getpid():
            return
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


def _write_some(fd: int, data: bytes) -> bytes:
    """Write what the pipe takes now; the rest (nothing once the worker is gone) is returned."""
    try:
        return data[os.write(fd, data) :] if data else data
    except BlockingIOError:
        return data
    except BrokenPipeError:
        return b""


def _reply(line: bytes) -> dict[str, Any]:
    """One reply; a call's reply is the program's own line, so anything but an object is refused."""
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a forged line nested too deeply
        reply = None
    return reply if isinstance(reply, dict) else {"op": "invalid", "error": "the program sent a malformed reply"}
