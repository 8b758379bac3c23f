"""The warm worker that runs inside the isolation: one per core, fork per program.

This file runs as a script (``python -S -s -B -P``) inside the sandbox and imports only the
standard library, never ``textgym``; the host imports it too, for :func:`encode` and
:func:`decode`. It starts once (PID 1 of the sandbox), does the interpreter's lazy first-use
work, starts its :class:`Forker`, which keeps one child forked ahead (already unprivileged), and
serves JSON-line requests from the host on stdin:

* ``{"op": "open", "code": ..., "mode": "function" | "stdio"}`` hands the program to the spare
  child, which loads it (or finds it loaded: see :func:`preload`); the reply says whether it
  loaded (or why not).
* ``{"op": "call", "id": ..., "kind": "function" | "stdio", ...}`` runs one test in that child;
  the reply carries the output as a *typed plain value* (see :func:`encode`) or the error.
* ``{"op": "close"}`` returns what the program printed to its console; right after the reply the
  forker kills every process the program made (setsid daemons included), reaps them, and forks
  the next spare in a wiped private tmp dir.

The zygote enforces the wall-clock limits, caps every byte it reads from the child, and never
receives expected outputs: verdicts are decided on the host. A child that times out, crashes
or breaks the protocol is killed; the remaining calls of the same program go to a fresh child.
"""

import builtins
import collections
import gc
import io
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback

SOLUTION_FILE = "solution.py"
# Imported once in the zygote, so that a program importing them finds them loaded: typing is
# what most annotated code imports first (21 of HumanEval's 164 prompts), and importing it costs
# a child ~2.5 ms; ast is what the check program of Code tasks reads checks with (~9 ms a child
# here). Every child is a fresh copy, so a program that changes one changes only its own.
PRELOAD = ("typing", "ast")
PRELOADED = None  # (code, namespace) of the host's own program, loaded once by ``preload``


# What Child.warm_up serves (well under a pipe's capacity, so it needs no reader meanwhile).
WARM_UP_PASSES = 24
_SAMPLE = "def _w(x, *rest, k=None):\n    if x == 'raise':\n        raise ValueError(x)\n    return [x, (x, k), {'k': x}, {x: rest}, {1, 2}, *rest]\n"
_CALLS = ([1], [1.5, "s"], ["t", [1, None]], [True], ["raise"])
WARM_UP = (
    "".join(
        [json.dumps({"op": "open", "code": _SAMPLE, "mode": "function"}) + "\n"]
        + [
            json.dumps({"op": "call", "id": i, "kind": "function", "name": "_w", "args": a, "kwargs": {"k": {"__tuple__": [i]}}}) + "\n"
            for i, a in enumerate(_CALLS)
        ]
        + [json.dumps({"op": "call", "id": 9, "kind": "function", "name": "_missing", "args": [], "kwargs": {}, "refs": True}) + "\n"]
    ).encode(),
    (json.dumps({"op": "open", "code": "def (", "mode": "function"}) + "\n").encode(),
)

# ----------------------------------------------------------------- typed plain values ---


def encode(value, depth=0, keep=None):
    """A JSON tree for a program's output, built from exact builtin types only.

    Lists, str-keyed dicts, str, int, float, bool and None stay as they are; tuples, sets and
    other dicts are tagged one-key objects so the host can rebuild them faithfully. Anything else
    (including subclasses such as an ``int`` with a custom ``__eq__``) is refused, so no object
    with behaviour ever leaves the sandbox; with ``keep`` (a check's calls), it stays in the
    sandbox instead and leaves as ``{"__ref__": keep(value)}``, a handle the host can only pass
    back (:class:`Ref`).
    """
    if depth > 100:
        raise ValueError("the value is nested more than 100 levels deep")
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return value
    if t is list:
        return [encode(v, depth + 1, keep) for v in value]
    if t is tuple:
        return {"__tuple__": [encode(v, depth + 1, keep) for v in value]}
    if t in (set, frozenset):
        return {"__set__": [encode(v, depth + 1, keep) for v in value]}
    if t is dict:
        return {"__dict__": [[encode(k, depth + 1, keep), encode(v, depth + 1, keep)] for k, v in value.items()]}
    if t is Ref:
        return {"__ref__": value.id}
    if keep is not None:
        return {"__ref__": keep(value), "type": t.__name__[:100]}
    raise TypeError(f"returned a {t.__name__}, which is not a plain value (int, float, str, bool, None, list, tuple, dict, set)")


