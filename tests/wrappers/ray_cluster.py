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
def two_node_cluster(timeout: float = 120.0) -> Iterator[str]:
    """Start a head and a worker node of one CPU each; yield the head's ``host:port``."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="rc")  # short: Ray puts unix sockets under it
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=os.pathsep.join(sys.path))
    common = ["--num-cpus=1", "--block", "--disable-usage-stats", f"--dashboard-agent-listen-port={free_port()}",
              f"--metrics-export-port={free_port()}"]
    head = [*ray_command(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", f"--temp-dir={temp}",
            "--include-dashboard=false", *common]
    worker = [*ray_command(), "start", f"--address={address}", "--node-ip-address=127.0.0.1", *common]
    started: list[subprocess.Popen] = []
    log = open(Path(temp) / "start.log", "w")
    try:
        started.append(subprocess.Popen(head, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_nodes(address, 1, timeout, started, log.name)
        started.append(subprocess.Popen(worker, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_nodes(address, 2, timeout, started, log.name)
        yield address
    finally:
        for proc in reversed(started):
            _kill_group(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_nodes(address: str, n: int, timeout: float, started: list[subprocess.Popen], log: str) -> None:
    """Poll ``ray status`` until ``n`` nodes are up; a node that exits is an error at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in started:
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {proc.returncode}: {Path(log).read_text()[-2000:]}")
        status = subprocess.run([*ray_command(), "status", f"--address={address}"], capture_output=True, text=True, check=False)
        if status.returncode == 0 and status.stdout.count("node_") >= n:
            return
        time.sleep(1.0)
    raise TimeoutError(f"{n} Ray node(s) not up after {timeout:.0f} s: {Path(log).read_text()[-2000:]}")


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
