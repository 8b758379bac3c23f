"""The public face of the sandbox: a pool of warm workers that run programs against calls.

Example:
    >>> from textgym.sandbox import Call, Sandbox
    >>> with Sandbox(workers=1) as box:                       # doctest: +SKIP
    ...     result = box.run("def f(x):\\n    return x * 2", [Call(name="f", args=[21])])
    >>> result.results[0].value                                # doctest: +SKIP
    42

Workers start lazily, one per core at most, and are reused: a submission costs one ``fork`` in
an already-running zygote, not an interpreter start. ``reuse=False`` starts and stops a fresh
sandbox per submission instead (slower; used by the benchmark as the baseline).
"""

from __future__ import annotations

import collections
import multiprocessing.util
import os
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from textgym.sandbox.isolation import BackendName, resolve_backend
from textgym.sandbox.limits import Limits
from textgym.sandbox.program import Call, CallResult, Mode, Preload, RunResult
from textgym.sandbox.worker import Worker, WorkerDied

# bwrap dies with the *thread* that started it (PR_SET_PDEATHSIG), so every worker is started
# from this one long-lived thread rather than from whichever short-lived thread asked first.
_spawner: tuple[int, ThreadPoolExecutor] | None = None  # (pid, executor): a fork has no threads
_spawner_lock = threading.Lock()
# Slack on top of the zygote's own deadline before the host declares a worker wedged.
HOST_SLACK = 10.0


