"""``textgym serve <id>``: bind, build the app, run uvicorn until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import socket

from textgym.error import TextGymError


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


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from textgym.arguments import make_env
    from textgym.serve.app import WS_MAX_BYTES, EnvServer, create_app

    if not 0 <= args.port < 65536:
        raise ValueError(f"--port must be in [0, 65535], got {args.port}")
    if args.max_sessions < 1:
        raise ValueError(f"--max-sessions must be >= 1, got {args.max_sessions}")
    if args.session_timeout is not None and args.session_timeout <= 0:
        raise ValueError(f"--session-timeout must be > 0, got {args.session_timeout:g}")
    server = EnvServer(
        args.env_id,
        args.env_kwargs,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout,
        make_env=make_env,
    )
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        create_app(server),
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
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _bind(host: str, port: int) -> socket.socket:
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