class Ref:
    """On the host, an object of the program that stayed in the sandbox (MBPP's ``Pair(5, 24)``).

    It can only be passed back to the same program, in a later call: any other use (comparing,
    arithmetic, truth, iteration) raises ``TypeError``, so no verdict can rest on it.
    """

    __slots__ = ("id", "type")

    def __init__(self, ident, type_name="object"):
        self.id, self.type = ident, str(type_name)

    def __repr__(self):
        return f"<{self.type} #{self.id} of the program>"

    def _refuse(self, *args, **kwargs):
        raise TypeError(f"the program returned {self!r}, which is not a plain value: it stays in the sandbox")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = __contains__ = _refuse
    __getitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __mod__ = __pow__ = __neg__ = __abs__ = __float__ = __int__ = __index__ = __round__ = _refuse
    __hash__ = object.__hash__


# Distinct set elements (or dict keys) that may share one hash value. Honest values almost never
# have two; a forged reply of thousands (ints k * (2**61 - 1) all hash to 0) would make building
# the set on the host quadratic, outside every limit of the sandbox.
MAX_SAME_HASH = 16


def decode(tree, objects=None):
    """Inverse of :func:`encode`: builtin values again (call arguments here, results on the host).

    ``{"__ref__": i}`` is ``objects[i]`` in the sandbox (the program's kept objects) and a
    :class:`Ref` on the host (``objects`` None). Linear in the size of ``tree``: sets and dicts
    whose keys collide in hash are refused (``ValueError``) before they are built.
    """
    if isinstance(tree, list):
        return [decode(v, objects) for v in tree]
    if isinstance(tree, dict):
        if "__tuple__" in tree:
            return tuple(decode(v, objects) for v in tree["__tuple__"])
        if "__set__" in tree:
            return set(_spread([decode(v, objects) for v in tree["__set__"]]))
        if "__dict__" in tree:
            pairs = [(decode(k, objects), decode(v, objects)) for k, v in tree["__dict__"]]
            _spread([k for k, _ in pairs])
            return dict(pairs)
        if "__ref__" in tree:
            ident = tree["__ref__"]
            if type(ident) is not int or not (objects is None or 0 <= ident < len(objects)):
                raise ValueError(f"no object #{ident!r} of the program")
            return Ref(ident, tree.get("type", "object")) if objects is None else objects[ident]
        return {k: decode(v, objects) for k, v in tree.items()}
    return tree