def _start(worker: Worker) -> None:
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():
            _spawner = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="textgym-sandbox"))
        executor = _spawner[1]
    executor.submit(worker.start).result()


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Sandbox:
    """Run untrusted Python programs in isolated, warm, pre-forked workers.

    Args:
        limits: Resource limits per submission (:class:`Limits`).
        workers: Most workers alive at once (default: one per core). Each serves one
            submission at a time; callers on more threads wait for a free one.
        backend: ``"auto"``/``"bwrap"`` (bubblewrap namespaces; raises
            :class:`~textgym.error.SandboxUnavailable` where they cannot be made) or
            ``"unsafe"`` (no isolation, only resource limits: trusted code only).
        reuse: Keep workers warm between submissions (the point); False restarts per run.
        preload: The host's own program that every worker loads once before it forks
            (:class:`Preload`), so that a run of it starts loaded and warm.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        workers: int | None = None,
        backend: BackendName = "auto",
        reuse: bool = True,
        preload: Preload | None = None,
    ):
        self.limits = limits or Limits()
        self.preload = preload
        self.backend = resolve_backend(backend)
        self.size = int(workers or default_workers())
        if self.size < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.reuse = bool(reuse)
        self._idle: list[Worker] = []
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._all)
        # A multiprocessing child (an async vector env's worker) ends with os._exit, which skips
        # weakref.finalize's atexit hook (its workers' cgroups stayed); it runs these instead.
        multiprocessing.util.Finalize(self, _stop_all, args=(self._all,), exitpriority=0)

    @property
    def isolated(self) -> bool:
        return self.backend.isolated

    def run(self, code: str, calls: Sequence[Call], *, mode: Mode = "function") -> RunResult:
        """Load ``code`` once (a function module, or a stdin/stdout program) and run every call."""
        requests, encoded = [{"op": "open", "code": str(code), "mode": mode}], {}
        for i, call in enumerate(calls):
            try:
                requests.append(call.request(i))
                encoded[i] = len(requests) - 1
            except (TypeError, ValueError) as exc:
                encoded[i] = CallResult(error=f"the test's arguments cannot be sent to the sandbox: {exc}")
        requests.append({"op": "close"})
        for _ in range(2):
            worker = self._acquire()
            try:
                replies, died = worker.exchange(requests, self.limits.total_timeout + HOST_SLACK), None
            except WorkerDied as exc:
                replies, died = exc.replies, f"the sandbox worker stopped ({exc})"
                worker.stop()
            finally:
                self._release(worker)
            # A worker that died between submissions (a restart after an attack) answered
            # nothing: this submission is not to blame, so it runs once more on a fresh one.
            if replies or died is None:
                break
        return _collect(replies, encoded, len(calls), died)

    def session(self, code: str, *, mode: Mode = "function") -> Session:
        """An open program for calls decided one at a time (e.g. a test that runs on the host)."""
        return Session(self, code, mode)

    def close(self) -> None:
        """Stop every worker; the sandbox starts new ones if it is used again."""
        with self._lock:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
        _stop_all(workers)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----- the pool -----

    def _acquire(self) -> Worker:
        """An idle worker, a new one while the pool is below ``size``, else the next one released.

        Waiters are served first come, first served, so no caller starves behind a busy thread
        that releases and re-acquires in a loop.
        """
        with self._lock:
            if self._idle and not self._waiters:
                # The one idle longest: its zygote has had the most time to kill the last
                # program and fork the next spare, which it does after the replies are out.
                worker = self._idle.pop(0)
            elif len(self._all) < self.size:
                worker = Worker(self.backend, self.limits, self.preload)
                self._all.add(worker)
            else:
                waiter = _Waiter()
                self._waiters.append(waiter)
                worker = None
        if worker is None:
            waiter.ready.wait()
            worker = waiter.worker
            assert worker is not None  # handed over before `ready` is set
        if not worker.alive:
            try:
                _start(worker)
            except BaseException:
                with self._lock:
                    self._all.discard(worker)
                raise
        return worker

    def _release(self, worker: Worker) -> None:
        if not self.reuse:
            worker.stop()
        with self._lock:
            if worker not in self._all:  # the pool was closed meanwhile
                return
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.worker = worker
                waiter.ready.set()
            else:
                self._idle.append(worker)


class _Waiter:
    """A caller waiting for a worker: ``ready`` is set once ``worker`` is handed over."""

    def __init__(self):
        self.ready = threading.Event()
        self.worker: Worker | None = None


_shared: dict[tuple, Sandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(limits: Limits | None = None, backend: BackendName = "auto") -> Sandbox:
    """The process-wide sandbox for these settings, so envs in one process share warm workers.

    Keyed by process id too: a forked process (an async vector env's worker) gets its own.
    """
    key = (os.getpid(), backend, limits or Limits())
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Sandbox(limits, backend=backend)
        return _shared[key]


class Session:
    """One program kept open in one worker; :meth:`call` runs one test and returns its result."""

    def __init__(self, sandbox: Sandbox, code: str, mode: Mode):
        self._sandbox = sandbox
        self._worker: Worker | None = sandbox._acquire()
        self._next_id = 0
        self.sandbox_error: str | None = None  # set once the worker stops mid-session
        reply = self._send({"op": "open", "code": str(code), "mode": mode}, sandbox.limits.call_timeout)
        self.loaded = bool(reply.get("loaded"))
        self.load_error = None if self.loaded else str(reply.get("error") or "the program did not load")

    def call(self, call: Call) -> CallResult:
        try:
            request = call.request(self._next_id)
        except (TypeError, ValueError) as exc:
            return CallResult(error=f"the test's arguments cannot be sent to the sandbox: {exc}")
        self._next_id += 1
        reply = self._send(request, self._sandbox.limits.call_timeout)
        if reply.get("op") == "call" and reply.get("id") != request["id"]:
            return CallResult(error="the program broke the harness protocol")
        return CallResult.from_reply(reply)

    def close(self) -> str:
        """Kill the program and everything it started; return its console output."""
        if self._worker is None:
            return ""
        reply = self._send({"op": "close"}, 5.0)
        worker, self._worker = self._worker, None
        self._sandbox._release(worker)
        return str(reply.get("console", ""))

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self._worker is None or not self._worker.alive:
            self.sandbox_error = self.sandbox_error or "the sandbox worker stopped"
            return {"error": self.sandbox_error, "op": request["op"]}
        try:
            return self._worker.exchange([request], timeout + HOST_SLACK)[0]
        except WorkerDied as exc:
            self._worker.stop()
            self.sandbox_error = f"the sandbox worker stopped ({exc})"
            return {"error": self.sandbox_error, "op": request["op"]}


def _collect(replies: list[dict], encoded: dict[int, Any], n: int, died: str | None) -> RunResult:
    """Match the zygote's replies (open, one per sent call, close) to the calls."""
    missing = CallResult(error=died or "the sandbox gave no answer")
    opened = replies[0] if replies else {"loaded": False, "error": died}
    results = []
    for i in range(n):
        slot = encoded[i]
        if isinstance(slot, CallResult):
            results.append(slot)
        elif slot < len(replies) and replies[slot].get("op") == "call" and replies[slot].get("id") == i:
            results.append(CallResult.from_reply(replies[slot]))
        else:
            results.append(missing)
    closing = replies[-1] if replies and replies[-1].get("op") == "close" else {}
    return RunResult(
        loaded=bool(opened.get("loaded")),
        results=tuple(results),
        load_error=None if opened.get("loaded") else str(opened.get("error") or died),
        console=str(closing.get("console", "")),
        sandbox_error=died,
    )


def _stop_all(workers) -> None:
    for worker in list(workers):
        worker.stop()
