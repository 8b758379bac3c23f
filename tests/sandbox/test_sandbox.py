"""The sandbox API: results, limits, sessions, the pool, recovery, and refusing to run unisolated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textgym.error import SandboxUnavailable
from textgym.sandbox import Call, Limits, Preload, Sandbox, isolation, same_stdout, values_equal
from textgym.sandbox.zygote import decode, encode

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_plain_values_round_trip_with_their_types(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


def test_encode_refuses_objects_with_behaviour():
    class Sub(int):
        pass

    for bad in (object(), Sub(1), [1, {2: object()}], (lambda: 0)):
        with pytest.raises(TypeError):
            encode(bad)


def test_values_equal_modes():
    assert values_equal((1, 2), (1, 2)) and not values_equal((1, 2), [1, 2])
    assert values_equal([1, 2], (1, 2), json_like=True)
    assert not values_equal(1, True, json_like=True) and values_equal(1, True)
    assert values_equal(0.1 + 0.2, 0.3, json_like=True) and not values_equal(0.1 + 0.2, 0.3)
    assert same_stdout("1\n2\n", "1  \n2") and not same_stdout("1\n2", "2\n1")


def test_function_calls_and_errors(box):
    code = "def f(x, y=1):\n    return {'sum': x + y, 'pair': (x, y)}\n"
    r = box.run(code, [Call(name="f", args=[1], kwargs={"y": 2}), Call(name="g"), Call(name="f", args=["a"])])
    assert r.loaded and r.results[0].value == {"sum": 3, "pair": (1, 2)}
    assert "no function 'g'" in r.results[1].error
    assert "TypeError" in r.results[2].error and 'File "solution.py", line 2, in f' in r.results[2].error


def test_load_errors_are_reported(box):
    r = box.run("def f(:\n", [Call(name="f")])
    assert not r.loaded and "SyntaxError" in r.load_error and not r.results[0].ok


def test_stdio_output_is_capped(box):
    r = box.run("print('z' * 100000)\n", [Call(kind="stdio")], mode="stdio").results[0]
    assert r.truncated and len(r.value) == box.limits.max_output


def test_a_test_that_times_out_does_not_sink_the_others(box):
    code = "def f(x):\n    while x:\n        pass\n    return 'ok'\n"
    r = box.run(code, [Call(name="f", args=[0]), Call(name="f", args=[1]), Call(name="f", args=[0])])
    assert [c.value for c in r.results] == ["ok", None, "ok"] and r.results[1].timeout


def test_state_is_fresh_for_every_submission(box):
    code = "seen = []\ndef f():\n    seen.append(1)\n    return len(seen)\n"
    assert [box.run(code, [Call(name="f")]).results[0].value for _ in range(2)] == [1, 1]


def test_session_calls_one_at_a_time(box):
    with box.session("def f(x):\n    return x * 3\n") as session:
        assert session.loaded
        assert session.call(Call(name="f", args=[2])).value == 6
        assert session.call(Call(name="f", args=[(1,)])).value == (1, 1, 1)
        assert not session.call(Call(name="f", args=[object()])).ok


def test_console_output_comes_back(box):
    r = box.run("print('hello')\ndef f():\n    print('from f')\n", [Call(name="f")])
    assert r.console == "hello\nfrom f\n"


def test_parallel_callers_share_the_pool():
    with Sandbox(Limits(call_timeout=5), workers=2) as pool:
        results = {}

        def work(i):
            results[i] = pool.run("def f(x):\n    return x * x\n", [Call(name="f", args=[i])]).results[0].value

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {i: i * i for i in range(6)} and len(pool._all) <= 2


def test_a_dead_worker_is_replaced():
    with Sandbox(workers=1) as pool:
        assert pool.run("def f():\n    return 1\n", [Call(name="f")]).results[0].value == 1
        (worker,) = pool._all
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        assert pool.run("def f():\n    return 2\n", [Call(name="f")]).results[0].value == 2


def test_fresh_sandbox_per_run_still_works():
    with Sandbox(workers=1, reuse=False) as pool:
        first = pool.run("import os\ndef f():\n    return 1\n", [Call(name="f")])
        (worker,) = pool._all
        assert first.results[0].value == 1 and not worker.alive


def test_workers_leave_no_cgroup_behind():
    with Sandbox(workers=1) as pool:
        pool.run("def f():\n    return 1\n", [Call(name="f")])
        (worker,) = pool._all
        if worker.cgroup is None:
            pytest.skip("no writable cgroup hierarchy here (not root, or cgroupfs read-only)")
        dirs = worker.cgroup.dirs
        assert all(os.path.exists(d) for d in dirs)
    assert dirs and not any(os.path.exists(d) for d in dirs)


def test_refuses_to_run_without_isolation(monkeypatch):
    isolation.resolve_backend.cache_clear()
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    try:
        with pytest.raises(SandboxUnavailable, match="backend='unsafe'"):
            Sandbox()
    finally:
        isolation.resolve_backend.cache_clear()


def test_refuses_when_bwrap_cannot_make_namespaces(monkeypatch):
    isolation.resolve_backend.cache_clear()
    failed = subprocess.CompletedProcess([], 1, "", "bwrap: No permissions to creating new namespace")
    monkeypatch.setattr(isolation.subprocess, "run", lambda *a, **k: failed)
    try:
        with pytest.raises(SandboxUnavailable, match="No permissions"):
            Sandbox()
    finally:
        isolation.resolve_backend.cache_clear()


def test_unsafe_backend_runs_code_when_asked_for():
    with Sandbox(workers=1, backend="unsafe") as pool:
        assert not pool.isolated
        r = pool.run("def f(x):\n    return x + 1\n", [Call(name="f", args=[1])])
        assert r.results[0].value == 2


def test_limits_are_validated():
    with pytest.raises(ValueError, match="call_timeout"):
        Limits(call_timeout=0)
    assert Limits(total_timeout=2.5).cpu_time == 4


def test_the_warm_up_leaves_no_trace_in_the_zygote():
    """The zygote serves sample submissions to itself before any fork (so the harness's bytecode
    is quickened once, not in every child): it must write nothing to its stdout (the host's
    pipe), leave no descriptor open, and keep no program state."""
    script = (
        "import os, sys, gc; sys.path.insert(0, sys.argv[1]); import zygote\n"
        "before = sorted(os.listdir('/proc/self/fd'))\n"
        "zygote.Child.warm_up(3)\n"
        "gc.collect()\n"
        "assert sorted(os.listdir('/proc/self/fd')) == before, (before, os.listdir('/proc/self/fd'))\n"
        "assert not any(isinstance(o, zygote.Child) for o in gc.get_objects())\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-s", "-B", "-c", script, os.path.dirname(isolation.__file__)],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""


PRELOADED = (
    "import os\n"
    "LOADED_IN = os.getpid()\n"
    "seen = []\n"
    "def where():\n"
    "    return {'loaded_elsewhere': LOADED_IN != os.getpid(), 'uid': os.getuid()}\n"
    "def push(x):\n"
    "    seen.append(x)\n"
    "    return list(seen)\n"
)


@pytest.fixture(scope="module")
def preloaded():
    with Sandbox(Limits(call_timeout=5), workers=1, preload=Preload(PRELOADED, warm_up=(Call(name="where"),))) as sandbox:
        yield sandbox


def test_a_preloaded_program_is_loaded_before_the_fork_and_runs_unprivileged(preloaded, box):
    """Its module body ran once, in the worker (another process than the run's), and its calls
    run in the child, as unprivileged as any program's."""
    got = preloaded.run(PRELOADED, [Call(name="where")]).results[0].value
    plain = box.run(PRELOADED, [Call(name="where")]).results[0].value
    assert got["loaded_elsewhere"] and not plain["loaded_elsewhere"]
    assert got["uid"] == plain["uid"]


def test_each_run_of_a_preloaded_program_starts_from_its_loaded_state(preloaded):
    """Every run is a fresh copy: what one changes in the program's state, the next never sees."""
    assert [preloaded.run(PRELOADED, [Call(name="push", args=[i])]).results[0].value for i in range(3)] == [[0], [1], [2]]
    with preloaded.session(PRELOADED) as session:
        assert [session.call(Call(name="push", args=[i])).value for i in range(2)] == [[0], [0, 1]]


def test_other_programs_run_as_usual_in_a_preloading_sandbox(preloaded):
    """Only that exact program starts preloaded; any other code is loaded by its own child."""
    code = PRELOADED + "\n"
    assert not preloaded.run(code, [Call(name="where")]).results[0].value["loaded_elsewhere"]
    assert preloaded.run(PRELOADED, [Call(name="nothing")]).results[0].error
    assert "SyntaxError" in preloaded.run("def (", []).load_error
