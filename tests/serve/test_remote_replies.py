"""``RemoteEnv`` against a hostile server: every malformed reply is a ``RemoteError``, nothing leaks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import struct
import threading

import gymnasium as gym
import pytest
from websockets.asyncio.server import serve

import textgym
from textgym.error import RemoteError

RESET_OK = {
    "type": "observation",
    "data": {"observation": {"messages": [{"role": "user", "content": "hi"}], "tools": [], "info": {}}, "reward": 0.0, "done": False},
}


class FakeServer:
    """A WebSocket server in a thread answering every frame with ``reply(frame_number)``:
    a str is sent as is, None sends nothing."""

    def __init__(self, reply, *, max_size=1 << 20):
        self.reply, self.open, self.opened = reply, 0, 0
        self.headers = []
        ready = threading.Event()

        async def handler(ws):
            self.open += 1
            self.opened += 1
            self.headers.append(dict(ws.request.headers))
            try:
                n = 0
                async for _ in ws:
                    answer = self.reply(n)
                    n += 1
                    if answer is not None:
                        await ws.send(answer)
            except Exception:  # the client went away
                pass
            finally:
                self.open -= 1

        async def main():
            async with serve(handler, "127.0.0.1", 0, max_size=max_size) as server:
                self.port = server.sockets[0].getsockname()[1]
                self.stop = asyncio.get_running_loop().create_future()
                ready.set()
                await self.stop

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.loop.call_soon_threadsafe(self.stop.set_result, None)
        self.thread.join(10)


@pytest.fixture
def fake():
    servers = []

    def start(reply, **kw):
        servers.append(FakeServer(reply, **kw))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def deep(n):
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "reply",
    [
        "not json {",
        "[1, 2]",
        '{"type": "observation", "data": []}',
        '{"type": "observation", "data": {"observation": "abc"}}',
        '{"type": "observation", "data": {"observation": {"messages": "abc"}}}',
        '{"type": "observation", "data": {"observation": {"messages": [1, 2]}}}',
        '{"type": "observation", "data": {"observation": {"messages": [{"role": "user", "content": 3}]}}}',
        '{"type": "observation", "data": {"observation": {"messages": [], "info": "x"}}}',
        '{"type": "observation", "data": {"observation": {"messages": [], "tools": 5}}}',
        '{"type": "observation", "data": ' + deep(5000) + "}",
        '{"type": "observation", "data": {"observation": {"messages": [{"role": "user", "content": "x", "extra": ' + deep(100) + "}]}}}",
        '{"type": "error", "data": 7}',
        '{"type": "nonsense"}',
    ],
)
def test_every_malformed_reset_reply_is_a_remote_error(fake, reply):
    server = fake(lambda n: reply)
    env = textgym.RemoteEnv(server.url, timeout=5)
    with pytest.raises(RemoteError):
        env.reset(seed=0)
    env.close()


@pytest.mark.parametrize(
    "reply",
    [
        '{"type": "observation", "data": {"observation": {"messages": "abc"}, "reward": 1.0, "done": true}}',
        '{"type": "observation", "data": {"observation": {"messages": []}, "reward": "1", "done": true}}',
        '{"type": "observation", "data": {"observation": {"messages": []}, "reward": 1.0, "done": "yes"}}',
        '{"type": "observation", "data": {"observation": {"messages": [], "terminated": 1}}}',
        '{"type": "observation", "data": {"observation": {"messages": [], "info": [1]}}}',
        "\x00\x01",
    ],
)
def test_every_malformed_step_reply_is_a_remote_error(fake, reply):
    server = fake(lambda n: json.dumps(RESET_OK) if n == 0 else reply)
    env = textgym.RemoteEnv(server.url, timeout=5)
    env.reset(seed=0)
    with pytest.raises(RemoteError, match="malformed"):
        env.step("hello")
    env.close()


def test_a_timeout_closes_the_connections_it_gives_up(fake):
    server = fake(lambda n: None)  # never answers
    before = threading.active_count()
    env = textgym.RemoteEnv(server.url, timeout=0.3)
    for _ in range(3):
        with pytest.raises(RemoteError, match="lost the connection"):
            env.reset(seed=0)
    env.close()
    for _ in range(100):
        if server.open == 0 and threading.active_count() <= before:
            break
        threading.Event().wait(0.05)
    assert server.opened >= 3 and server.open == 0
    assert threading.active_count() <= before


def test_a_reply_over_the_frame_cap_is_refused(fake):
    big = json.dumps({**RESET_OK, "pad": "x" * (2 << 20)})
    server = fake(lambda n: big, max_size=None)
    env = textgym.RemoteEnv(server.url, timeout=5, max_reply_bytes=1 << 20)
    with pytest.raises(RemoteError):
        env.reset(seed=0)
    env.close()
    roomy = textgym.RemoteEnv(server.url, timeout=5, max_reply_bytes=4 << 20)
    assert roomy.reset(seed=0)[0][0]["content"] == "hi"
    roomy.close()


def test_the_token_is_sent_as_a_bearer_header(fake, monkeypatch):
    server = fake(lambda n: json.dumps(RESET_OK))
    env = textgym.RemoteEnv(server.url, token="s3cret")
    env.reset(seed=0)
    env.close()
    monkeypatch.setenv("TEXTGYM_SERVE_TOKEN", "from-env")
    env = textgym.RemoteEnv(server.url)
    env.reset(seed=0)
    env.close()
    monkeypatch.delenv("TEXTGYM_SERVE_TOKEN")
    env = textgym.RemoteEnv(server.url)
    env.reset(seed=0)
    env.close()
    auth = [h.get("authorization") for h in server.headers]
    assert auth == ["Bearer s3cret", "Bearer from-env", None]


def _stepping(n):
    return json.dumps(RESET_OK if n == 0 else {**RESET_OK, "data": {**RESET_OK["data"], "done": True}})


@pytest.mark.parametrize("urls", [False, True])
def test_an_action_the_client_cannot_encode_is_a_type_error_and_the_server_is_left_alone(fake, urls):
    server = fake(lambda n: json.dumps(RESET_OK))
    env = textgym.RemoteEnv(urls=[server.url], timeout=5) if urls else textgym.RemoteEnv(server.url, timeout=5)
    env.reset(seed=0)
    call = {"id": "c1", "type": "function", "function": {"name": "place", "arguments": {"digits": {1, 2}}}}
    with pytest.raises(TypeError, match="JSON"):
        env.step({"role": "assistant", "content": "", "tool_calls": [call]})
    with pytest.raises(TypeError, match="JSON"):
        env.reset(seed=0, options={"task": b"bytes"})
    assert env.step("a move")[0][0]["content"] == "hi"  # the same session goes on
    assert server.opened == 1
    if urls:
        assert env._pool.candidates()[0] == env.url  # not marked down
    env.close()


def test_the_token_never_reaches_a_record(fake):
    from textgym.policies import RandomPolicy
    from textgym.rollout import collect

    server = fake(_stepping)
    venv = gym.make_vec("textgym/Remote-v0", num_envs=1, url=server.url, token="s3cret-token")
    try:
        (record,) = collect(venv, RandomPolicy(seed=0), episodes=1)
    finally:
        venv.close()
    assert record.env_kwargs["token"] == "<set>"
    assert "s3cret-token" not in json.dumps(record.to_dict())


def test_a_server_frame_over_the_cap_stops_the_reading_at_once():
    # A raw server that announces an 8 GiB text frame and then streams it as fast as it can.
    sent, done = [0], threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hostile():
        conn, _ = listener.accept()
        listener.close()  # one connection only
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        key = next(line.split(b": ")[1] for line in request.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key"))
        accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
            + accept
            + b"\r\n\r\n"
        )
        conn.recv(65536)  # the reset frame
        chunk = b"a" * (1 << 20)
        try:
            conn.sendall(bytes([0x81, 127]) + struct.pack(">Q", 8 << 30))
            while sent[0] < 1 << 30:
                conn.sendall(chunk)
                sent[0] += len(chunk)
        except OSError:  # the client closed the connection
            pass
        finally:
            conn.close()
            done.set()

    threading.Thread(target=hostile, daemon=True).start()
    env = textgym.RemoteEnv(urls=[f"http://127.0.0.1:{listener.getsockname()[1]}"], timeout=30, max_reply_bytes=1 << 16)
    with pytest.raises(RemoteError, match="too big"):
        env.reset(seed=0)
    env.close()
    assert done.wait(30)
    assert sent[0] < 64 << 20  # socket buffers, not the frame


def test_a_token_the_client_cannot_send_is_refused_at_construction():
    for token in ("pässword", "", " padded ", "tab\there"):
        with pytest.raises(ValueError, match="token"):
            textgym.RemoteEnv("http://127.0.0.1:1", token=token)
