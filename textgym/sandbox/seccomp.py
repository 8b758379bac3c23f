"""A seccomp filter for the sandbox: the kernel interfaces a test program never needs, refused.

Namespaces and the uid drop already keep a program from the host; this narrows the kernel
attack surface behind them. The filter is a classic BPF program written here (no libseccomp
needed) and loaded by bubblewrap (``--seccomp FD``) right before it starts the zygote, so it
binds the zygote and every child. Refused calls fail with ``EPERM`` (``clone3`` with ``ENOSYS``,
so that libc falls back to ``clone``, whose flags the filter can inspect). Only x86-64 is
covered; elsewhere :func:`filter_program` returns None and the sandbox runs without it.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

# x86-64 syscall numbers. Tracing other processes, namespaces and mounts, kernel keyrings, BPF,
# perf, userfaultfd and io_uring (the usual kernel-exploit entry points), modules, clocks, swap,
# reboot, and handle-based opens that bypass the mount namespace.
DENIED = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "acct": 163,
    "quotactl": 179,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "lookup_dcookie": 212,
    "fanotify_init": 300,
    "personality": 135,
    "vmsplice": 278,
}
CLONE, CLONE3 = 56, 435
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args are u64, little-endian)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program() -> bytes | None:
    """The BPF program as bwrap reads it (an array of ``struct sock_filter``), or None off x86-64.

    Layout (``D`` denied calls; BPF jumps only forward, ``jt``/``jf`` count from the next
    instruction)::

        0      load arch;  1: x86-64? (else 2: EPERM)
        3      load nr;    4: x32 ABI -> EPERM
        5..    one "nr == denied -> EPERM" per call
        5+D    clone3 -> ENOSYS;  6+D: clone? (else allow);  7+D: load flags;  8+D: namespaces? -> EPERM
        9+D    ALLOW;  10+D: EPERM;  11+D: ENOSYS
    """
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    denied = sorted(set(DENIED.values()))
    d = len(denied)
    allow, deny, enosys = 9 + d, 10 + d, 11 + d
    prog = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ, AUDIT_ARCH_X86_64, jt=1),
        _op(_RET, _ERRNO | errno.EPERM),
        _op(_LD_W_ABS, _NR),
        _op(_JGE, X32_SYSCALL_BIT, jt=deny - 5),
    ]
    prog += [_op(_JEQ, nr, jt=deny - (5 + i) - 1) for i, nr in enumerate(denied)]
    prog += [
        _op(_JEQ, CLONE3, jt=enosys - (5 + d) - 1),
        _op(_JEQ, CLONE, jf=allow - (6 + d) - 1),
        _op(_LD_W_ABS, _ARG0),
        _op(_JSET, CLONE_NAMESPACES, jt=deny - (8 + d) - 1),
        _op(_RET, _ALLOW),
        _op(_RET, _ERRNO | errno.EPERM),
        _op(_RET, _ERRNO | errno.ENOSYS),
    ]
    assert len(prog) == enosys + 1 and deny - 5 <= 255, "the filter layout is off"
    return b"".join(prog)
