"""``textgym serve`` against OpenEnv's own client and raw sockets: the protocol, robustness, limits."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import gymnasium as gym
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import textgym
from textgym.messages import thaw
from textgym.serve.protocol import json_safe

openenv = pytest.importorskip("openenv")
from openenv import GenericEnvClient


def wire(action) -> dict:
    """An in-process action as the wire's ``{"content", "tool_calls"?}``."""
    return {"content": action} if isinstance(action, str) else thaw(action)


def ws(server):
    """A connection to ``server``'s /ws (entered, so it may also be used outside ``with``)."""
    return connect(server.url.replace("http", "ws") + "/ws", max_size=None).__enter__()


def ask(sock, frame) -> dict:
    sock.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
    return json.loads(sock.recv(timeout=30))


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0", "textgym/Code-v0"])
def test_openenv_client_plays_the_same_episode_as_in_process(env_id, serve, request):
    """OpenEnv's stock GenericEnvClient, unchanged: every frame matches the in-process env."""
    shared = {"textgym/Sudoku-v0": "sudoku_server", "textgym/Workplace-v0": "workplace_server"}
    server = request.getfixturevalue(shared[env_id]) if env_id in shared else serve(env_id)
    local = gym.make(env_id)
    with GenericEnvClient(base_url=server.url).sync() as client:
        for seed in (0, 5):
            conversation, info = local.reset(seed=seed)
            result = client.reset(seed=seed, episode_id=f"ep-{seed}")
            obs = result.observation
            assert obs["messages"] == thaw(list(conversation))
            assert obs["tools"] == json_safe(info.pop("tools"))
            assert obs["info"] == json_safe(info) and not result.done and not obs["terminated"]
            done = False
            while not done:
                action = local.unwrapped.oracle_action()
                conversation, reward, terminated, truncated, info = local.step(action)
                result = client.step(wire(action))
                obs, done = result.observation, result.done
                assert obs["messages"] == thaw(list(conversation))
                assert (result.reward, obs["terminated"], obs["truncated"]) == (reward, terminated, truncated)
                assert obs["info"] == json_safe(info) and done == (terminated or truncated)
            assert result.reward == 1.0 and obs["info"]["success"] is True and "verification" in obs["info"]
            state = client.state()
            assert state["episode_id"] == f"ep-{seed}" and state["seed"] == seed and state["done"] is True
            assert state["step_count"] == info["turn"] and state["task_id"] == info["task_id"]


