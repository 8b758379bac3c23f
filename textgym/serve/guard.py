"""What a served env refuses before any route sees a request: forged, foreign or oversized ones.

A browser lets any page it shows send a WebSocket handshake or a "simple" cross-site POST to
127.0.0.1, and a page whose DNS name is rebound to 127.0.0.1 reaches the server under its own
name. :class:`Guard` wraps any ASGI app (``textgym serve``'s, or OpenEnv's ``create_app``'s) and
refuses, with one line saying why:

* a request with an ``Origin`` header (only browsers send one) that is not the server's own
  origin nor in ``allow_origins`` (403);
* a ``Host`` that is neither ``localhost``, an IP address, nor in ``allow_hosts`` (403): DNS
  rebinding always arrives under the attacker's name;
* without the shared ``token`` as ``Authorization: Bearer <token>``, when one is set (401;
  ``GET /health`` stays open for load balancers; :class:`TokenGuard` checks this alone);
* a request with a body that is not ``application/json`` (415), or larger than ``max_body``
  (413), so no HTML form or ``text/plain`` request can be one.

``"*"`` in an allow-list allows any value.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable
from typing import Any

LOCAL_NAMES = ("localhost", "localhost.localdomain")
BODYLESS = ("GET", "HEAD", "OPTIONS")


class Guard:
    """ASGI middleware refusing what a page in a browser could forge (see the module docstring).

    Args:
        app: The ASGI app to guard.
        token: A shared secret every request must carry as ``Authorization: Bearer <token>``.
        allow_origins: Browser origins (``https://example.org``) allowed besides the server's own.
        allow_hosts: ``Host`` names allowed besides ``localhost`` and IP addresses.
        max_body: Bytes of one request body.
    """

    def __init__(
        self,
        app: Any,
        *,
        token: str | None = None,
        allow_origins: Iterable[str] = (),
        allow_hosts: Iterable[str] = (),
        max_body: int = 1 << 20,
    ):
        from textgym.remote import checked_token

        self.app = app
        self.token = None if checked_token(token) is None else token.encode("ascii")  # an empty one is refused, not "no token"
        self.allow_origins = {o.rstrip("/").lower() for o in allow_origins}
        self.allow_hosts = {h.lower() for h in allow_hosts}
        self.max_body = int(max_body)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            status, message = refusal
            if scope["type"] == "websocket":
                await _refuse_websocket(receive, send, status, message)
            else:
                await _respond(send, status, message)
            return None
        if scope["type"] == "http" and scope["method"] not in BODYLESS:
            return await self._capped(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _capped(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve a request whose body (chunked: no length said up front) stops at ``max_body``."""
        seen, started = 0, False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _TooLarge
            return message

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _respond(send, 413, f"the request body exceeds the limit of {self.max_body} bytes")

    def refusal(self, scope: dict[str, Any], headers: dict[str, str]) -> tuple[int, str] | None:
        """``(status, why)`` for a request to refuse, None for one to serve."""
        host = headers.get("host", "")
        if not self._host_allowed(host):
            return 403, f"Host {host!r} is not allowed (DNS rebinding guard); start the server with --allow-host {_name(host)}"
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, scope, host):
            return 403, f"Origin {origin!r} is not allowed (cross-site request); start the server with --allow-origin {origin}"
        if not (scope["type"] == "http" and scope["path"] == "/health" and scope["method"] == "GET") and not authorized(
            headers, self.token
        ):
            return 401, UNAUTHORIZED
        if scope["type"] == "http" and scope["method"] not in BODYLESS:
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return 415, f"the request body must be application/json, got {kind or 'no content type'!r}"
            length = headers.get("content-length", "0")
            if not length.isdigit():
                return 400, "Content-Length must be a number"
            if int(length) > self.max_body:
                return 413, f"the request body of {length} bytes exceeds the limit of {self.max_body}"
        return None

    def _host_allowed(self, host: str) -> bool:
        name = _name(host)
        if "*" in self.allow_hosts or name in self.allow_hosts or name in LOCAL_NAMES:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def _origin_allowed(self, origin: str, scope: dict[str, Any], host: str) -> bool:
        origin = origin.rstrip("/").lower()
        scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
        own = f"{scheme}://{host.lower()}"
        return "*" in self.allow_origins or origin in self.allow_origins or (bool(host) and origin == own)


UNAUTHORIZED = "missing or wrong token: send 'Authorization: Bearer <token>' (the server's --token)"


def authorized(headers: dict[str, str], token: bytes | None) -> bool:
    """Whether a request's (lower-cased, Latin-1 decoded) headers carry ``token`` as a bearer
    token; any request is when there is no token. Compared in constant time."""
    if token is None:
        return True
    scheme, _, given = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("latin-1"), token)


class TokenGuard:
    """ASGI middleware refusing every request without the shared token (401), and nothing else:
    for an app that checks Host and Origin itself (the MCP SDK's transport does)."""

    def __init__(self, app: Any, *, token: str):
        from textgym.remote import checked_token

        self.app = app
        self.token = checked_token(token).encode("ascii")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            if not authorized(headers, self.token):
                if scope["type"] == "websocket":
                    return await _refuse_websocket(receive, send, 401, UNAUTHORIZED)
                return await _respond(send, 401, UNAUTHORIZED)
        return await self.app(scope, receive, send)


def _name(host: str) -> str:
    """The name of a ``Host`` header, without its port (``[::1]:8000`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _TooLarge(BaseException):
    """A body past the limit; not an ``Exception``, so the app's error handlers let it through."""


async def _respond(send: Any, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse_websocket(receive: Any, send: Any, status: int, message: str) -> None:
    """Refuse a handshake with an HTTP status and the reason (ASGI's denial response), or a
    plain close (403) where the server cannot send one."""
    await receive()  # websocket.connect
    body = json.dumps({"detail": message}).encode()
    try:
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
    except (RuntimeError, KeyError, ValueError):
        await send({"type": "websocket.close", "code": 1008})
