"""One sandbox per test session, with short time limits so attacks end fast."""

from __future__ import annotations

import os
import time

import pytest

from textgym.sandbox import Call, Limits, Sandbox

ATTACK_LIMITS = Limits(call_timeout=1.0, total_timeout=3.0, memory=256 << 20, processes=16)


@pytest.fixture(scope="session")
def box():
    """A one-worker sandbox: the same warm worker must survive every attack."""
    with Sandbox(ATTACK_LIMITS, workers=1) as sandbox:
        yield sandbox


@pytest.fixture
def host_snapshot(tmp_path):
    """A host directory with a secret file; the test checks it is unchanged afterwards."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    before = sorted(os.listdir(tmp_path))
    yield tmp_path
    assert sorted(os.listdir(tmp_path)) == before
    assert secret.read_text() == "the host's secret"


@pytest.fixture(scope="session")
def passes(box):
    """The verdict an env would give: the returned value equals ``expected``, compared on the host."""

    def verdict(code: str, expected, *, name: str = "f", args=()) -> bool:
        got = box.run(code, [Call(name=name, args=list(args))]).results[0]
        return got.ok and type(got.value) is type(expected) and got.value == expected

    return verdict


IDLE_PROCESSES = 4  # bwrap, bwrap as the namespace's init, the zygote, and its pre-forked spare child
PROBE = "import os\ndef f():\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"


@pytest.fixture(scope="session")
def leftovers(box):
    """Processes beyond an idle worker's, once cleanup settles (0 when nothing was left behind).

    Counted in the worker's pids cgroup when it has one (polled briefly: the zygote kills a
    program right after sending its results); else by a probe program listing the sandbox's
    ``/proc``, where it should see only init, the zygote and itself.
    """

    def count() -> int:
        if not box._all:  # a test that brought its own sandbox
            box.run(PROBE, [Call(name="f")])
        (worker,) = box._all
        if worker.cgroup is None:
            return len(box.run(PROBE, [Call(name="f")]).results[0].value) - 3
        (pids,) = [d for d in worker.cgroup.dirs if os.path.exists(os.path.join(d, "pids.current"))]
        deadline = time.monotonic() + 3.0
        while True:
            with open(os.path.join(pids, "pids.current")) as fh:
                n = int(fh.read())
            if n == IDLE_PROCESSES or time.monotonic() > deadline:
                return n - IDLE_PROCESSES
            time.sleep(0.01)

    return count