def _spread(keys):
    """``keys``, unless more than ``MAX_SAME_HASH`` of them share a hash (``ValueError``)."""
    counts = {}
    for key in keys:
        h = hash(key)  # distinct hash values never collide fully in this dict: it stays linear
        counts[h] = counts.get(h, 0) + 1
        if counts[h] > MAX_SAME_HASH:
            raise ValueError(f"more than {MAX_SAME_HASH} set elements or dict keys share one hash value")
    return keys


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
        self.requests = io.FileIO(req_fd, "rb")
        self.results = res_fd
        self.cfg = cfg
        self.namespace = {}
        self.objects = []  # what the program returned that is not plain data (see ``encode``'s keep)
        self.code = None

    def serve(self):
        """Wait (pre-forked, already unprivileged) for the program, load it, then answer calls."""
        reader = io.BufferedReader(self.requests, buffer_size=1 << 16)
        first = reader.readline()
        if not first:
            return
        load = json.loads(first)
        try:
            if PRELOADED is not None and load.get("mode") == "function" and load["code"] == PRELOADED[0]:
                self.namespace = PRELOADED[1]  # this child's copy: what a run changes there stays in it
                self.reply({"loaded": True})
            else:
                self.load(load)
        except BaseException as exc:  # the program's own failure, reported to the agent
            self.reply({"loaded": False, "error": short_traceback(exc)})
            return
        for line in iter(reader.readline, b""):
            self.reply(self.run(json.loads(line)))

    def load(self, load):
        """Compile the program and, as a function module, run it."""
        self.code = compile(load["code"], SOLUTION_FILE, "exec", dont_inherit=True)
        if load.get("mode") == "function":
            self.namespace = {"__name__": "solution", "__builtins__": builtins}
            exec(self.code, self.namespace)
        self.reply({"loaded": True})

    @staticmethod
    def warm_up(passes, samples=WARM_UP):
        """Serve each sample submission ``passes`` times in the zygote, before any fork, as a
        child does (by default: load, calls with every kind of value, a raising call, a missing
        function, a program that does not load; see :func:`preload` for the others).

        CPython initialises a lot lazily on first use, and its adaptive interpreter rewrites a
        function's bytecode in place over its first runs (quickening, then specialising each
        instruction). Done here, that state is shared by every child instead of rebuilt, and
        copied on write, in each: a run's setup drops from milliseconds to a fraction of one.
        """
        for _ in range(passes):
            for sample in samples:
                requests = os.memfd_create("warm-up")  # files, not pipes: a sample of any size fits
                replies = os.memfd_create("warm-up")
                os.write(requests, sample)
                os.lseek(requests, 0, os.SEEK_SET)
                Child(requests, replies, {}).serve()  # its reader closes ``requests`` once collected
                os.close(replies)
        io.TextIOWrapper(io.BufferedReader(io.BytesIO(b"x\n"))).read()

    def reply(self, message):
        for stream in (sys.stdout, sys.stderr):  # console output reaches the zygote before the reply
            try:
                stream.flush()
            except Exception:
                pass
        data = (json.dumps(message, allow_nan=True) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.results, view) :]

    def run(self, req):
        reply = {"op": "call", "id": req["id"]}
        try:
            if req["kind"] == "stdio":
                reply.update(self.run_stdio(req.get("input", "")))
            else:
                fn = self.namespace.get(req["name"])
                if not callable(fn):
                    raise NameError(f"the program defines no function {req['name']!r}")
                value = fn(*decode(req.get("args", []), self.objects), **decode(req.get("kwargs", {}), self.objects))
                reply["value"] = encode(value, keep=self.keep if req.get("refs") else None)
        except SystemExit as exc:
            reply["error"] = f"the program called exit({exc.code!r})"
        except BaseException as exc:
            reply["error"] = short_traceback(exc)
        return reply

    def keep(self, value):
        self.objects.append(value)
        return len(self.objects) - 1

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
            assert self.code is not None, "a stdio run follows a load"
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
    """Keeps one pre-forked child ready, relays calls, enforces limits, and cleans up.

    A *spare* child is forked (and drops its privileges) by the :class:`Forker` while the zygote
    is idle, so opening a program costs one pipe write. Calls queued by the host are forwarded
    to the child together; each one's time limit starts when the previous answer arrives. A
    child that dies or times out is killed with everything it started; the remaining calls go
    to a fresh child.
    """

    def __init__(self, cfg, stdin_fd, stdout):
        self.cfg = cfg
        self.stdin_fd = stdin_fd
        self.stdout = stdout
        self.inbox = bytearray()
        self.backlog = collections.deque()  # requests read ahead but not handled yet
        self.spare = None  # a Proc waiting for a program
        self.child = None  # the Proc running the open program
        self.program = None
        self.load_error = None
        self.deadline = 0.0
        self.console = bytearray()
        self.console_truncated = False
        self.last_status = None
        self.forker = None  # our end of the socket to the Forker

    # -- the host side --

    def serve(self):
        self.forker = start_forker(self.cfg)
        self.spare = self.fork()
        self.send({"ready": True})
        self.stdout.flush()
        while True:
            got = self.next_request(block=True)
            if got is None:
                break
            req = got[0]
            op = req.get("op")
            if op == "open":
                self.open(got[1])
            elif op == "call":
                self.run_calls([got, *self.queued_calls()], sent=False)
            elif op == "close":
                self.send(self.close())
            else:
                self.send({"op": "error", "error": f"unknown request {req!r:.200}"})
            if self.program is None and not self.backlog and (self.child or not self.spare):
                # Once the reply is out (the host reads it meanwhile) the forker kills, reaps,
                # removes IPC objects, and only then forks the next spare: its bookkeeping then
                # writes to no page that a live child shares, which would copy each such page.
                self.stdout.flush()
                self.kill_all()
                self.spare = self.spare or self.fork()
        self.kill_all()

    def next_request(self, block):
        """The next request from the host as ``(parsed, raw line)``; None at end of input (or,
        unblocked, when none is waiting)."""
        if self.backlog:
            return self.backlog.popleft()
        end = self.inbox.find(b"\n")
        while end < 0:
            if not select.select([self.stdin_fd], [], [], 0)[0]:
                if not block:
                    return None
                self.stdout.flush()  # replies go out together, right before we would wait
            chunk = os.read(self.stdin_fd, 1 << 16)
            if not chunk:
                return None
            self.inbox += chunk
            end = chunk.find(b"\n")
            end = end if end < 0 else len(self.inbox) - len(chunk) + end
        line = bytes(self.inbox[:end])
        del self.inbox[: end + 1]  # cheap at the front of a bytearray: the queue stays linear
        if line.startswith(CALL):  # relayed to the child as it is: parsed only if we must answer it
            return {"op": "call"}, line + b"\n"
        if line.startswith(OPEN):  # the program too: the child parses it
            return {"op": "open"}, line + b"\n"
        try:
            req = json.loads(line)
        except ValueError:
            req = None
        return (req if isinstance(req, dict) else {"op": "bad"}), line + b"\n"

    def send(self, reply):
        """Queue one reply; they are flushed before the zygote waits for the host again."""
        self.stdout.write((json.dumps(reply, allow_nan=True) + "\n").encode())

    # -- requests --

    def open(self, raw):
        """Load a program (``raw``: the host's request line, which the child reads as it is); the
        calls queued behind the request go to the child in the same write."""
        self.kill_all()
        self.console = bytearray()
        self.console_truncated = False
        self.program = raw
        self.deadline = time.monotonic() + float(self.cfg["total_timeout"])
        self.load_error = None
        batch = self.queued_calls()
        self.send({"op": "open", **self.load(prefetch=batch)})
        self.run_calls(batch, sent=True)

    def queued_calls(self):
        """The calls (``(parsed, raw line)``) the host already sent right behind this request."""
        batch = []
        while True:
            peek = self.next_request(block=False)
            if peek is None:
                return batch
            if peek[0].get("op") != "call":
                self.backlog.appendleft(peek)
                return batch
            batch.append(peek)

    def run_calls(self, batch, sent):
        """Answer every call of ``batch`` in order; ``sent``: already forwarded to the child.

        The host's request lines go to the child and the child's reply lines back to the host
        as they are, one line per call, without parsing: the host checks each reply's id and
        shape, and our own replies (time limit, crash, ...) replace the child's where it failed.
        """
        while batch:
            if not sent or self.child is None:
                error = self.cannot_run()
                if error is not None:
                    for _, raw in batch:
                        self.send({"op": "call", "id": request_id(raw), **error})
                    return
                assert self.child is not None  # cannot_run loaded one
                self.child.pending += b"".join(raw for _, raw in batch)
            sent = False  # after a death, what is left goes to a fresh child
            proc = self.child
            while batch and proc is self.child:
                _, raw = batch.pop(0)
                answer = self.wait_reply(float(self.cfg["call_timeout"]))
                if isinstance(answer, bytes):
                    self.stdout.write(answer + b"\n")
                else:
                    self.send({"op": "call", "id": request_id(raw), **answer})

    def cannot_run(self):
        """Why calls cannot run now (as a reply), or None once a loaded child is ready."""
        if self.program is None:
            return {"error": "no program is open"}
        if self.load_error is not None:
            return {"error": self.load_error, "skipped": True}
        if time.monotonic() >= self.deadline:
            return {"error": "the submission's total time limit was reached", "timeout": True}
        if self.child is None:
            loaded = self.load()
            if not loaded["loaded"]:
                return {"error": loaded["error"]}
        return None

    def close(self):
        """The console output; the program is killed right after this reply is sent."""
        if self.child is not None:
            self.drain_console(self.child.con_r)
        self.program = None
        return {"op": "close", "console": bytes(self.console).decode(errors="replace"), "truncated": self.console_truncated}

    # -- the child's life --

    def load(self, prefetch=()):
        """Hand the program (and ``prefetch`` calls) to the spare child and wait for it to load."""
        if self.spare is None:
            self.spare = self.fork()
        self.child, self.spare = self.spare, None
        assert self.program is not None, "load runs with a program open"
        self.child.pending += self.program + b"".join(raw for _, raw in prefetch)
        answer = self.wait_reply(float(self.cfg["call_timeout"]))
        if isinstance(answer, bytes):
            answer = _as_dict(answer)
        if not answer.get("loaded"):
            self.load_error = answer.get("error") or "the program did not load"
            self.kill_all()
            return {"loaded": False, "error": self.load_error}
        return {"loaded": True}

    def fork(self):
        """A spare child from the forker: the ends of its pipes (non-blocking) that are ours."""
        return Proc(*self.ask(b"s"))

    def ask(self, request):
        """The forker's answer: a status for ``k``, three descriptors for ``s``.

        The forker exits when it cannot clean up (or was killed): so do we, and the worker
        restarts in fresh namespaces."""
        assert self.forker is not None, "serve starts the forker first"
        try:
            self.forker.send(request)
            answer, fds, _, _ = socket.recv_fds(self.forker, 32, 3)
        except OSError:
            os._exit(3)
        if not answer or len(fds) != (3 if request == b"s" else 0):
            os._exit(3)
        return fds or answer

    def wait_reply(self, timeout):
        """One line from the child within ``timeout`` (and the submission deadline), as bytes;
        or, when it failed to answer, our own reply as a dict."""
        proc = self.child
        assert proc is not None, "replies come from a running child"
        until = min(time.monotonic() + timeout, self.deadline)
        buf = proc.replies
        limit = int(self.cfg["max_result"])
        watch = [proc.res_r, proc.con_r]
        end = buf.find(b"\n")
        while end < 0:
            left = until - time.monotonic()
            if left <= 0:
                self.kill_all()
                return {"error": f"time limit exceeded ({timeout:g} s)", "timeout": True}
            writers = [proc.req_w] if proc.pending else []
            readable, writable, _ = select.select(watch, writers, [], left)
            if writable and not self.feed(proc):
                self.kill_all()
                return {"error": "the program closed its input"}
            if proc.con_r in readable:
                alive = self.drain_console(proc.con_r)
                if alive is None:
                    watch = [proc.res_r]
                elif not alive:
                    self.kill_all()
                    return {"error": f"output limit exceeded ({self.cfg['max_console']} bytes)", "output_limit": True}
            if proc.res_r not in readable:
                continue
            try:
                chunk = os.read(proc.res_r, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return {"error": self.death_reason(), "crashed": True}
            buf += chunk
            end = chunk.find(b"\n")  # only the new bytes are searched: linear in the reply
            end = end if end < 0 else len(buf) - len(chunk) + end
            if len(buf) > limit and end < 0:
                self.kill_all()
                return {"error": f"the result is larger than {limit} bytes", "output_limit": True}
        line = bytes(buf[:end])
        del buf[: end + 1]
        return line

    def feed(self, proc):
        """Write what the child has not read yet; False if it closed its end."""
        try:
            written = os.write(proc.req_w, proc.pending)
        except BlockingIOError:
            return True
        except OSError:
            return False
        del proc.pending[:written]
        return True

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
        self.kill_all()
        status = self.last_status
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            hint = {"SIGKILL": " (memory or process limit?)", "SIGXCPU": " (CPU time limit)"}.get(name, "")
            return f"the program was killed by {name}{hint}"
        code = os.WEXITSTATUS(status) if status is not None else "?"
        return f"the program exited (status {code}) before returning a result"

    def kill_all(self):
        """Kill the running child and every process it made (setsid daemons too), and wait
        until all are gone (the forker does it: :meth:`Forker.kill`)."""
        self.last_status = None
        proc, self.child = self.child, None
        if proc is None:
            return
        for fd in (proc.req_w, proc.res_r, proc.con_r):
            os.close(fd)
        status = self.ask(b"k")
        self.last_status = None if status == b"-" else int(status)


class Forker:
    """Forks the children, and kills and cleans up after each: the zygote's one other process.

    A fork shares every page of the parent with the child, and each page either of them writes
    afterwards is copied (a fault of several microseconds here). The zygote writes hundreds of
    pages serving one program, so it does not fork: this process does, and while a child lives
    it only waits for the zygote's next request. It runs as root like the zygote (the child can
    signal neither), talks to it over a socket that no child keeps, and takes two requests:
    ``s`` (fork a spare; its pipes' ends go to the zygote) and ``k`` (kill the child and all it
    made, clean up, answer the child's wait status).
    """

    def __init__(self, cfg, sock):
        self.cfg = cfg
        self.isolated = bool(cfg["isolated"])
        self.workdir = cfg["workdir"]
        self.sock = sock
        self.child = None  # the pid of the last child forked
        self.reseed = sys.modules["random"].seed
        self.rlimits = [
            (which, (int(value), int(value)))
            for which, value in (
                (resource.RLIMIT_AS, cfg["memory"]),
                (resource.RLIMIT_CPU, cfg["cpu_time"]),
                (resource.RLIMIT_FSIZE, cfg["file_size"]),
                (resource.RLIMIT_NOFILE, cfg["open_files"]),
                (resource.RLIMIT_NPROC, cfg["processes"]),
                (resource.RLIMIT_CORE, 0),
            )
        ]
        # Inherited by every child (set here, it costs a child no page faults): a write past
        # RLIMIT_FSIZE fails with EFBIG instead of killing the program.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def serve(self):
        while True:
            op = self.sock.recv(1)
            if op == b"s":
                self.spare()
            elif op == b"k":
                status = self.kill()
                self.sock.send(b"-" if status is None else str(status).encode())
            else:  # the zygote is gone
                return

    def spare(self):
        """Fork a spare child: unprivileged, limited, in a fresh work dir, waiting for its
        program. The zygote gets its ends of the child's pipes before the fork, so that after
        it we only close descriptors."""
        remove_tree(self.workdir)
        os.mkdir(self.workdir)
        if self.cfg.get("uid") is not None:
            os.chown(self.workdir, self.cfg["uid"], self.cfg["gid"])
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        con_r, con_w = os.pipe()
        for fd in (req_w, res_r, con_r):
            os.set_blocking(fd, False)
        socket.send_fds(self.sock, [b"s"], [req_w, res_r, con_r])
        pid = os.fork()
        if pid == 0:  # child
            try:
                self.sock.close()  # the zygote's channel never reaches a program
                for fd in (req_w, res_r, con_r):
                    os.close(fd)
                self.become_child(req_r, res_w, con_w)
            finally:
                os._exit(70)
        self.child = pid
        for fd in (req_r, res_w, con_w, req_w, res_r, con_r):
            os.close(fd)

    def become_child(self, req_r, res_w, con_w):
        os.setsid()
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(con_w, 1)
        os.dup2(con_w, 2)
        for fd in (devnull, con_w):
            os.close(fd)
        for which, value in self.rlimits:
            resource.setrlimit(which, value)
        self.drop_privileges()
        os.chdir(self.workdir)
        # The program's own forks reseed their random module, as in any Python (see main).
        os.register_at_fork(after_in_child=self.reseed)
        Child(req_r, res_w, self.cfg).serve()

    def drop_privileges(self):
        """Become the unprivileged uid (when the zygote runs as root), for good."""
        if self.cfg.get("uid") is not None:
            os.setgroups([])
            os.setgid(self.cfg["gid"])
            os.setuid(self.cfg["uid"])

    def kill(self):
        """Kill the child and every process it made (setsid daemons too), wait until all are
        gone, remove their IPC objects; the child's wait status (None if it had none).

        In our PID namespace one ``kill(-1, SIGKILL)`` reaches every process but its init (the
        zygote) and us, and is atomic with respect to ``fork``: a process being forked either
        gets the signal or is never created. The zygote asks only while no spare exists.
        """
        pid, self.child = self.child, None
        if pid is None:
            return None
        try:
            if self.isolated:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            status = os.waitpid(pid, 0)[1]
        except ChildProcessError:
            status = None
        self.settle()
        return status

    def settle(self):
        """Reap, and wait until only the zygote and us remain; then remove leftover IPC objects.

        Orphans go to the zygote, PID 1 of the namespace, which ignores ``SIGCHLD``: the kernel
        reaps them as they die."""
        if not self.isolated:
            self.reap()
            return
        for _ in range(10000):
            others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
            if not others:
                self.remove_ipc()
                return
            self.reap()
            for pid in others:  # stragglers (none are expected after kill(-1))
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.0002)

    def remove_ipc(self):
        """Remove the IPC objects the programs left in this worker's IPC namespace.

        The namespace lives as long as the worker, and killing a program does not remove its
        SysV shared memory, message queues and semaphores, or its POSIX message queues: they
        would carry data to the next program and keep their memory charged to the worker's
        cgroup. They belong to the unprivileged uid, and only their owner (or CAP_SYS_ADMIN,
        which we lack) may remove them, so a short-lived child with that uid does it.
        Should any remain, we exit (and so does the zygote) and the worker restarts in a fresh namespace.
        """
        if not any(ipc_objects()):
            return
        pid = os.fork()
        if pid == 0:
            try:
                self.drop_privileges()
                remove_ipc_objects(*ipc_objects())
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        if any(ipc_objects()):
            os._exit(3)

    def reap(self):
        while True:
            try:
                got, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if got == 0:
                return


