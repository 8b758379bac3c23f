"""``RemoteEnv`` against a hostile server: every malformed reply is a ``RemoteError``, nothing leaks."""

from __future__ import annotations

import asyncio
import json
import threading

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
