"""``textgym mcp``: the real server process, driven by the mcp SDK's own clients."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import anyio
import gymnasium as gym
import pytest

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import textgym  # noqa: F401  (registers the ids)


def _server(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "textgym.cli", "mcp", *args])


def _session_test(params: StdioServerParameters, body) -> None:
    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    anyio.run(main)


def _text(result) -> str:
    return result.content[0].text


def test_workplace_tools_over_stdio_and_an_oracle_episode_scores_one():
    env = gym.make("textgym/Workplace-v0").unwrapped
    env.reset(seed=3)
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in env.oracle_action()["tool_calls"]]

    async def body(session: ClientSession):
        tools = (await session.list_tools()).tools
        env_tools = [t for t in tools if t.name not in ("reset", "respond")]
        assert len(env_tools) == 27
        assert {t.name: t.inputSchema for t in env_tools} == {
            s["function"]["name"]: s["function"]["parameters"] for s in env.tools.schemas()
        }
        first = await session.call_tool("reset", {"seed": 3})
        assert not first.isError and env.task.data["query"] in _text(first)
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            assert not result.isError, _text(result)
            assert result.structuredContent is None  # the episode goes on
        done = await session.call_tool("respond", {"message": "Done: the request has been handled."})
        assert done.structuredContent["reward"] == 1.0 and done.structuredContent["success"] is True
        assert done.structuredContent["verification"]["success"] is True
        assert json.loads(done.content[-1].text)["end_reason"] == "success"

    _session_test(_server("textgym/Workplace-v0"), body)


def test_bad_arguments_are_tool_errors_and_the_session_goes_on():
    async def body(session: ClientSession):
        early = await session.call_tool("respond", {"message": "hi"})
        assert early.isError and "reset" in _text(early)
        bad_reset = await session.call_tool("reset", {"seed": "zero"})
        assert bad_reset.isError
        await session.call_tool("reset", {"seed": 3})  # a task that needs a calendar event
        bad = await session.call_tool("email_delete_email", {"email_id": 5, "extra": True})
        assert bad.isError and "email_delete_email" in _text(bad)
        missing = await session.call_tool("respond", {})
        assert missing.isError
        unknown = await session.call_tool("no_such_tool", {})
        assert unknown.isError and "unknown tool" in _text(unknown)
        good = await session.call_tool("company_directory_find_email_address", {"name": "a"})
        assert not good.isError and "@atlas.com" in _text(good)
        over = await session.call_tool("respond", {"message": "Nothing to do."})
        assert over.structuredContent["reward"] == 0.0 and over.structuredContent["end_reason"] == "failure"
        after = await session.call_tool("respond", {"message": "again"})
        assert after.isError and "reset" in _text(after)

    _session_test(_server("textgym/Workplace-v0", "--env-kwargs", '{"max_turns": 10}'), body)


def test_sudoku_answer_through_respond_and_its_place_tool():
    env = gym.make("textgym/Sudoku-v0", size=4).unwrapped
    env.reset(seed=1)
    answer = env.oracle_action()

    async def body(session: ClientSession):
        assert [t.name for t in (await session.list_tools()).tools] == ["reset", "place", "respond"]
        await session.call_tool("reset", {"seed": 1})
        wrong = await session.call_tool("place", {"row": 9, "col": 1, "digit": 1})
        assert wrong.isError and "off the board" in _text(wrong)
        done = await session.call_tool("respond", {"message": answer})
        assert done.structuredContent["reward"] == 1.0 and "Solved" in _text(done)

    _session_test(_server("textgym/Sudoku-v0", "--env-kwargs", '{"size": 4}'), body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_on_a_loopback_port_keeps_one_episode_per_session():
    moves = []
    for seed in (1, 2):
        env = gym.make("textgym/Sudoku-v0", size=4).unwrapped
        env.reset(seed=seed)
        moves.append(json.loads(env.oracle_action(place=1).split(">", 1)[1].rsplit("<", 1)[0])["arguments"])
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "textgym.cli", "mcp", "textgym/Sudoku-v0", "--env-kwargs", '{"size": 4}', "--http", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "serving MCP on http://127.0.0.1:" in proc.stderr.readline()
        url = f"http://127.0.0.1:{port}/mcp"

        async def main():
            async with (
                streamable_http_client(url) as (r1, w1, _),
                ClientSession(r1, w1) as one,
                streamable_http_client(url) as (r2, w2, _),
                ClientSession(r2, w2) as two,
            ):
                await one.initialize()
                await two.initialize()
                await one.call_tool("reset", {"seed": 1})
                await two.call_tool("reset", {"seed": 2})
                second = await two.call_tool("respond", {"message": "<answer>1</answer>"})
                assert second.isError and second.structuredContent is None  # a format error: goes on
                for session, move in zip((one, two), moves):  # each its own board
                    placed = await session.call_tool("place", move)
                    assert not placed.isError and "Board (" in _text(placed), _text(placed)

        for _ in range(50):  # the port opens once uvicorn has started
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_bad_port_is_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "textgym.cli", "mcp", "textgym/Sudoku-v0", "--http", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--http" in out.stderr


def test_an_env_without_tools_in_this_process_is_refused_with_one_error():
    from textgym.error import TextGymError
    from textgym.integrations.mcp import EnvToolServer

    class Served(gym.Env):  # like textgym/Remote-v0: the tools live in another process
        def close(self):
            pass

    with pytest.raises(TextGymError, match="no tools in this process"):
        EnvToolServer("textgym/Remote-v0", make_env=lambda env_id: Served())


def test_a_busy_port_is_one_line_and_status_two():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "textgym.cli", "mcp", "textgym/Sudoku-v0", "--http", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert str(port) in out.stderr and "serving" not in out.stderr


def _post_initialize(port: int, headers: dict) -> int:
    import http.client

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/mcp", body, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    status = conn.getresponse().status
    conn.close()
    return status


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_streamable_http_requires_the_token_as_serve_does(how, monkeypatch):
    port = _free_port()
    args = ["--token", "s3cret"] if how == "flag" else []
    env = {**__import__("os").environ, "TEXTGYM_SERVE_TOKEN": "s3cret"} if how == "variable" else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "textgym.cli", "mcp", "textgym/Sudoku-v0", "--http", str(port), *args],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert "serving MCP on http://127.0.0.1:" in proc.stderr.readline()
        for _ in range(100):  # the port opens once uvicorn has started
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        assert _post_initialize(port, {}) == 401
        assert _post_initialize(port, {"Authorization": "Bearer wrong"}) == 401
        assert _post_initialize(port, {"Authorization": "Bearer s3cret"}) != 401
    finally:
        proc.terminate()
        proc.wait(timeout=10)
