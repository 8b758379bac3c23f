"""``textgym serve <id>``: bind, build the app, run uvicorn until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import socket
import sys

from textgym.error import TextGymError
from textgym.remote import TOKEN_VARIABLE, checked_token, shared_token
from textgym.serve.deadline import REQUEST_TIMEOUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from textgym.arguments import json_object

    parser.add_argument("env_id", help="environment id, e.g. textgym/Sudoku-v0")
    parser.add_argument("--env-kwargs", type=json_object, default={}, help="JSON object of env keyword arguments")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port, printed at start)")
    parser.add_argument("--max-sessions", type=int, default=1024, help="concurrent WebSocket sessions (env instances)")
    parser.add_argument(
        "--session-timeout", type=float, default=None, metavar="SECONDS", help="close sessions idle this long (default: never)"
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"shared secret every client sends as 'Authorization: Bearer <token>' (default: ${TOKEN_VARIABLE}); "
        "recommended whenever --host is not loopback",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to connect (e.g. https://example.org; '*': any); repeatable",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name allowed besides localhost and IP addresses (e.g. env.example.org; '*': any); repeatable",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="close a connection that takes longer to send a whole request",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from textgym.arguments import make_env
    from textgym.serve.app import WS_MAX_BYTES, EnvServer, create_app
    from textgym.serve.deadline import with_deadline

    if not 0 <= args.port < 65536:
        raise ValueError(f"--port must be in [0, 65535], got {args.port}")
    if args.max_sessions < 1:
        raise ValueError(f"--max-sessions must be >= 1, got {args.max_sessions}")
    if args.session_timeout is not None and args.session_timeout <= 0:
        raise ValueError(f"--session-timeout must be > 0, got {args.session_timeout:g}")
    if args.request_timeout <= 0:
        raise ValueError(f"--request-timeout must be > 0, got {args.request_timeout:g}")
    try:
        token = checked_token(shared_token(args.token))
    except ValueError as exc:
        raise ValueError(f"--token (or ${TOKEN_VARIABLE}): {exc}") from None
    server = EnvServer(
        args.env_id,
        args.env_kwargs,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout,
        make_env=make_env,
    )
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    app = create_app(server, token=token, allow_origins=args.allow_origin, allow_hosts=args.allow_host)
    config = uvicorn.Config(
        app,
        http=with_deadline(args.request_timeout),
        log_level="warning",
        ws="websockets-sansio",
        ws_max_size=WS_MAX_BYTES,
        backlog=max(2048, args.max_sessions),
        timeout_graceful_shutdown=5,
    )
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it to the handler it found: a no-op
    # one makes a requested shutdown exit with status 0 rather than die by the signal.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    print(f"serving {args.env_id} on ws://{host}:{port}/ws (up to {args.max_sessions} sessions)", flush=True)
    if token is None and not _loopback(host):
        print(
            f"warning: listening on {host} without a token: anyone who reaches this port can play (see docs/serving.md, Security)",
            file=sys.stderr,
            flush=True,
        )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, for uvicorn to serve on; a port in use is a one-line TextGymError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise TextGymError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
