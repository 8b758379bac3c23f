"""The warm worker that runs inside the isolation: one per core, fork per program.

This file runs as a script under ``python -I -S -B`` inside the sandbox and imports only the
standard library (never ``textgym``). It starts once, imports what a run needs, then serves
JSON-line requests from the host on stdin:

* ``{"op": "open", "code": ...}`` forks a child that drops to the unprivileged uid, applies the
  resource limits, and executes the program; the reply says whether it loaded.
* ``{"op": "call", "id": ..., "kind": "function" | "stdio", ...}`` runs one test in that child;
  the reply carries the output as a *typed plain value* (see :func:`encode`) or the error.
* ``{"op": "close"}`` kills every process the program made (setsid daemons included), reaps
  them, wipes the private tmp dir and returns what the program printed to its console.

The zygote enforces the wall-clock limits, caps every byte it reads from the child, and never
receives expected outputs: verdicts are decided on the host. A child that times out, crashes
or breaks the protocol is killed; the next call of the same program forks a fresh child.
"""

import builtins
import io
import json
import os
import random
import resource
import select
import signal
import sys
import time
import traceback

SOLUTION_FILE = "solution.py"
_FENCE = 0x7FFFFFFF


# ----------------------------------------------------------------- typed plain values ---

def encode(value, depth=0):
    """A JSON tree for a program's output, built from exact builtin types only.

    Lists, str-keyed dicts, str, int, float, bool and None stay as they are; tuples, sets and
    other dicts are tagged one-key objects so the host can rebuild them faithfully. Anything else
    (including subclasses such as an ``int`` with a custom ``__eq__``) is refused, so no object
    with behaviour ever leaves the sandbox.
    """
    if depth > 100:
        raise ValueError("the value is nested more than 100 levels deep")
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return value
    if t is list:
        return [encode(v, depth + 1) for v in value]
    if t is tuple:
        return {"__tuple__": [encode(v, depth + 1) for v in value]}
    if t in (set, frozenset):
        return {"__set__": [encode(v, depth + 1) for v in value]}
    if t is dict:
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"returned a {t.__name__}, which is not a plain value (int, float, str, bool, None, list, tuple, dict, set)")


def decode(tree):
    """Inverse of ``encode`` for call arguments sent by the host (also tagged)."""
    if isinstance(tree, list):
        return [decode(v) for v in tree]
    if isinstance(tree, dict):
        if "__tuple__" in tree:
            return tuple(decode(v) for v in tree["__tuple__"])
        if "__set__" in tree:
            return {decode(v) for v in tree["__set__"]}
        if "__dict__" in tree:
            return {decode(k): decode(v) for k, v in tree["__dict__"]}
        return {k: decode(v) for k, v in tree.items()}
    return tree


