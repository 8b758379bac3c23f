"""The floor of a fresh process per submission: what a child of the warm zygote costs by itself.

Outside any isolation (no bubblewrap, cgroup or seccomp, so a lower bound), this process is
made into what the sandbox's zygote is before it forks (``textgym/sandbox/zygote.py``'s
``main``: ``random`` seeded, ``typing`` preloaded, the harness warmed, ``gc.freeze()``), then
forks children that

* ``exit``: only exit (fork, copy-on-write of what exiting writes, teardown);
* ``serve``: serve HumanEval/0's canonical solution as a sandbox child does (the open request
  and its 7 calls through pipes: JSON, compile, exec, the calls, the replies).

CPU is ``getrusage`` of this process (the parent's side of fork and wait) and of its reaped
children; minor faults are the copies on write. Medians over the rounds.

Run (with the interpreter the sandbox runs, as the zygote does: ``-S -s -B``)::

    python -S -s -B benchmarks/fork_floor.py 5

(the one argument is the number of rounds; no ``argparse`` or ``statistics``: every module this
process imports is memory each child shares, and the zygote imports neither).
"""

import gc
import json
import os
import resource
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "textgym", "sandbox"))  # the zygote's own file, as it runs
import zygote  # noqa: E402 - found through the path inserted above

# HumanEval/0 as Code-v0 sends it: the prompt with the canonical solution, and its 7 calls.
PROGRAM = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2:
                distance = abs(elem - elem2)
                if distance < threshold:
                    return True

    return False
'''
ARGS = [
    [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3],
    [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05],
    [[1.0, 2.0, 5.9, 4.0, 5.0], 0.95],
    [[1.0, 2.0, 5.9, 4.0, 5.0], 0.8],
    [[1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1],
    [[1.1, 2.2, 3.1, 4.1, 5.1], 1.0],
    [[1.1, 2.2, 3.1, 4.1, 5.1], 0.5],
]
REQUESTS = "".join(
    [json.dumps({"op": "open", "code": PROGRAM, "mode": "function"}) + "\n"]
    + [
        json.dumps({"op": "call", "id": i, "kind": "function", "name": "has_close_elements", "args": a, "kwargs": {}}) + "\n"
        for i, a in enumerate(ARGS)
    ]
).encode()


def usage():
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime, own.ru_minflt, reaped.ru_minflt


def child_once(serve):
    if serve:
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        os.write(req_w, REQUESTS)
        os.close(req_w)
    pid = os.fork()
    if pid == 0:
        if serve:
            os.close(res_r)
            zygote.Child(req_r, res_w, {}).serve()
        os._exit(0)
    if serve:
        os.close(req_r)
        os.close(res_w)
        replies = b""
        while chunk := os.read(res_r, 1 << 16):
            replies += chunk
        os.close(res_r)
        assert replies.count(b"\n") == 1 + len(ARGS) and b'"error"' not in replies, replies[:300]
    os.waitpid(pid, 0)


def main():
    rounds, children = (int(sys.argv[1]) if len(sys.argv) > 1 else 5), 200
    zygote.import_random_seeded()
    for name in zygote.PRELOAD:
        __import__(name)
    zygote.Child.warm_up(zygote.WARM_UP_PASSES)
    gc.freeze()
    rows = {"exit": [], "serve": []}
    for _ in range(rounds):
        for kind in rows:
            before = usage()
            for _ in range(children):
                child_once(kind == "serve")
            rows[kind].append([(b - a) / children for a, b in zip(before, usage())])
    print(f"load average {os.getloadavg()[0]:.1f}; per child (medians of {rounds} rounds of {children}):")
    print("| child | parent CPU ms | child CPU ms | total ms | parent faults | child faults |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, v in rows.items():
        p, c, pf, cf = (sorted(x[i] for x in v)[len(v) // 2] for i in range(4))
        print(f"| {kind} | {1000 * p:.2f} | {1000 * c:.2f} | {1000 * (p + c):.2f} | {pf:.0f} | {cf:.0f} |")


if __name__ == "__main__":
    main()
