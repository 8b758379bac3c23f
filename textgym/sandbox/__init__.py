"""A sandbox for untrusted Python: isolated, resource-limited, warm, and reusable by any env.

Programs run in bubblewrap namespaces (no network, no host files beyond the interpreter and its
standard library, a private tmpfs) as an unprivileged uid with no capabilities, inside a cgroup
that caps processes and memory. Each worker is a warm zygote that forks one child per program.
Outputs leave as plain values and are compared on the host, never inside. See docs/sandbox.md
for what is contained and how, and what is not.
"""

from textgym.error import SandboxUnavailable
from textgym.sandbox.limits import Limits
from textgym.sandbox.pool import Sandbox, Session, default_workers, shared_sandbox
from textgym.sandbox.program import Call, CallResult, Preload, RunResult, same_stdout, values_equal

__all__ = [
    "Call",
    "CallResult",
    "Limits",
    "Preload",
    "RunResult",
    "Sandbox",
    "SandboxUnavailable",
    "Session",
    "default_workers",
    "same_stdout",
    "shared_sandbox",
    "values_equal",
]
