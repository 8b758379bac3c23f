"""A Gymnasium client for a served env: ``textgym.RemoteEnv`` (``gym.make("textgym/Remote-v0", url=...)``).

It plays one WebSocket session of a server that speaks the OpenEnv protocol (``textgym serve``
or any OpenEnv server) and returns what the env returns in-process: the 5-tuple, the whole
conversation as the observation (immutable messages), and the env's info (JSON-safe; at reset
with ``info["tools"]``). So vector envs, ``textgym.rollout.collect``, ``TokenObservation`` and
``textgym eval`` all run against a server.

A lost connection raises :class:`~textgym.error.RemoteError` (never a silent reward 0); the
episode is gone, and the next ``reset()`` reconnects and starts a new one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym

from textgym.error import InvalidAction, RemoteError, ResetNeeded, TextGymError, require
from textgym.messages import FrozenDict, assistant, freeze, render, user
from textgym.spaces import AssistantTurn, Conversation


class RemoteEnv(gym.Env):
    """A served env, played over one WebSocket session.

    Args:
        url: The server: ``http://host:port``, ``ws://host:port`` or the full ``.../ws`` URL.
        timeout: Seconds to wait for the connection and for each reply.
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

    def __init__(self, url: str, *, timeout: float = 60.0, render_mode: str | None = None, **reset_defaults: Any):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"url must be like http://host:port or ws://host:port/ws, got {url!r}")
        self.url = _ws_url(url)
        self.timeout = float(timeout)
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
        except RemoteError as exc:
            if exc.code not in (None, "SESSION_ERROR"):
                raise
            self._connect()  # the server closed an idle session, or restarted: one fresh try
            reply = self._exchange({"type": "reset", "data": data})
        obs = reply.get("observation") or {}
        if "messages" in obs:
            self.conversation = tuple(freeze(m) for m in obs["messages"])
        else:  # a foreign OpenEnv env: its observation, as a user message
            self.conversation = (user(json.dumps(obs, default=str)),)
        info = dict(obs.get("info") or {})
        info["tools"] = list(obs.get("tools") or [])
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
        obs = reply.get("observation") or {}
        done = bool(reply.get("done", False))
        terminated = bool(obs.get("terminated", done))
        truncated = bool(obs.get("truncated", False)) and not terminated
        self.conversation = self._grow(obs, data)
        self._done = terminated or truncated or done
        reward = reply.get("reward")
        return self.conversation, float(reward or 0.0), terminated, truncated, dict(obs.get("info") or {})

    def oracle_action(self):
        """Not available: the oracle reads the env's hidden state, which no server sends."""
        raise TextGymError(f"{self.url}: a served env has no oracle (it needs the env's hidden state); run the oracle in-process")

    def render(self) -> str | None:
        return render(self.conversation) if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.send('{"type":"close"}')
                self._ws.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
            self._ws = None
        super().close()

    # ----- the connection -----

    def _connect(self) -> None:
        from websockets.sync.client import connect

        self.close()
        try:
            # Entering the connection marks it as managed here (websockets >= 17 warns otherwise).
            self._ws = connect(self.url, open_timeout=self.timeout, max_size=None, compression=None).__enter__()
        except Exception as exc:  # noqa: BLE001 - refused, DNS, handshake: all "cannot reach"
            raise RemoteError(f"cannot connect to {self.url}: {exc}") from None

    def _exchange(self, frame: dict[str, Any]) -> dict[str, Any]:
        if self._ws is None:
            raise RemoteError(f"not connected to {self.url}: call reset() to connect and start an episode")
        try:
            self._ws.send(json.dumps(frame))
            raw = self._ws.recv(timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - closed, reset, timed out: the session is gone
            self._ws = None
            raise RemoteError(
                f"lost the connection to {self.url} ({type(exc).__name__}: {exc}); the episode is gone, "
                "reset() reconnects and starts a new one"
            ) from None
        reply = json.loads(raw)
        data = reply.get("data") or {}
        if reply.get("type") == "error":
            code = data.get("code", "UNKNOWN")
            if code in ("CAPACITY_REACHED", "SESSION_ERROR"):  # the server closes the session after these
                self._ws = None
                self._done = True
            raise RemoteError(f"{self.url} answered {code}: {data.get('message', '')}", code=code)
        return data

    def _grow(self, obs: Mapping[str, Any], action: Mapping[str, Any]) -> tuple[FrozenDict, ...]:
        """The new conversation, reusing the immutable messages already held."""
        if "messages" not in obs:
            sent = assistant(action.get("content") or "", action.get("tool_calls"))
            return self.conversation + (sent, user(json.dumps(obs, default=str)))
        messages = obs["messages"]
        n = len(self.conversation)
        if n and len(messages) >= n and self.conversation[-1] == messages[n - 1]:
            return self.conversation + tuple(freeze(m) for m in messages[n:])
        return tuple(freeze(m) for m in messages)


def _ws_url(url: str) -> str:
    require("websockets", "remote")
    scheme, rest = url.split("://", 1)
    scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    rest = rest.rstrip("/")
    return f"{scheme}://{rest}" if rest.endswith("/ws") else f"{scheme}://{rest}/ws"