def start_forker(cfg):
    """Fork the :class:`Forker` from the warm zygote; our end of the socket to it."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1):  # the host's pipes stay the zygote's alone
                os.dup2(devnull, fd)
            os.close(devnull)
            Forker(cfg, theirs).serve()
        finally:
            os._exit(70)
    theirs.close()
    # In the sandbox we are PID 1, so orphans of programs become ours: ignoring SIGCHLD has the
    # kernel reap them. Set after the fork: the forker and the children keep the default.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    return ours


CALL = b'{"op": "call", '  # how the host's call requests begin (``Call.request``, json.dumps)
OPEN = b'{"op": "open", '  # and its open requests (``Sandbox.run``, ``Session``)


def request_id(raw):
    """The id of a call request line, or None."""
    try:
        return json.loads(raw).get("id")
    except (ValueError, AttributeError):
        return None


def _as_dict(line):
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    return answer if isinstance(answer, dict) else {"error": "the program broke the harness protocol"}


class Proc:
    """One child, from the zygote's side: its pipes, unsent requests and unread replies."""

    def __init__(self, req_w, res_r, con_r):
        self.req_w, self.res_r, self.con_r = req_w, res_r, con_r
        self.pending = bytearray()
        self.replies = bytearray()


SYSV_IPC = ("shm", "msg", "sem")
MQUEUE = "/dev/mqueue"


