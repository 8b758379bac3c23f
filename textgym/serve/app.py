"""The ASGI app behind ``textgym serve``: OpenEnv's routes over one textgym env id.

* ``WS /ws``: one connection is one session and one env instance, for as many episodes as the
  client plays. Every bad frame gets an ``error`` frame and the session goes on; a disconnect,
  a ``close`` frame or ``session_timeout`` seconds of silence frees the env; past
  ``max_sessions`` a connection gets ``CAPACITY_REACHED`` and is closed.
* ``POST /reset`` and ``POST /step``: OpenEnv's stateless routes, a fresh env per request.
  ``/step`` first resets that env with the body's ``seed``/``options``, so it scores a one-turn
  episode (a whole Sudoku answer, one Code submission); multi-turn episodes need ``/ws``.
* ``GET /health``, ``/metadata``, ``/schema``.

Every env call runs in a thread pool, never on the event loop: one slow call (a pinned puzzle
searched to its budget, a sandboxed program running to its time limit) must not stall the other
sessions or ``/health``. Before any route, :class:`~textgym.serve.guard.Guard` refuses foreign
origins and hosts, bodies that are not JSON or are too large, and requests without the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import gymnasium as gym
import orjson
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response
from starlette.websockets import WebSocketDisconnect

from textgym.serve.guard import Guard
from textgym.serve.protocol import (
    ACTION_SCHEMA,
    OBSERVATION_SCHEMA,
    STATE_SCHEMA,
    ErrorCode,
    ProtocolError,
    error_frame,
    parse_frame,
    state_frame,
)
from textgym.serve.session import Session

MAX_FRAME_BYTES = 1 << 20  # a client frame larger than this gets an error reply
WS_MAX_BYTES = 16 << 20  # uvicorn's own cap: a larger frame closes the connection (1009)


class EnvServer:
    """The sessions of one served env id, and how its env calls run."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        max_sessions: int = 1024,
        session_timeout: float | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        make_env: Callable[..., gym.Env] = gym.make,
    ):
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if session_timeout is not None and session_timeout <= 0:
            raise ValueError(f"session_timeout must be > 0 seconds, got {session_timeout}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.max_sessions = max_sessions
        self.session_timeout = session_timeout
        self.max_frame_bytes = max_frame_bytes
        self._make_env = make_env
        self.sessions: dict[Session, WebSocket | None] = {}
        self.reserved = 0  # connections admitted, env not yet made
        self.new_session().close()  # fail at start, not per connection, on a bad id or kwargs

    @property
    def active(self) -> int:
        return len(self.sessions) + self.reserved

    def new_session(self) -> Session:
        # Gymnasium's passive checker is for developing an env; after a failed first reset it
        # breaks every later step of that instance, so served envs go without it.
        return Session(self._make_env(self.env_id, disable_env_checker=True, **self.env_kwargs), self.env_id)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn`` in the thread pool, so that the event loop never waits for an env."""
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def handle(self, session: Session, kind: str, data: Any) -> str:
        if kind == "reset":
            payload = await self.run(session.reset, data)
        elif kind == "step":
            payload = await self.run(session.step, data)
        else:
            return state_frame(session.state())
        return b"".join((b'{"type":"observation","data":', payload, b"}")).decode()

    async def serve(self, websocket: WebSocket) -> None:
        """Play one connection's session until it closes."""
        await websocket.accept()
        if self.active >= self.max_sessions:
            message = f"the server holds its maximum of {self.max_sessions} sessions; retry later"
            await _send_and_close(
                websocket, error_frame(ErrorCode.CAPACITY_REACHED, message, active_sessions=self.active, max_sessions=self.max_sessions)
            )
            return
        self.reserved += 1
        try:
            session = await self.run(self.new_session)
        except Exception as exc:  # the env could be made at start, so this is the host (memory, files)
            await _send_and_close(websocket, error_frame(ErrorCode.SESSION_ERROR, f"cannot make {self.env_id}: {exc}"))
            return
        finally:
            self.reserved -= 1
        self.sessions[session] = websocket
        try:
            await self._loop(websocket, session)
        except WebSocketDisconnect:
            pass
        finally:
            del self.sessions[session]
            await self.run(session.close)
            with contextlib.suppress(Exception):
                await websocket.close()

    async def _loop(self, websocket: WebSocket, session: Session) -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            session.last_active = time.monotonic()
            raw = message.get("text")
            raw = message.get("bytes") or b"" if raw is None else raw
            try:
                kind, data = parse_frame(raw, self.max_frame_bytes)
                if kind == "close":
                    return
                reply = await self.handle(session, kind, data)
            except ProtocolError as exc:
                reply = error_frame(exc.code, str(exc))
            except Exception as exc:  # the env itself failed: report it, keep the session
                session.done = True
                reply = error_frame(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}")
            await websocket.send_text(reply)
            session.last_active = time.monotonic()

    async def reap(self) -> None:
        """Close sessions idle for longer than ``session_timeout`` (runs for the app's life)."""
        timeout = self.session_timeout
        assert timeout is not None, "reap runs only with a session_timeout"
        period = min(1.0, timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session, websocket in list(self.sessions.items()):
                if now - session.last_active > timeout and websocket is not None:
                    self.sessions[session] = None  # reaped once
                    message = f"session closed after {self.session_timeout:g} s without a frame"
                    asyncio.create_task(_send_and_close(websocket, error_frame(ErrorCode.SESSION_ERROR, message)))

    async def stateless(self, kind: str, body: bytes) -> Response:
        """OpenEnv's ``POST /reset`` and ``POST /step``: a fresh env for one request."""
        try:
            data = orjson.loads(body or b"{}")
        except orjson.JSONDecodeError as exc:
            return _http_error(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}")
        if not isinstance(data, dict):
            return _http_error(ErrorCode.VALIDATION_ERROR, "the request body must be a JSON object")
        session = await self.run(self.new_session)
        try:
            if kind == "reset":
                payload = await self.run(session.reset, data)
            else:
                reset = {k: data[k] for k in ("seed", "options") if k in data}
                await self.run(session.reset, reset)
                payload = await self.run(session.step, data.get("action"))
        except ProtocolError as exc:
            return _http_error(exc.code, str(exc))
        finally:
            await self.run(session.close)
        return Response(payload, media_type="application/json")

    def close_all(self) -> None:
        for session in list(self.sessions):
            session.close()
        self.sessions.clear()


def create_app(
    server: EnvServer,
    *,
    token: str | None = None,
    allow_origins: Iterable[str] = (),
    allow_hosts: Iterable[str] = (),
) -> FastAPI:
    """The FastAPI app serving ``server``'s env id, behind :class:`~textgym.serve.guard.Guard`
    (``token``, ``allow_origins`` and ``allow_hosts`` are its)."""
    import textgym
    from textgym.registration import ENVS

    description = next((e.description for e in ENVS if e.id == server.env_id), "")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        reaper = asyncio.create_task(server.reap()) if server.session_timeout else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
            server.close_all()

    app = FastAPI(title=f"textgym: {server.env_id}", version=textgym.__version__, lifespan=lifespan)
    app.add_middleware(Guard, token=token, allow_origins=allow_origins, allow_hosts=allow_hosts, max_body=server.max_frame_bytes)
    app.add_api_websocket_route("/ws", server.serve)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        return {
            "name": server.env_id,
            "description": description,
            "readme_content": None,
            "version": textgym.__version__,
            "author": None,
            "documentation_url": None,
        }

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        return await server.stateless("reset", await request.body())

    @app.post("/step")
    async def step(request: Request) -> Response:
        return await server.stateless("step", await request.body())

    return app


def _http_error(code: ErrorCode, message: str) -> JSONResponse:
    return JSONResponse({"detail": message, "code": code.value}, status_code=422)


async def _send_and_close(websocket: WebSocket, frame: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.send_text(frame)
        await websocket.close()
