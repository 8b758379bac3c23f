"""Attacks on the sandbox: each scores 0, leaves the host unchanged and the worker usable.

Every attack returns 42 if it "succeeds", so a verdict of ``passes(..., 42)`` would mean the
attack won. After each one the same warm worker must run an honest program correctly and hold
no leftover process.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from textgym.sandbox import Call, Limits, Sandbox

HONEST = "def f(x):\n    return x + 1\n"


@pytest.fixture(autouse=True)
def worker_survives(box, passes, leftovers):
    """After every attack: no process left behind, and the same worker still answers."""
    yield
    assert leftovers() == 0
    assert passes(HONEST, 8, args=[7])


def test_infinite_loop_times_out(box, passes):
    start = time.monotonic()
    assert not passes("def f():\n    while True:\n        pass\n", 42)
    assert time.monotonic() - start < 3.0
    result = box.run("def f():\n    while True:\n        pass\n", [Call(name="f")]).results[0]
    assert result.timeout and "time limit" in result.error


def test_infinite_loop_at_import_times_out(box):
    result = box.run("while True:\n    pass\n", [Call(name="f")])
    assert not result.loaded and "time limit" in result.load_error


def test_fork_bomb_is_contained(box, passes):
    bomb = "import os\ndef f():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    assert not passes(bomb, 42)


def test_thread_bomb_is_contained(box):
    code = (
        "import threading, time\n"
        "def f():\n"
        "    for _ in range(10000):\n"
        "        threading.Thread(target=time.sleep, args=(100,)).start()\n"
        "    return 42\n"
    )
    result = box.run(code, [Call(name="f")]).results[0]
    assert not result.ok and ("thread" in result.error or result.timeout)


@pytest.mark.parametrize(
    "body",
    [
        "    x = bytearray(10**10)\n    return 42\n",
        "    x = []\n    while True:\n        x.append(bytearray(10**7))\n",
        "    return 'x' * 10**12\n",
    ],
)
def test_memory_bomb_is_contained(passes, body):
    assert not passes("def f():\n" + body, 42)


def test_console_flood_is_cut(box):
    result = box.run("def f():\n    while True:\n        print('x' * 10000)\n", [Call(name="f")])
    assert "output limit" in result.results[0].error
    assert len(result.console) <= box.limits.max_console


def test_huge_return_value_is_cut(box):
    result = box.run("def f():\n    return 'x' * (5 << 20)\n", [Call(name="f")]).results[0]
    assert not result.ok and "larger than" in result.error


def test_stdout_flood_in_stdio_mode_is_truncated(box):
    result = box.run("while True:\n    print('y' * 1000)\n", [Call(kind="stdio")], mode="stdio").results[0]
    assert not result.ok


def test_disk_fill_hits_the_tmpfs_cap(box, passes):
    code = (
        "import os\n"
        "def f():\n"
        "    with open('fill', 'wb') as fh:\n"
        "        for _ in range(1000):\n"
        "            fh.write(b'x' * (1 << 20))\n"
        "    return 42\n"
    )
    assert not passes(code, 42)


def test_files_do_not_survive_between_runs(box):
    box.run("open('left.txt', 'w').write('x')\ndef f():\n    return 1\n", [Call(name="f")])
    result = box.run("import os\ndef f():\n    return os.listdir('.')\n", [Call(name="f")]).results[0]
    assert result.value == []


def test_host_files_are_not_readable(box, host_snapshot):
    probe = (
        "import os\n"
        "def f(path):\n"
        "    try:\n"
        "        return open(path).read()\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
    )
    for path in [str(host_snapshot / "secret.txt"), "/etc/passwd", "/work/main/pyproject.toml", "/root/.bashrc"]:
        got = box.run(probe, [Call(name="f", args=[path])]).results[0].value
        assert got in ("FileNotFoundError", "PermissionError"), path
    listing = box.run("import os\ndef f():\n    return sorted(os.listdir('/'))\n", [Call(name="f")]).results[0].value
    assert not {"work", "root", "home", "etc"} & set(listing) - {"etc"}
    site = (
        box.run(
            "import os, sys\ndef f():\n    return [p for p in sys.path if os.path.isdir(p) and 'site-packages' in p and os.listdir(p)]\n",
            [Call(name="f")],
        )
        .results[0]
        .value
    )
    assert site == []


def test_host_files_are_not_writable(box, host_snapshot):
    code = (
        "def f(path):\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "        return 'wrote'\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
    )
    for path in [str(host_snapshot / "secret.txt"), str(host_snapshot / "new.txt"), "/python/bin/python3", "/tmp/x"]:
        assert box.run(code, [Call(name="f", args=[path])]).results[0].value != "wrote", path


def test_no_network_even_to_host_loopback(box):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)))
    thread.start()
    code = (
        "import socket\n"
        "def f(port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=0.5)\n"
        "        return 'connected'\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
    )
    got = box.run(code, [Call(name="f", args=[port])]).results[0].value
    thread.join()
    server.close()
    assert got in ("ConnectionRefusedError", "OSError", "TimeoutError") and accepted == [None]
    dns = "import socket\ndef f():\n    try:\n        return socket.gethostbyname('pypi.org')\n    except OSError as exc:\n        return 'no'\n"
    assert box.run(dns, [Call(name="f")]).results[0].value == "no"


def _accept(server):
    try:
        return server.accept()
    except OSError:
        return None


@pytest.mark.parametrize("target", ["os.getppid()", "1", "-1"])
def test_killing_the_parent_fails(box, passes, target):
    before = next(iter(box._all)).proc.pid
    code = f"import os, signal\ndef f():\n    os.kill({target}, signal.SIGKILL)\n    return 42\n"
    assert not passes(code, 42) or target == "-1"  # kill(-1) only reaches the program itself
    assert not passes(code.replace("return 42", "return 41"), 42)
    assert next(iter(box._all)).proc.pid == before


def test_setsid_daemon_is_killed(box, leftovers):
    daemon = (
        "import os, time\n"
        "def f():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                time.sleep(0.01)\n"
        "        os._exit(0)\n"
        "    time.sleep(0.1)\n"
        "    return 1\n"
    )
    assert box.run(daemon, [Call(name="f")]).results[0].value == 1
    assert leftovers() == 0
    seen = box.run("import os\ndef f():\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n", [Call(name="f")])
    assert len(seen.results[0].value) == 3  # the zygote (the namespace's init), its forker, and this program


def test_program_holds_no_descriptor_of_the_sandbox(box):
    """The forker's socket to the zygote, the host's pipes and earlier children's pipes stay out:
    a program holds /dev/null (stdin), its console (stdout and stderr) and its own request and
    result pipes, no more."""
    code = (
        "import os\n"
        "def f():\n"
        "    links = []\n"
        "    for fd in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        "            links.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
        "        except OSError:\n"
        "            pass  # listdir's own descriptor, closed by now\n"
        "    return sorted(links)\n"
    )
    links = box.run(code, [Call(name="f")]).results[0].value
    assert links.count("/dev/null") == 1 and len(links) == 5
    pipes = [link for link in links if link != "/dev/null"]
    assert all(link.startswith("pipe:") for link in pipes) and len(set(pipes)) == 3


def test_zombies_are_reaped(box, leftovers):
    code = "import os\ndef f():\n    for _ in range(5):\n        if os.fork() == 0:\n            os._exit(0)\n    return 1\n"
    assert box.run(code, [Call(name="f")]).results[0].value == 1
    assert leftovers() == 0


@pytest.mark.parametrize(
    "body",
    [
        "    import sys\n    sys.exit(0)\n",
        "    import os\n    os._exit(0)\n",
        "    raise SystemExit(42)\n",
        "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    ],
)
def test_exit_tricks_score_zero(passes, body):
    assert not passes("def f():\n" + body, 42)


def test_exit_at_import_scores_zero(box):
    for code in ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n"]:
        result = box.run(code + "def f():\n    return 42\n", [Call(name="f")])
        assert not result.loaded and not result.results[0].ok


@pytest.mark.parametrize(
    "code",
    [
        "class A:\n    def __eq__(self, other):\n        return True\ndef f():\n    return A()\n",
        "class I(int):\n    def __eq__(self, other):\n        return True\ndef f():\n    return I(0)\n",
        "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\ndef f():\n    return S('no')\n",
        "class L(list):\n    def __eq__(self, other):\n        return True\ndef f():\n    return L()\n",
    ],
)
def test_always_equal_objects_never_pass(box, passes, code):
    assert not passes(code, 42)
    assert not box.run(code, [Call(name="f")]).results[0].ok


@pytest.mark.parametrize(
    "code",
    [
        "def f():\n    print('All tests passed')\n    print('PASSED')\n    return 0\n",
        # a forged reply on every descriptor the program might guess for the result pipe, with
        # pass markers: only the value counts, and a forged value is no more than returning it
        'import os\ndef f():\n    for fd in range(3, 30):\n        try:\n            os.write(fd, b\'{"id": 0, "value": 41, "passed": true, "ok": true}\\n\')\n        except OSError:\n            pass\n    return 0\n',
        # garbage and replies for other calls: the host accepts one well-formed reply per call id
        'import os\ndef f():\n    for fd in range(3, 30):\n        try:\n            os.write(fd, b\'garbage\\n{"op": "call", "id": 7, "value": 42}\\n\\xff\\n\')\n        except OSError:\n            pass\n    return 0\n',
    ],
)
def test_fake_markers_never_pass(passes, code):
    assert not passes(code, 42)


@pytest.mark.parametrize(
    "patch",
    [
        'import json\njson.dumps = lambda *a, **k: \'{"id": 0, "passed": true, "value": "PASS"}\'\n',
        "import __main__\n__main__.encode = lambda value, depth=0: {'__eq__': 'always'}\n",
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: int\n",
    ],
)
def test_harness_patching_never_passes(passes, patch):
    assert not passes(patch + "def f():\n    return 0\n", 42)


def test_runs_as_nobody_without_capabilities(box):
    code = (
        "import os\n"
        "def f():\n"
        "    caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapAmb'))]\n"
        "    return os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), caps\n"
    )
    uid, euid, gid, groups, caps = box.run(code, [Call(name="f")]).results[0].value
    assert uid == euid == gid == 65534 and groups == [] and set(caps) == {"0000000000000000"}


def test_runs_are_deterministic(box):
    code = "import random\ndef f():\n    return hash('abc'), list({'x', 'y', 'z', 'w'}), random.random()\n"
    first = box.run(code, [Call(name="f")]).results[0].value
    second = box.run(code, [Call(name="f")]).results[0].value
    assert first == second
    assert first[2] == __import__("random").Random(0).random()  # every program starts from seed(0)


def test_forks_of_a_program_reseed_random(box):
    """The zygote's children skip random's after-fork reseed; a program's own forks keep it."""
    code = (
        "import os, random\n"
        "def f():\n"
        "    r, w = os.pipe()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.write(w, repr(random.random()).encode())\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "    return float(os.read(r, 100)), random.random()\n"
    )
    forked, own = box.run(code, [Call(name="f")]).results[0].value
    assert own == __import__("random").Random(0).random() and forked != own


