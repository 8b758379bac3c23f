"""uvicorn's HTTP protocol with a deadline for receiving each request.

uvicorn closes an idle keep-alive connection, but not one that connects and sends nothing, nor
one that sends half a request (slowloris): each holds a socket and its buffers for as long as
the client likes. Here a connection has ``request_timeout`` seconds from its start (and from
each response) to deliver a whole request, headers and body; one taking longer is closed. The
deadline is absolute, so trickling a byte at a time does not extend it. Once a request is in,
or the connection became a WebSocket, the time its answer takes is not counted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_TIMEOUT = 10.0
_IN = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.SWITCHED_PROTOCOL)  # the client's request is all in


class DeadlineH11Protocol(H11Protocol):
    """``H11Protocol`` closing a connection that does not deliver a whole request in time."""

    request_timeout = REQUEST_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in _IN or self.transport.get_protocol() is not self:
            self._disarm()  # the whole request is in (or the connection is a WebSocket now)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def with_deadline(seconds: float) -> Any:
    """The protocol class for ``uvicorn.Config(http=...)`` with a ``seconds`` request deadline."""
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,), {"request_timeout": float(seconds)})
