"""A two-node Ray cluster on this machine, started as users start one (not a test module).

``ray start --head`` and a second ``ray start --address=...`` node, each with ``--block`` in its own
process group, so that tearing down kills exactly these processes (by group id) even when a test
fails; ``ray stop`` would stop every Ray on the machine, other users' included.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_command() -> list[str]:
    """The ``ray`` command line, run by the interpreter running the tests (whose workers then
    import the same textgym)."""
    return [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]


@contextmanager
def two_node_cluster(timeout: float = 300.0) -> Iterator[tuple[str, str]]:
    """Start a head and a worker node of one CPU each; yield the head's ``host:port`` and the
    home directory that clients of the cluster must use too."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="rc")  # short: Ray puts unix sockets under it
    # A home of its own: a token in ~/.ray/auth_token (another Ray on this machine) would turn on
    # token authentication for the GCS but not for its clients.
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=os.pathsep.join(sys.path), HOME=temp)
    common = [
        "--num-cpus=1",
        "--block",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--metrics-export-port={free_port()}",
    ]
    head = [
        *ray_command(),
        "start",
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        f"--temp-dir={temp}",
        "--include-dashboard=false",
        *common,
    ]
    worker = [*ray_command(), "start", f"--address={address}", "--node-ip-address=127.0.0.1", *common]
    started: list[subprocess.Popen] = []
    log = open(Path(temp) / "start.log", "w")
    try:
        started.append(subprocess.Popen(head, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_nodes(address, 1, timeout, started, log.name)
        started.append(subprocess.Popen(worker, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_nodes(address, 2, timeout, started, log.name)
        yield address, temp
    finally:
        for proc in reversed(started):
            _kill_group(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_nodes(address: str, n: int, timeout: float, started: list[subprocess.Popen], log: str) -> None:
    """Wait until ``n`` nodes said "Ray runtime started" (``ray status`` would cost a Python start
    per poll); a node that exits is an error at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in started:
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {proc.returncode}: {Path(log).read_text()[-2000:]}")
        if Path(log).read_text().count("Ray runtime started") >= n:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{n} Ray node(s) of {address} not up after {timeout:.0f} s: {Path(log).read_text()[-2000:]}")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the node's process group (``ray start --block`` then stops its raylet, GCS and
    workers), then SIGKILL whatever of the group is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        pass
    time.sleep(1.0)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