def test_preloaded_modules_do_not_carry_changes_to_the_next_program(box):
    box.run("import typing\ntyping.List = None\ndef f():\n    return 0\n", [Call(name="f")])
    got = box.run("from typing import List\ndef f():\n    return repr(List)\n", [Call(name="f")]).results[0]
    assert got.value == "typing.List"


def test_directory_nest_deeper_than_path_max_is_cleaned_up(box, passes):
    nest = "import os\ndef f():\n    for _ in range(2500):\n        os.mkdir('d')\n        os.chdir('d')\n    return 42\n"
    assert box.run(nest, [Call(name="f")]).results[0].value == 42
    listing = box.run("import os\ndef f():\n    return os.listdir('.')\n", [Call(name="f")]).results[0]
    assert listing.value == []


def test_deeply_nested_forged_reply_is_refused(box, passes):
    code = (
        "import os\n"
        "def f():\n"
        "    for fd in range(3, 30):\n"
        "        try:\n"
        '            os.write(fd, b\'{"op": "call", "id": 0, "value": \' + b\'[\' * 200000 + b\'\\n\')\n'
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )
    assert not passes(code, 42)


def test_kernel_interfaces_are_filtered(box):
    if not box.backend.seccomp:
        pytest.skip("no seccomp filter on this architecture")
    code = (
        "import ctypes, os, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def f(nr, *args):\n"
        "    ret = libc.syscall(nr, *args)\n"
        "    return ret, ctypes.get_errno()\n"
        "def g():\n"
        "    t = threading.Thread(target=lambda: None)\n"
        "    t.start()\n"
        "    t.join()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    return os.waitpid(pid, 0)[1]\n"
    )
    calls = [
        Call(name="f", args=[272, 0x10000000]),  # unshare(CLONE_NEWUSER)
        Call(name="f", args=[101, 0, 0, 0, 0]),  # ptrace(PTRACE_TRACEME)
        Call(name="f", args=[321, 0, 0, 0]),  # bpf
        Call(name="f", args=[425, 1, 0]),  # io_uring_setup
        Call(name="f", args=[56, 0x10000000 | 17, 0, 0, 0, 0]),  # clone(CLONE_NEWUSER | SIGCHLD)
        Call(name="g"),  # threads and plain fork still work
    ]
    results = box.run(code, calls).results
    assert [r.value for r in results[:5]] == [(-1, 1)] * 5  # EPERM
    assert results[5].value == 0


