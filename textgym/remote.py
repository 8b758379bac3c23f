"""A Gymnasium client for a served env: ``textgym.RemoteEnv`` (``gym.make("textgym/Remote-v0", url=...)``).

It plays one WebSocket session of a server that speaks the OpenEnv protocol (``textgym serve``
or any OpenEnv server) and returns what the env returns in-process: the 5-tuple, the whole
conversation as the observation (immutable messages), and the env's info (JSON-safe; at reset
with ``info["tools"]``). So vector envs, ``textgym.rollout.collect``, ``TokenObservation`` and
``textgym eval`` all run against a server.

A lost connection raises :class:`~textgym.error.RemoteError` (never a silent reward 0); the
episode is gone, and the next ``reset()`` reconnects and starts a new one.

Several servers (``urls=[...]``) fail over: each episode's session goes to the next live server
(:class:`~textgym.servers.ServerPool`, round robin), and a server lost mid-episode ends that
episode with ``info["end_reason"] == "env_error"`` (terminated, reward 0; trainers mask such
episodes out of the loss and count them) instead of raising, so a run goes on with the other
servers and takes the lost one back once it answers again. A reply is untrusted
data: one that is not the protocol's shape, or larger than ``max_reply_bytes``, is a
``RemoteError`` too, and a connection given up on is closed, never left open.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym

from textgym.error import InvalidAction, RemoteError, ResetNeeded, TextGymError, require
from textgym.messages import FrozenDict, assistant, freeze, render, user
from textgym.servers import ServerPool
from textgym.spaces import AssistantTurn, Conversation

TOKEN_VARIABLE = "TEXTGYM_SERVE_TOKEN"


def shared_token(token: str | None) -> str | None:
    """``token``, else ``$TEXTGYM_SERVE_TOKEN`` (None when neither is set): one default for the
    server and its clients, so that setting the variable on both sides is enough."""
    return token if token is not None else os.environ.get(TOKEN_VARIABLE) or None


def checked_token(token: str | None) -> str | None:
    """``token`` if it can be sent and compared as written (None stays None): non-empty printable
    ASCII without surrounding spaces. An HTTP header travels as Latin-1 bytes, so any other text
    would reach a server as bytes other than the ones it compares with."""
    if token is not None and not (isinstance(token, str) and token and token.isascii() and token.isprintable() and token == token.strip()):
        raise ValueError("a token must be non-empty printable ASCII text without surrounding spaces")
    return token


MAX_REPLY_BYTES = 64 << 20  # a whole conversation comes back on every step
MAX_DEPTH = 64  # levels of nesting in a message (a tool call's arguments); JSON allows any
CLOSE_TIMEOUT = 2.0  # seconds to wait for a closing handshake before dropping the socket


class RemoteEnv(gym.Env):
    """A served env, played over one WebSocket session.

    Args:
        url: The server: ``http://host:port``, ``ws://host:port`` or the full ``.../ws`` URL.
        urls: Several servers of the same env instead of ``url``: sessions spread over them and
            fail over (see the module's docstring).
        timeout: Seconds to wait for the connection and for each reply.
        retry_after: With ``urls``, seconds a failed server is skipped before it is tried again.
        token: The server's shared token (``textgym serve --token``), sent as
            ``Authorization: Bearer <token>``; default: the ``TEXTGYM_SERVE_TOKEN`` environment
            variable, if set.
        max_reply_bytes: A larger reply frame closes the connection with a ``RemoteError``.
        render_mode: ``None`` or ``"ansi"``.
        **reset_defaults: Fields sent with every reset (``options={...}``, ``episode_id=...``);
            ``reset``'s own ``seed`` and ``options`` take precedence.

    Raises:
        RemoteError: The server cannot be reached, the connection drops, or the server answers
            a frame with an error (its ``code`` is OpenEnv's: ``VALIDATION_ERROR``, ...).

    Example:
        >>> import gymnasium as gym, textgym  # doctest: +SKIP
        >>> env = gym.make("textgym/Remote-v0", url="http://127.0.0.1:8000")  # doctest: +SKIP
        >>> conversation, info = env.reset(seed=3)  # doctest: +SKIP
        >>> env = gym.make("textgym/Remote-v0", urls=["http://10.0.0.1:8000", "http://10.0.0.2:8000"])  # doctest: +SKIP
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        url: str | None = None,
        *,
        urls: Sequence[str] | None = None,
        timeout: float = 60.0,
        retry_after: float = 2.0,
        token: str | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        render_mode: str | None = None,
        **reset_defaults: Any,
    ):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if (url is None) == (urls is None):
            raise ValueError("pass url= (one server) or urls= (several, which fail over), not both or neither")
        if urls is not None and (isinstance(urls, str) or not urls):
            raise ValueError(f"urls must be a non-empty list of server URLs, got {urls!r}")
        given = [url] if urls is None else list(urls)
        for one in given:
            if not isinstance(one, str) or "://" not in one:
                raise ValueError(f"url must be like http://host:port or ws://host:port/ws, got {one!r}")
        self.urls = [_ws_url(one) for one in given]
        self.url = self.urls[0]  # the server of the current session
        self._pool = None if urls is None else ServerPool.shared(self.urls, retry_after)
        self._task_id: Any = None
        self.timeout = float(timeout)
        token = checked_token(shared_token(token))
        self._headers = {"Authorization": f"Bearer {token}"} if token else None
        if int(max_reply_bytes) < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        self.max_reply_bytes = int(max_reply_bytes)
        self.render_mode = render_mode
        self.reset_defaults = reset_defaults
        self.observation_space = Conversation()
        self.action_space = AssistantTurn()
        self.conversation: tuple[FrozenDict, ...] = ()
        self._ws: Any = None
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        data = dict(self.reset_defaults)
        if seed is not None:
            data["seed"] = int(seed)
        if options is not None:
            data["options"] = options
        frame = _encoded({"type": "reset", "data": data}, "reset options")  # a TypeError leaves the episode as it was
        super().reset(seed=seed)
        self._done = True
        reply = self._reset_on_one(frame) if self._pool is None else self._reset_on_some(frame)
        obs = self._field(reply, "observation", dict, {})
        if "messages" in obs:
            self.conversation = self._messages(obs["messages"])
        else:  # a foreign OpenEnv env: its observation, as a user message
            self.conversation = (user(json.dumps(obs, default=str)),)
        info = dict(self._field(obs, "info", dict, {}))
        info["tools"] = list(self._field(obs, "tools", list, []))
        self._done = False
        self._task_id = info.get("task_id")
        return self.conversation, info

    def _reset_on_one(self, frame: str) -> dict[str, Any]:
        if self._ws is None:
            self._open_connection()
        try:
            return self._exchange(frame)
        except _Malformed:
            raise
        except RemoteError as exc:
            if exc.code not in (None, "SESSION_ERROR"):
                raise
            self._open_connection()  # the server closed an idle session, or restarted: one fresh try
            return self._exchange(frame)

    def _reset_on_some(self, frame: str) -> dict[str, Any]:
        """Start the episode on the next live server; one that fails is marked down and the next tried."""
        failures = []
        for url in self._pool.candidates():
            try:
                if self._ws is None or url != self.url:
                    self.url = url
                    self._open_connection()
                reply = self._exchange(frame)
            except _Malformed:
                raise
            except RemoteError as exc:
                if exc.code not in (None, "SESSION_ERROR", "CAPACITY_REACHED"):
                    raise
                if exc.code is None:  # unreachable or lost: not just busy
                    self._pool.mark_down(url)
                self._drop()
                failures.append(str(exc))
                continue
            self._pool.mark_up(url)
            return reply
        raise RemoteError(f"none of the {len(self.urls)} env servers started the episode: {'; '.join(failures)}")

    def step(self, action: Any):
        if self._done:
            raise ResetNeeded("call reset() before step()" if not self.conversation else "the episode has ended; call reset()")
        if isinstance(action, str):
            data: dict[str, Any] = {"content": action}
        elif isinstance(action, Mapping):
            data = {k: v for k, v in action.items() if k != "role" or v != "assistant"}
        else:
            raise InvalidAction(f"expected the assistant turn as a str or a message dict, got {type(action).__name__}")
        frame = _encoded({"type": "step", "data": data}, "action")  # before sending: the client's mistake, not the server's
        try:
            reply = self._exchange(frame)
        except RemoteError as exc:
            if exc.code is None:
                self._done = True
            if self._pool is None or exc.code is not None or isinstance(exc, _Malformed):
                raise
            self._pool.mark_down(self.url)
            return self._lost(data, exc)
        obs = self._field(reply, "observation", dict, {})
        done = self._field(reply, "done", bool, False)
        terminated = self._field(obs, "terminated", bool, done)
        truncated = self._field(obs, "truncated", bool, False) and not terminated
        reward = self._field(reply, "reward", (int, float), 0.0)
        if isinstance(reward, bool):
            raise self._malformed("'reward' is a boolean, not a number")
        info = dict(self._field(obs, "info", dict, {}))
        self.conversation = self._grow(obs, data)
        self._done = terminated or truncated or done
        return self.conversation, float(reward), terminated, truncated, info

    def _lost(self, action: Mapping[str, Any], exc: RemoteError) -> tuple:
        """The step that ends an episode whose server was lost: ``env_error``, never a score."""
        why = f"the env server {self.url} was lost mid-episode ({str(exc).split(' (', 1)[-1].split(');', 1)[0]})"
        self._done = True
        sent = assistant(action.get("content") or "", action.get("tool_calls"))
        self.conversation = self.conversation + (sent, user(f"[{why}; this episode is not scored]"))
        info = {"end_reason": "env_error", "error": why, "success": False, "task_id": self._task_id}
        return self.conversation, 0.0, True, False, info

    def oracle_action(self):
        """Not available: the oracle reads the env's hidden state, which no server sends."""
        raise TextGymError(f"{self.url}: a served env has no oracle (it needs the env's hidden state); run the oracle in-process")

    def render(self) -> str | None:
        return render(self.conversation) if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.send('{"type":"close"}')
            except Exception:  # closing a dead connection is not an error
                pass
            self._drop()
        super().close()

    # ----- the connection -----

    def _open_connection(self) -> None:
        from websockets.sync.client import connect

        self.close()
        try:
            # Entering the connection marks it as managed here (websockets >= 17 warns otherwise).
            self._ws = connect(
                self.url,
                open_timeout=self.timeout,
                close_timeout=min(self.timeout, CLOSE_TIMEOUT),
                max_size=self.max_reply_bytes,
                compression=None,
                additional_headers=self._headers,
                create_connection=_capped_connection(),
            ).__enter__()
        except Exception as exc:  # refused, DNS, handshake: all "cannot reach"
            raise RemoteError(f"cannot connect to {self.url}: {exc}") from None

    def _exchange(self, frame: str) -> dict[str, Any]:
        """Send one encoded frame and read the reply's ``data``."""
        if self._ws is None:
            raise RemoteError(f"not connected to {self.url}: call reset() to connect and start an episode")
        try:
            self._ws.send(frame)
            raw = self._ws.recv(timeout=self.timeout)
        except Exception as exc:  # closed, reset, timed out, too large: the session is gone
            self._drop()
            raise RemoteError(
                f"lost the connection to {self.url} ({type(exc).__name__}: {exc}); the episode is gone, "
                "reset() reconnects and starts a new one"
            ) from None
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise self._malformed(f"not JSON ({type(exc).__name__})") from None
        if not isinstance(reply, dict) or reply.get("type") not in ("observation", "error", "state"):
            raise self._malformed("expected an object with 'type' observation, error or state")
        data = self._field(reply, "data", dict, {})
        if reply["type"] == "error":
            code, message = data.get("code"), data.get("message", "")
            code = code if isinstance(code, str) else "UNKNOWN"
            if code in ("CAPACITY_REACHED", "SESSION_ERROR"):  # the server closes the session after these
                self._drop()
                self._done = True
            raise RemoteError(f"{self.url} answered {code}: {message if isinstance(message, str) else ''}", code=code)
        return data

    def _drop(self) -> None:
        """Close the connection (its socket and reader thread) and forget it."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # closing a dead connection is not an error
                pass

    def _malformed(self, why: str) -> RemoteError:
        """A reply that is not the protocol's: the session cannot be trusted to go on."""
        self._drop()
        self._done = True
        return _Malformed(f"{self.url} sent a malformed reply: {why}; the episode is gone, reset() reconnects")

    def _field(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        """``obj[key]`` if it is a ``kind`` (a missing or null one: ``default``), else a RemoteError."""
        value = obj.get(key)
        if value is None:
            return default
        if not isinstance(value, kind):
            raise self._malformed(f"{key!r} is a {type(value).__name__}")
        return value

    def _messages(self, messages: Any, start: int = 0) -> tuple[FrozenDict, ...]:
        """A reply's ``messages[start:]`` as immutable chat messages; every message must be an
        object with a str role and content."""
        if not isinstance(messages, list):
            raise self._malformed(f"'messages' is a {type(messages).__name__}, not a list")
        for m in messages:
            if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise self._malformed("a message is not an object with a string role and content")
        if _deeper_than(messages, MAX_DEPTH):
            raise self._malformed(f"the messages are nested more than {MAX_DEPTH} levels deep")
        return tuple(freeze(m) for m in messages[start:])

    def _grow(self, obs: Mapping[str, Any], action: Mapping[str, Any]) -> tuple[FrozenDict, ...]:
        """The new conversation, reusing the immutable messages already held."""
        if "messages" not in obs:
            sent = assistant(action.get("content") or "", action.get("tool_calls"))
            return self.conversation + (sent, user(json.dumps(obs, default=str)))
        messages = obs["messages"]
        n = len(self.conversation)
        if isinstance(messages, list) and n and len(messages) >= n and _same(self.conversation[-1], messages[n - 1]):
            return self.conversation + self._messages(messages, n)
        return self._messages(messages)


def _encoded(frame: dict[str, Any], what: str) -> str:
    """A frame as JSON text; a value JSON cannot hold (a set, bytes) is the caller's ``TypeError``,
    raised before anything is sent, so the session and the server are left as they were."""
    try:
        return json.dumps(frame)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"the {what} cannot be sent to a served env as JSON: {exc}") from None


@functools.cache
def _capped_connection() -> type:
    """websockets' client connection, closing its socket as soon as a frame is over the cap.

    websockets refuses such a frame at once, but then reads and discards whatever the server
    goes on sending until its close timeout, which a hostile server fills with gigabytes.
    """
    from websockets.exceptions import PayloadTooBig
    from websockets.sync.client import ClientConnection

    class CappedConnection(ClientConnection):
        def send_data(self) -> None:
            super().send_data()
            if isinstance(self.protocol.parser_exc, PayloadTooBig):
                self.socket.shutdown(socket.SHUT_RDWR)  # the reader sees the end at once

    return CappedConnection


class _Malformed(RemoteError):
    """A reply not in the protocol's shape: raised at once, never retried."""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (JSON data) nests lists and objects more than ``limit`` levels deep."""
    level = [value]
    for _ in range(limit + 1):
        level = [v for c in level if isinstance(c, (list, dict)) for v in (c.values() if isinstance(c, dict) else c)]
        if not level:
            return False
    return True


def _same(held: FrozenDict, sent: Any) -> bool:
    try:
        return held == sent
    except RecursionError:
        return False


def _ws_url(url: str) -> str:
    require("websockets", "remote")
    scheme, rest = url.split("://", 1)
    scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    rest = rest.rstrip("/")
    return f"{scheme}://{rest}" if rest.endswith("/ws") else f"{scheme}://{rest}/ws"


def check_servers(urls: Sequence[str], *, timeout: float = 10.0, token: str | None = None) -> None:
    """Open and close a session on every server; raise one error naming those that do not answer.

    A run started with a dead server in its list most likely has a typo or a server that never
    came up, so it stops at once (a server lost later fails over instead).

    Raises:
        RemoteError: One or more servers cannot be reached.
    """
    dead = []
    for url in urls:
        env = RemoteEnv(url, timeout=timeout, token=token)
        try:
            env._open_connection()
        except RemoteError as exc:
            dead.append(str(exc).removeprefix("cannot connect to "))
        finally:
            env.close()
    if dead:
        raise RemoteError(f"env server{'s' if len(dead) > 1 else ''} not reachable: {'; '.join(dead)}")
