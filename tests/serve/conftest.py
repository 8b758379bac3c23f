"""Real servers for the serving tests: ``textgym serve`` subprocesses on free ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("websockets")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``textgym serve`` process; ``url`` is its http:// base URL."""

    def __init__(self, env_id: str, *args: str, port: int | None = None):
        self.env_id, self.args = env_id, args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        cmd = [sys.executable, "-m", "textgym.cli", "serve", self.env_id, "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def kill(self, sig: int = signal.SIGKILL) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)


@pytest.fixture
def serve():
    """``serve(env_id, *flags)`` starts a server that is stopped after the test."""
    started: list[Server] = []

    def start(env_id: str, *args: str, port: int | None = None) -> Server:
        server = Server(env_id, *args, port=port).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def sudoku_server():
    server = Server("textgym/Sudoku-v0", "--max-sessions", "64").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def workplace_server():
    server = Server("textgym/Workplace-v0").start()
    yield server
    server.stop()


os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
