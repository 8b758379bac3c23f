"""A Gymnasium client for a served env: ``textgym.RemoteEnv`` (``gym.make("textgym/Remote-v0", url=...)``).

It plays one WebSocket session of a server that speaks the OpenEnv protocol (``textgym serve``
or any OpenEnv server) and returns what the env returns in-process: the 5-tuple, the whole
conversation as the observation (immutable messages), and the env's info (JSON-safe; at reset
with ``info["tools"]``). So vector envs, ``textgym.rollout.collect``, ``TokenObservation`` and
``textgym eval`` all run against a server.

A lost connection raises :class:`~textgym.error.RemoteError` (never a silent reward 0); the
episode is gone, and the next ``reset()`` reconnects and starts a new one. A reply is untrusted
data: one that is not the protocol's shape, or larger than ``max_reply_bytes``, is a
``RemoteError`` too, and a connection given up on is closed, never left open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym

from textgym.error import InvalidAction, RemoteError, ResetNeeded, TextGymError, require
from textgym.messages import FrozenDict, assistant, freeze, render, user
from textgym.spaces import AssistantTurn, Conversation

TOKEN_VARIABLE = "TEXTGYM_SERVE_TOKEN"
MAX_REPLY_BYTES = 64 << 20  # a whole conversation comes back on every step
CLOSE_TIMEOUT = 2.0  # seconds to wait for a closing handshake before dropping the socket


class RemoteEnv(gym.Env):
    """A served env, played over one WebSocket session.

    Args:
        url: The server: ``http://host:port``, ``ws://host:port`` or the full ``.../ws`` URL.
        timeout: Seconds to wait for the connection and for each reply.
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
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        token: str | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        render_mode: str | None = None,
        **reset_defaults: Any,
    ):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"url must be like http://host:port or ws://host:port/ws, got {url!r}")
        self.url = _ws_url(url)
        self.timeout = float(timeout)
        token = os.environ.get(TOKEN_VARIABLE) or None if token is None else token
        if token is not None and (not isinstance(token, str) or not token.isprintable() or not token):
            raise ValueError("token must be a non-empty printable string")
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
        super().reset(seed=seed)
        self._done = True
        data = dict(self.reset_defaults)
        if seed is not None:
            data["seed"] = int(seed)
        if options is not None:
            data["options"] = options
        if self._ws is None:
            self._connect()
        try:
            reply = self._exchange({"type": "reset", "data": data})
        except _Malformed:
            raise
        except RemoteError as exc:
            if exc.code not in (None, "SESSION_ERROR"):
                raise
            self._connect()  # the server closed an idle session, or restarted: one fresh try
            reply = self._exchange({"type": "reset", "data": data})
        obs = self._field(reply, "observation", dict, {})
        if "messages" in obs:
            self.conversation = self._messages(obs["messages"])
        else:  # a foreign OpenEnv env: its observation, as a user message
            self.conversation = (user(json.dumps(obs, default=str)),)
        info = dict(self._field(obs, "info", dict, {}))
        info["tools"] = list(self._field(obs, "tools", list, []))
        self._done = False
        return self.conversation, info

    def step(self, action: Any):
        if self._done:
            raise ResetNeeded("call reset() before step()" if not self.conversation else "the episode has ended; call reset()")
        if isinstance(action, str):
            data: dict[str, Any] = {"content": action}
        elif isinstance(action, Mapping):
            data = {k: v for k, v in action.items() if k != "role" or v != "assistant"}
        else:
            raise InvalidAction(f"expected the assistant turn as a str or a message dict, got {type(action).__name__}")
        try:
            reply = self._exchange({"type": "step", "data": data})
        except RemoteError as exc:
            if exc.code is None:
                self._done = True
            raise
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

    def _connect(self) -> None:
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
            ).__enter__()
        except Exception as exc:  # refused, DNS, handshake: all "cannot reach"
            raise RemoteError(f"cannot connect to {self.url}: {exc}") from None

    def _exchange(self, frame: dict[str, Any]) -> dict[str, Any]:
        if self._ws is None:
            raise RemoteError(f"not connected to {self.url}: call reset() to connect and start an episode")
        try:
            self._ws.send(json.dumps(frame))
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
        try:
            return tuple(freeze(m) for m in messages[start:])
        except RecursionError:
            raise self._malformed("a message is nested too deeply") from None

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


class _Malformed(RemoteError):
    """A reply not in the protocol's shape: raised at once, never retried."""


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
