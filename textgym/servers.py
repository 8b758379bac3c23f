"""Several env servers behind one :class:`~textgym.remote.RemoteEnv`: where each new session goes.

A run that plays its envs on several ``textgym serve`` processes should neither pile every session
onto one of them nor stop when one dies. :class:`ServerPool` hands out the servers round robin, so
sessions spread evenly; a server that failed (refused a connection, dropped a session) is skipped
for ``retry_after`` seconds and then tried again, so a restarted server takes sessions again as
soon as it is back. The RemoteEnvs of one process that name the same servers share one pool
(:meth:`ServerPool.shared`), and each process starts at its own place in the round, so the sessions
of an async vector env's workers spread too.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import ClassVar


class ServerPool:
    """The servers of a run, handed out round robin, minus those that failed recently.

    Args:
        urls: The servers, each as given to :class:`~textgym.remote.RemoteEnv`.
        retry_after: Seconds a failed server is skipped before it is tried again.

    Example:
        >>> pool = ServerPool(["ws://a/ws", "ws://b/ws"], retry_after=60)
        >>> pool.mark_down("ws://a/ws")
        >>> pool.candidates()
        ['ws://b/ws', 'ws://a/ws']
    """

    _shared: ClassVar[dict[tuple[tuple[str, ...], float], ServerPool]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, urls: Sequence[str], retry_after: float = 2.0):
        if not urls:
            raise ValueError("expected at least one server URL, got none")
        self.urls = tuple(urls)
        self.retry_after = float(retry_after)
        self._down_until = dict.fromkeys(self.urls, 0.0)
        self._pid = os.getpid()
        self._next = self._pid % len(self.urls)
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, urls: Sequence[str], retry_after: float = 2.0) -> ServerPool:
        """The one pool of this process for these servers (made on first use)."""
        key = (tuple(urls), float(retry_after))
        with cls._shared_lock:
            pool = cls._shared.get(key)
            if pool is None or pool._pid != os.getpid():  # a forked worker starts its own round
                pool = cls._shared[key] = cls(urls, retry_after)
            return pool

    def candidates(self) -> list[str]:
        """The servers to try for a new session, in order: every live one, starting with the next
        in the round, then those that failed recently (the soonest back first), as a last resort."""
        now = time.monotonic()
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self.urls)
            order = self.urls[start:] + self.urls[:start]
            live = [u for u in order if self._down_until[u] <= now]
            down = sorted((u for u in order if self._down_until[u] > now), key=self._down_until.__getitem__)
        return live + down

    def mark_down(self, url: str) -> None:
        """``url`` failed: skip it for ``retry_after`` seconds."""
        with self._lock:
            self._down_until[url] = time.monotonic() + self.retry_after

    def mark_up(self, url: str) -> None:
        """``url`` answered: it is live again."""
        with self._lock:
            self._down_until[url] = 0.0

    def live(self) -> list[str]:
        """The servers not marked down."""
        now = time.monotonic()
        with self._lock:
            return [u for u in self.urls if self._down_until[u] <= now]