def ipc_objects():
    """The ids of the SysV shared memory segments, message queues and semaphore sets, and the
    paths of the POSIX message queues, in this IPC namespace.

    Read with plain system calls (no file objects): it runs after every program."""
    found = []
    for kind in SYSV_IPC:
        fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY)
        try:
            chunks = [os.read(fd, 1 << 16)]
            while chunks[-1]:
                chunks.append(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
        rows = b"".join(chunks).split(b"\n")[1:]  # a header line, then one row per object
        found.append([int(row.split()[1]) for row in rows if row.strip()])
    try:
        found.append([os.path.join(MQUEUE, name) for name in os.listdir(MQUEUE)])
    except FileNotFoundError:
        found.append([])
    return found


def remove_ipc_objects(shm, msg, sem, queues):
    """``IPC_RMID`` each SysV object (through libc: the stdlib has no binding), unlink each queue."""
    if shm or msg or sem:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for ident in shm:
            libc.shmctl(ident, 0, None)  # 0: IPC_RMID
        for ident in msg:
            libc.msgctl(ident, 0, None)
        for ident in sem:
            libc.semctl(ident, 0, 0)
    for path in queues:
        try:
            os.unlink(path)
        except OSError:
            pass


def remove_tree(path):
    """Delete a directory tree without recursion (and without importing shutil).

    A program may nest directories deeper than the recursion limit or ``PATH_MAX``; when the
    tree cannot be removed, the zygote exits, and the worker restarts with a fresh tmpfs.
    """
    stack = [path]
    try:
        while stack:
            entries = list(os.scandir(stack[-1]))
            subdirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
            if subdirs:
                stack += subdirs
            else:
                os.rmdir(stack.pop())
    except FileNotFoundError:
        if stack and stack[-1] == path:
            return
        os._exit(3)
    except OSError:
        os._exit(3)


def import_random_seeded():
    """Import ``random`` seeded with 0, for every child to inherit as it is.

    ``random`` registers a reseed from ``os.urandom`` in every forked child (about 45 page faults
    and 0.13 ms a child here), which each child would undo with ``seed(0)`` at once. Imported
    without that hook and seeded here, every child starts from the state ``seed(0)`` gives (the
    zygote never draws from it); each child registers the hook again for the program's own forks.
    """
    register, os.register_at_fork = os.register_at_fork, lambda **hooks: None
    try:
        import random
    finally:
        os.register_at_fork = register
    random.seed(0)


def preload(spec):
    """Load the host's own program (``spec["code"]``) here, once, and serve it ``spec["warm_up"]``.

    A child that is then asked to open exactly that code, as a function module, finds it loaded
    and warm (its own copy-on-write copy of the namespace): no compile, no run of its module
    body, quickened bytecode. The code runs here, in the zygote, before any fork and with the
    zygote's privileges, so it must be the host's own (Code tasks' check program), never code
    from a task or a submission; what it is asked later, by a call, runs only in a child.
    """
    global PRELOADED
    code = spec["code"]
    namespace = {"__name__": "solution", "__builtins__": builtins}
    exec(compile(code, SOLUTION_FILE, "exec", dont_inherit=True), namespace)
    PRELOADED = (code, namespace)
    lines = [{"op": "open", "code": code, "mode": "function"}, *spec.get("warm_up", ())]
    Child.warm_up(WARM_UP_PASSES, ["".join(json.dumps(r) + "\n" for r in lines).encode()])


def main():
    stdin_fd = sys.stdin.fileno()
    line = b""
    while not line.endswith(b"\n"):  # the configuration, read unbuffered: the rest stays in the pipe
        byte = os.read(stdin_fd, 1)
        if not byte:
            return
        line += byte
    cfg = json.loads(line)
    builtins.exit = builtins.quit = sys.exit  # -S skips site, which normally provides them
    import_random_seeded()
    for name in PRELOAD:
        __import__(name)
    Child.warm_up(WARM_UP_PASSES)
    if cfg.get("preload"):
        preload(cfg["preload"])
    gc.freeze()  # forked children then leave the zygote's objects alone (fewer copy-on-write faults)
    Zygote(cfg, stdin_fd, sys.stdout.buffer).serve()


if __name__ == "__main__":
    main()