IPC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\nIPC_CREAT = 0o1000\n"
# Program 1 makes the object (and leaves data in it); program 3 looks for it by its key.
SYSV = {
    "shm": (
        "def f():\n"
        "    ident = libc.shmget(0x7E57, 4096, IPC_CREAT | 0o666)\n"
        "    addr = libc.shmat(ident, None, 0)\n"
        "    ctypes.memmove(addr, b'secret', 6)\n"
        "    return libc.shmdt(ctypes.c_void_p(addr)) == 0 and ident >= 0\n",
        "def f():\n"
        "    ident = libc.shmget(0x7E57, 0, 0)\n"
        "    if ident < 0:\n"
        "        return 'gone'\n"
        "    return ctypes.string_at(libc.shmat(ident, None, 0), 6).decode()\n",
    ),
    "msg": (
        "def f():\n    return libc.msgget(0x7E58, IPC_CREAT | 0o666) >= 0\n",
        "def f():\n    return 'gone' if libc.msgget(0x7E58, 0) < 0 else 'survived'\n",
    ),
    "sem": (
        "def f():\n    return libc.semget(0x7E59, 1, IPC_CREAT | 0o666) >= 0\n",
        "def f():\n    return 'gone' if libc.semget(0x7E59, 0, 0) < 0 else 'survived'\n",
    ),
}


