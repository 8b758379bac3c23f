"""Worker cgroups: none is left behind, and none is ever silently missing."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import pytest

from textgym.error import SandboxUnavailable
from textgym.sandbox import Call, Limits, Sandbox, cgroups

pytestmark = pytest.mark.skipif(not cgroups.supported(), reason="this host gives the sandbox no cgroups")


def groups_of(pid: int) -> list[str]:
    return [d for base in cgroups.bases() for d in glob.glob(os.path.join(base, cgroups.PARENT, f"{pid}-*"))]


def test_closing_an_async_code_vector_env_leaves_no_cgroup():
    venv = gym.make_vec("textgym/Code-v0", num_envs=2, vectorization_mode="async")
    pids = [p.pid for p in venv.processes]
    venv.reset(seed=0)
    venv.step(list(venv.call("oracle_action")))
    assert all(groups_of(pid) for pid in pids)  # each subprocess ran its workers in cgroups
    venv.close()
    assert [d for pid in pids for d in groups_of(pid)] == []


def test_cgroups_of_dead_processes_are_swept():
    """A process killed outright (SIGKILL, os._exit) leaves its groups; the next worker removes them."""
    script = (
        "import os\n"
        "from textgym.sandbox import Call, Sandbox\n"
        "box = Sandbox(workers=1)\n"
        "box.run('def f():\\n    return 1\\n', [Call(name='f')])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    leaked = [d for base in cgroups.bases() for d in glob.glob(os.path.join(base, cgroups.PARENT, "*-*")) if not cgroups.owner_alive(d)]
    assert leaked  # the os._exit above skipped every cleanup
    deadline = time.monotonic() + 10  # its workers die with it (--die-with-parent), not at once
    while any(open(os.path.join(d, "cgroup.procs")).read().strip() for d in leaked) and time.monotonic() < deadline:
        time.sleep(0.05)
    with Sandbox(Limits(call_timeout=1.5), workers=1) as box:
        assert box.run("def f():\n    return 1\n", [Call(name="f")]).results[0].value == 1
    assert not [d for d in leaked if os.path.isdir(d)]


def test_a_cgroup_that_cannot_be_made_stops_the_worker_from_starting(monkeypatch):
    def refuse(path, value):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(cgroups, "_write", refuse)
    with Sandbox(Limits(call_timeout=1.75), workers=1) as box, pytest.raises(SandboxUnavailable, match="cgroup"):
        box.run("def f():\n    return 1\n", [Call(name="f")])


def test_a_worker_started_again_after_dying_removes_its_old_cgroup():
    with Sandbox(Limits(call_timeout=1.5), workers=1) as box:
        box.run("def f():\n    return 1\n", [Call(name="f")])
        (worker,) = box._all
        old = worker.cgroup.dirs
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        assert box.run("def f():\n    return 2\n", [Call(name="f")]).results[0].value == 2
        assert worker.cgroup.dirs != old and not any(os.path.isdir(d) for d in old)