def short_traceback(exc, limit=6):
    """The exception with only the program's own frames: no harness or host paths."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SOLUTION_FILE][-limit:]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)[-4000:]


# ---------------------------------------------------------------------- the child ---

class Child:
    """Code that runs in the forked child, after privileges are dropped."""

    def __init__(self, req_fd, res_fd, cfg):
        self.requests = os.fdopen(req_fd, "rb", buffering=0)
        self.results = res_fd
        self.cfg = cfg
        self.namespace = {}
        self.code = None

    def serve(self, program):
        try:
            self.code = compile(program, SOLUTION_FILE, "exec", dont_inherit=True)
            if self.cfg.get("mode") == "function":
                self.namespace = {"__name__": "solution", "__builtins__": builtins}
                exec(self.code, self.namespace)
            self.reply({"loaded": True})
        except BaseException as exc:  # the program's own failure, reported to the agent
            self.reply({"loaded": False, "error": short_traceback(exc)})
            return
        reader = io.BufferedReader(self.requests, buffer_size=1 << 16)
        for line in iter(reader.readline, b""):
            req = json.loads(line)
            self.reply(self.run(req))

    def reply(self, message):
        for stream in (sys.stdout, sys.stderr):  # console output reaches the zygote before the reply
            try:
                stream.flush()
            except Exception:
                pass
        data = (json.dumps(message, allow_nan=True) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.results, view):]

    def run(self, req):
        reply = {"id": req["id"]}
        try:
            if req["kind"] == "stdio":
                reply.update(self.run_stdio(req.get("input", "")))
            else:
                fn = self.namespace.get(req["name"])
                if not callable(fn):
                    raise NameError(f"the program defines no function {req['name']!r}")
                value = fn(*decode(req.get("args", [])), **decode(req.get("kwargs", {})))
                reply["value"] = encode(value)
        except SystemExit as exc:
            reply["error"] = f"the program called exit({exc.code!r})"
        except BaseException as exc:
            reply["error"] = short_traceback(exc)
        return reply

    def run_stdio(self, text):
        """Run the whole program as ``__main__`` with ``text`` on fd 0 and fd 1 captured."""
        cap = int(self.cfg["max_output"])
        for fd in (0, 1, 2):  # a previous run may have closed them (``open(0)`` does, once collected)
            try:
                os.fstat(fd)
            except OSError:
                os.open("/dev/null", os.O_RDWR)  # takes the lowest free number: this one
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, text.encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        stdout_fd = os.memfd_create("stdout")
        console = os.dup(1)
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)))
        error = None
        try:
            exec(self.code, {"__name__": "__main__", "__builtins__": builtins})
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = f"the program called exit({exc.code!r})"
        except BaseException as exc:
            error = short_traceback(exc)
        try:
            sys.stdout.flush()
        except Exception:  # a closed or broken stdout is the program's problem, not ours
            pass
        os.dup2(console, 1)
        size = os.lseek(stdout_fd, 0, os.SEEK_END)
        out = os.pread(stdout_fd, cap, 0).decode(errors="replace")
        for fd in (stdin_fd, stdout_fd, console):
            os.close(fd)
        reply = {"value": out, "truncated": size > cap}
        if error:
            reply["error"] = error
        return reply


# --------------------------------------------------------------------- the zygote ---

class Zygote:
    """Forks one child per program, relays calls, enforces time and output limits, cleans up."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.isolated = bool(cfg["isolated"])
        self.workdir = cfg["workdir"]
        self.child = None  # (pid, req_w, res_r, con_r)
        self.program = None
        self.load_error = None
        self.deadline = 0.0
        self.console = bytearray()
        self.console_truncated = False

    # -- requests --

    def handle(self, req):
        op = req.get("op")
        if op == "open":
            return self.open(req)
        if op == "call":
            return self.call(req)
        if op == "close":
            return self.close()
        return {"error": f"unknown op {op!r}"}

    def open(self, req):
        self.close()
        self.program = req["code"]
        self.mode = req.get("mode", "function")
        self.deadline = time.monotonic() + float(self.cfg["total_timeout"])
        self.load_error = None
        reply = self.fork()
        return {"op": "open", **reply}

    def call(self, req):
        reply = {"op": "call", "id": req["id"]}
        if self.program is None:
            return {**reply, "error": "no program is open"}
        if self.load_error is not None:
            return {**reply, "error": self.load_error, "skipped": True}
        if time.monotonic() >= self.deadline:
            return {**reply, "error": "the submission's total time limit was reached", "timeout": True}
        if self.child is None:
            loaded = self.fork()
            if not loaded.get("loaded"):
                return {**reply, "error": loaded.get("error", "the program did not load")}
        pid, req_w, res_r, con_r = self.child
        try:
            os.write(req_w, (json.dumps({**req, "op": None}) + "\n").encode())
        except OSError:
            self.kill_all()
            return {**reply, "error": "the program closed its input"}
        answer = self.wait_reply(float(self.cfg["call_timeout"]))
        if "id" in answer and answer.get("id") != req["id"]:
            self.kill_all()
            return {**reply, "error": "the program broke the harness protocol"}
        answer.pop("id", None)
        return {**reply, **answer}

    def close(self):
        if self.child is not None:
            self.drain_console(self.child[3])
        self.kill_all()
        self.clean_workdir()
        console = bytes(self.console).decode(errors="replace")
        truncated = self.console_truncated
        self.program = None
        self.console = bytearray()
        self.console_truncated = False
        return {"op": "close", "console": console, "truncated": truncated}

    # -- the child's life --

    def fork(self):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        con_r, con_w = os.pipe()
        os.makedirs(self.workdir, exist_ok=True)
        if self.cfg.get("uid") is not None:
            os.chown(self.workdir, self.cfg["uid"], self.cfg["gid"])
        pid = os.fork()
        if pid == 0:  # child
            try:
                for fd in (req_w, res_r, con_r):
                    os.close(fd)
                self.become_child(req_r, res_w, con_w)
            finally:
                os._exit(70)
        for fd in (req_r, res_w, con_w):
            os.close(fd)
        for fd in (res_r, con_r):
            os.set_blocking(fd, False)
        self.child = (pid, req_w, res_r, con_r)
        answer = self.wait_reply(float(self.cfg["call_timeout"]))
        if not answer.get("loaded"):
            self.load_error = answer.get("error") or "the program did not load"
            self.kill_all()
            return {"loaded": False, "error": self.load_error}
        return {"loaded": True}

    def become_child(self, req_r, res_w, con_w):
        os.setsid()
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(con_w, 1)
        os.dup2(con_w, 2)
        for fd in (devnull, con_w):
            os.close(fd)
        cfg = self.cfg
        limits = (
            (resource.RLIMIT_AS, cfg["memory"]),
            (resource.RLIMIT_CPU, cfg["cpu_time"]),
            (resource.RLIMIT_FSIZE, cfg["file_size"]),
            (resource.RLIMIT_NOFILE, cfg["open_files"]),
            (resource.RLIMIT_NPROC, cfg["processes"]),
            (resource.RLIMIT_CORE, 0),
        )
        for which, value in limits:
            resource.setrlimit(which, (int(value), int(value)))
        if cfg.get("uid") is not None:
            os.setgroups([])
            os.setgid(cfg["gid"])
            os.setuid(cfg["uid"])
        set_no_new_privs()
        os.chdir(self.workdir)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        random.seed(0)
        Child(req_r, res_w, {**cfg, "mode": self.mode}).serve(self.program)

    def wait_reply(self, timeout):
        """Read one JSON line from the child within ``timeout`` (and the submission deadline)."""
        pid, _, res_r, con_r = self.child
        end = min(time.monotonic() + timeout, self.deadline)
        buf = bytearray()
        limit = int(self.cfg["max_result"])
        watch = [res_r, con_r]
        while True:
            left = end - time.monotonic()
            if left <= 0:
                self.kill_all()
                return {"error": f"time limit exceeded ({timeout:g} s)", "timeout": True}
            ready, _, _ = select.select(watch, [], [], left)
            if con_r in ready:
                alive = self.drain_console(con_r)
                if alive is None:
                    watch = [res_r]
                elif not alive:
                    self.kill_all()
                    return {"error": f"output limit exceeded ({self.cfg['max_console']} bytes)", "output_limit": True}
            if res_r not in ready:
                continue
            try:
                chunk = os.read(res_r, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return {"error": self.death_reason(), "crashed": True}
            buf += chunk
            if b"\n" in buf:
                line = bytes(buf[: buf.index(b"\n")])
                try:
                    answer = json.loads(line)
                except ValueError:
                    answer = None
                if not isinstance(answer, dict):
                    self.kill_all()
                    return {"error": "the program broke the harness protocol"}
                return answer
            if len(buf) > limit:
                self.kill_all()
                return {"error": f"the result is larger than {limit} bytes", "output_limit": True}

    def drain_console(self, fd):
        """Keep up to ``max_console`` bytes of console output.

        Returns False once the program floods it, None at end of file, else True.
        """
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                return None
            room = int(self.cfg["max_console"]) - len(self.console)
            self.console += chunk[: max(room, 0)]
            if len(chunk) > room:
                self.console_truncated = True
                return False

    def death_reason(self):
        """Why the child exited without replying; it is reaped here."""
        pid = self.child[0]
        self.kill_all(reap_status_of=pid)
        status = self.last_status
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            hint = {"SIGKILL": " (memory or process limit?)", "SIGXCPU": " (CPU time limit)"}.get(name, "")
            return f"the program was killed by {name}{hint}"
        code = os.WEXITSTATUS(status) if status is not None else "?"
        return f"the program exited (status {code}) before returning a result"

    def kill_all(self, reap_status_of=None):
        """Kill every process the program made and reap every zombie."""
        self.last_status = None
        if self.child is None:
            return
        pid, req_w, res_r, con_r = self.child
        self.child = None
        for fd in (req_w, res_r, con_r):
            os.close(fd)
        me = os.getpid()
        for _ in range(10000):
            if self.isolated:
                # Our own PID namespace: -1 reaches every process in it except init and us,
                # including setsid daemons that left the child's session.
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            else:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.reap(pid)
            if not self.isolated or not [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]:
                break
            time.sleep(0.0005)
        if not self.isolated:
            try:
                _, status = os.waitpid(pid, 0)
                self.last_status = status
            except ChildProcessError:
                pass

    def reap(self, pid):
        while True:
            try:
                got, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if got == 0:
                return
            if got == pid:
                self.last_status = status

    def clean_workdir(self):
        import shutil

        shutil.rmtree(self.workdir, ignore_errors=True)


_libc = None


def set_no_new_privs():
    """PR_SET_NO_NEW_PRIVS: nothing the program executes can gain privileges."""
    if _libc is not None:
        _libc.prctl(38, 1, 0, 0, 0)


def load_libc():
    """libc through ctypes, for prctl; optional, since the isolation does not rely on it."""
    global _libc
    try:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    except Exception:
        _libc = None


def main():
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    cfg = json.loads(stdin.readline())
    load_libc()
    if _libc is not None:
        _libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us to be reaped
    builtins.exit = builtins.quit = sys.exit  # -S skips site, which normally provides them
    zygote = Zygote(cfg)
    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    for line in iter(stdin.readline, b""):
        try:
            reply = zygote.handle(json.loads(line))
        except Exception as exc:  # never let one bad request take the worker down silently
            reply = {"op": "error", "error": f"{type(exc).__name__}: {exc}"}
        stdout.write((json.dumps(reply, allow_nan=True) + "\n").encode())
        stdout.flush()
    zygote.close()


if __name__ == "__main__":
    main()