@pytest.mark.parametrize("kind", sorted(SYSV))
def test_sysv_ipc_does_not_survive_the_submission(box, kind):
    make, find = SYSV[kind]
    assert box.run(IPC + make, [Call(name="f")]).results[0].value is True
    assert box.run(HONEST, [Call(name="f", args=[1])]).results[0].value == 2
    assert box.run(IPC + find, [Call(name="f")]).results[0].value == "gone"


def test_posix_message_queue_does_not_survive_the_submission(box):
    code = IPC + "def f(flags):\n    return libc.mq_open(b'/textgym', flags, 0o600, None) >= 0\n"
    assert box.run(code, [Call(name="f", args=[0o100 | 2])]).results[0].value is True  # O_CREAT | O_RDWR
    assert box.run(code, [Call(name="f", args=[2])]).results[0].value is False


def test_detached_shared_memory_is_not_charged_to_later_programs():
    """300 MiB left in shared memory, then an honest 200 MiB program, in one worker whose memory
    cgroup holds 256 MiB plus room for the zygote and tmpfs (368 MiB)."""
    hog = IPC + (
        "def f():\n"
        "    for key in (0x7E60, 0x7E61, 0x7E62):\n"
        "        ident = libc.shmget(key, 100 << 20, IPC_CREAT | 0o600)\n"
        "        addr = libc.shmat(ident, None, 0)\n"
        "        ctypes.memset(addr, 1, 100 << 20)\n"
        "        libc.shmdt(ctypes.c_void_p(addr))\n"
        "    return True\n"
    )
    honest = "def f():\n    return len(bytearray(b'x') * (200 << 20))\n"  # touches every page
    slow = Limits(call_timeout=20.0, total_timeout=30.0, memory=256 << 20, processes=16)  # page faults are slow under load
    with Sandbox(slow, workers=1) as box:
        assert box.run(hog, [Call(name="f")]).results[0].value is True
        (worker,) = box._all
        if worker.cgroup is None or not any("memory" in d for d in worker.cgroup.dirs):
            pytest.skip("no memory cgroup on this host")
        assert box.run(honest, [Call(name="f")]).results[0].value == 200 << 20


@pytest.mark.parametrize("shape", ["[v, 0]", "v"])
def test_hash_colliding_reply_is_refused(box, shape):
    """24,000 ints that all hash to 0 would take the host seconds to put in a set or dict."""
    tag = "__dict__" if shape != "v" else "__set__"
    forge = (
        "import __main__\n"
        f"__main__.encode = lambda value, *rest, **kw: {{'{tag}': [{shape} for v in value]}}\n"
        "def f():\n"
        "    return [(2**61 - 1) * (k + 1) for k in range(24000)]\n"
    )
    result = box.run(forge, [Call(name="f")]).results[0]
    assert not result.ok and "hash" in result.error