def test_bad_frames_get_error_replies_and_the_session_goes_on(sudoku_server):
    with ws(sudoku_server) as sock:
        cases = [
            ("{not json", "INVALID_JSON"),
            (b"\xff\xfe garbage", "INVALID_JSON"),
            ("[1, 2]", "INVALID_JSON"),
            ({"type": "jump"}, "UNKNOWN_TYPE"),
            ({"data": {}}, "UNKNOWN_TYPE"),
            ({"type": "step", "data": {"content": "hi"}}, "EXECUTION_ERROR"),  # step before reset
            ({"type": "reset", "data": {"seed": -1}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"seed": "3"}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"sede": 3}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"options": {"task": {"grid": "nonsense"}}}}, "VALIDATION_ERROR"),
            ("x" * (2 << 20), "VALIDATION_ERROR"),  # an oversized frame
        ]
        for frame, code in cases:
            reply = ask(sock, frame)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (frame[:40], reply)
            assert reply["data"]["message"]
        assert ask(sock, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        for action in (
            "just text",
            ["a list"],
            {"text": "no content"},
            {"content": 3},
            {"content": "x", "role": "user"},
            {"content": "x", "tool_calls": "place"},
        ):
            reply = ask(sock, {"type": "step", "data": action})
            if isinstance(action, str):  # a bare string is not the action object
                assert reply["data"]["code"] == "VALIDATION_ERROR"
            else:
                assert reply["type"] == "error" and reply["data"]["code"] == "VALIDATION_ERROR", (action, reply)
        reply = ask(sock, {"type": "step", "data": {"content": "no move here"}})
        assert reply["type"] == "observation" and reply["data"]["observation"]["info"]["turn"] == 1, reply
        assert reply["data"]["observation"]["info"]["error"]  # a bad *move* is feedback, as in-process
        assert ask(sock, {"type": "state"})["data"]["step_count"] == 1


def test_capacity_and_disconnect_frees_the_env(serve):
    server = serve("textgym/Sudoku-v0", "--max-sessions", "2")
    first, second = ws(server), ws(server)
    for sock in (first, second):
        assert ask(sock, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
    with ws(server) as third:
        reply = json.loads(third.recv(timeout=10))
        assert reply["data"]["code"] == "CAPACITY_REACHED" and reply["data"]["max_sessions"] == 2
        with pytest.raises(ConnectionClosed):
            third.recv(timeout=10)
    first.close()  # a client gone mid-episode frees its env and its slot
    time.sleep(0.3)
    with ws(server) as fourth:
        assert ask(fourth, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
    second.close()


def test_idle_sessions_are_closed_after_the_timeout(serve):
    server = serve("textgym/Sudoku-v0", "--session-timeout", "0.5")
    with ws(server) as idle, ws(server) as busy:
        ask(idle, {"type": "reset", "data": {"seed": 0}})
        ask(busy, {"type": "reset", "data": {"seed": 0}})
        for _ in range(6):
            time.sleep(0.2)
            assert ask(busy, {"type": "state"})["type"] == "state"  # activity keeps a session
        reply = json.loads(idle.recv(timeout=10))
        assert reply["data"]["code"] == "SESSION_ERROR" and "0.5 s" in reply["data"]["message"]
        with pytest.raises(ConnectionClosed):
            idle.recv(timeout=10)
    remote = textgym.RemoteEnv(server.url)
    remote.reset(seed=0)
    time.sleep(1.5)
    assert remote.reset(seed=0)[1]["turn"] == 0  # a timed-out session: reset reconnects
    remote.close()


def test_same_seed_same_episode_across_sessions_and_processes(sudoku_server, serve):
    other = serve("textgym/Sudoku-v0")
    replies = []
    for server in (sudoku_server, sudoku_server, other):
        with ws(server) as sock:
            ask(sock, {"type": "reset", "data": {"seed": 99}})  # a previous episode must not matter
            replies.append(
                [ask(sock, {"type": "reset", "data": {"seed": 11}}), ask(sock, {"type": "step", "data": {"content": "<answer>1</answer>"}})]
            )
    assert replies[0] == replies[1] == replies[2]


def test_http_routes(sudoku_server):
    def get(path):
        with urllib.request.urlopen(sudoku_server.url + path, timeout=10) as r:
            return json.loads(r.read())

    def post(path, body):
        request = urllib.request.Request(
            sudoku_server.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.loads(r.read())

    assert get("/health") == {"status": "healthy"}
    assert get("/metadata")["name"] == "textgym/Sudoku-v0"
    schema = get("/schema")
    assert schema["action"]["required"] == ["content"] and "messages" in schema["observation"]["properties"]
    reset = post("/reset", {"seed": 4})
    local = gym.make("textgym/Sudoku-v0")
    conversation, _ = local.reset(seed=4)
    assert reset["observation"]["messages"] == thaw(list(conversation)) and reset["done"] is False
    # Stateless /step: a one-turn episode from the given seed (here the whole grid at once).
    step = post("/step", {"seed": 4, "action": {"content": local.unwrapped.oracle_action()}})
    assert set(step) == {"observation", "reward", "done"} and step["reward"] == 1.0 and step["done"] is True
    with pytest.raises(urllib.error.HTTPError) as bad:
        post("/step", {"seed": 4, "action": "not an object"})
    assert bad.value.code == 422 and json.loads(bad.value.read())["code"] == "VALIDATION_ERROR"


def test_sigterm_shuts_down_gracefully(serve):
    server = serve("textgym/Sudoku-v0")
    with ws(server) as sock:
        ask(sock, {"type": "reset", "data": {"seed": 0}})
        started = time.monotonic()
        assert server.kill(signal.SIGTERM) == 0
        assert time.monotonic() - started < 10
        with pytest.raises(ConnectionClosed):
            ask(sock, {"type": "state"})


@pytest.mark.parametrize(
    "args, message",
    [
        (["textgym/Nope-v0"], "unknown environment id"),
        (["textgym/Sudoku-v0", "--env-kwargs", '{"bogus": 1}'], "cannot make textgym/Sudoku-v0"),
        (["textgym/Sudoku-v0", "--max-sessions", "0"], "--max-sessions must be >= 1"),
        (["textgym/Sudoku-v0", "--session-timeout", "-1"], "--session-timeout must be > 0"),
    ],
)
def test_cli_errors_are_one_line(args, message):
    proc = subprocess.run([sys.executable, "-m", "textgym.cli", "serve", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("textgym serve: error:") and proc.stderr.count("\n") == 1


def test_cli_port_in_use_is_one_line(sudoku_server):
    args = ["serve", "textgym/Sudoku-v0", "--port", str(sudoku_server.port)]
    proc = subprocess.run([sys.executable, "-m", "textgym.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "cannot listen on 127.0.0.1" in proc.stderr and proc.stderr.count("\n") == 1


def test_env_calls_never_run_on_the_event_loop():
    import asyncio
    import threading

    from textgym.serve.app import EnvServer

    server = EnvServer("textgym/Sudoku-v0")

    async def thread_of_a_call():
        return threading.get_ident(), await server.run(threading.get_ident)

    loop_thread, call_thread = asyncio.run(thread_of_a_call())
    assert call_thread != loop_thread
    with pytest.raises(ValueError, match="max_sessions"):
        EnvServer("textgym/Sudoku-v0", max_sessions=0)


def test_a_slow_pinned_puzzle_is_an_error_frame_and_the_server_stays_up(sudoku_server):
    slow = ".....5.8....6.1.43..........1.5........1.6...3.......553.....61........4........."
    with ws(sudoku_server) as sock:
        reply = ask(sock, {"type": "reset", "data": {"options": {"task": {"puzzle": slow}}}})
        assert reply["type"] == "error" and "search budget" in reply["data"]["message"]
        assert ask(sock, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
    with urllib.request.urlopen(sudoku_server.url + "/health", timeout=10) as r:
        assert r.status == 200
