"""What a served env refuses: forged browser requests, foreign hosts, non-JSON and oversized
bodies, slow clients, missing tokens; and a served Code-v0 runs no task code on the host."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import textgym
from textgym.error import RemoteError


def request(server, method, path, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def handshake_status(server, **headers) -> int:
    try:
        with connect(f"ws://127.0.0.1:{server.port}/ws", additional_headers=headers, open_timeout=10):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def raw_handshake_status(server, host: str) -> int:
    """A WebSocket handshake under another ``Host`` (clients set it from the URL themselves)."""
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return int(sock.recv(65536).split(b" ", 2)[1])


JSON = {"Content-Type": "application/json"}


def test_a_foreign_origin_is_refused_and_an_allowed_one_is_not(sudoku_server, serve):
    assert handshake_status(sudoku_server) == 101  # programs send no Origin
    assert handshake_status(sudoku_server, Origin="https://evil.example") == 403
    assert handshake_status(sudoku_server, Origin="null") == 403
    assert handshake_status(sudoku_server, Origin=f"http://127.0.0.1:{sudoku_server.port}") == 101  # its own
    status, body = request(sudoku_server, "POST", "/step", b'{"seed": 0}', {**JSON, "Origin": "https://evil.example"})
    assert status == 403 and "--allow-origin" in json.loads(body)["detail"]
    allowing = serve("textgym/Sudoku-v0", "--allow-origin", "https://lab.example")
    assert handshake_status(allowing, Origin="https://lab.example") == 101
    assert handshake_status(allowing, Origin="https://evil.example") == 403


def test_a_host_that_is_another_name_is_refused(sudoku_server, serve):
    """DNS rebinding: a page on evil.example whose name now points to 127.0.0.1."""
    assert request(sudoku_server, "GET", "/health", headers={"Host": "evil.example:8000"})[0] == 403
    assert raw_handshake_status(sudoku_server, "evil.example") == 403
    assert raw_handshake_status(sudoku_server, "localhost") == 101
    for host in ("localhost", f"127.0.0.1:{sudoku_server.port}", "[::1]:80"):
        assert request(sudoku_server, "GET", "/health", headers={"Host": host})[0] == 200
    allowing = serve("textgym/Sudoku-v0", "--allow-host", "env.lab.example")
    assert request(allowing, "GET", "/health", headers={"Host": "env.lab.example"})[0] == 200
    assert request(allowing, "GET", "/health", headers={"Host": "evil.example"})[0] == 403


def test_http_routes_take_json_only(sudoku_server):
    body = json.dumps({"seed": 0, "action": {"content": "x"}}).encode()
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        status, reply = request(sudoku_server, "POST", "/step", body, {"Content-Type": kind} if kind else {})
        assert status == 415, (kind, reply)
    assert request(sudoku_server, "POST", "/step", body, {"Content-Type": "application/json; charset=utf-8"})[0] == 200


def test_bodies_past_the_frame_limit_are_refused(sudoku_server):
    big = json.dumps({"seed": 0, "pad": "x" * (1 << 20)}).encode()
    assert request(sudoku_server, "POST", "/reset", big, JSON)[0] == 413
    # chunked: no length up front, the body is counted as it comes
    conn = http.client.HTTPConnection("127.0.0.1", sudoku_server.port, timeout=30)
    conn.request(
        "POST",
        "/reset",
        body=iter([big[i : i + 65536] for i in range(0, len(big), 65536)]),
        headers={**JSON, "Transfer-Encoding": "chunked"},
        encode_chunked=True,
    )
    assert conn.getresponse().status == 413
    conn.close()


@pytest.mark.parametrize(
    "sent",
    [
        b"",
        b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
        b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    ],
)
def test_a_connection_that_sends_nothing_or_half_a_request_is_closed(serve, sent):
    server = serve("textgym/Sudoku-v0", "--request-timeout", "1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        assert sock.recv(65536) == b""  # closed by the server, not by our timeout
        assert time.monotonic() - started < 15


def test_the_token_is_required_when_set(serve, monkeypatch):
    server = serve("textgym/Sudoku-v0", "--token", "s3cret")
    assert request(server, "GET", "/health")[0] == 200  # load balancers probe without it
    assert request(server, "GET", "/metadata")[0] == 401
    assert request(server, "POST", "/reset", b"{}", JSON)[0] == 401
    assert request(server, "POST", "/reset", b"{}", {**JSON, "Authorization": "Bearer wrong"})[0] == 401
    assert request(server, "POST", "/reset", b"{}", {**JSON, "Authorization": "Bearer s3cret"})[0] == 200
    assert handshake_status(server) == 401
    with pytest.raises(RemoteError, match="401"):
        textgym.RemoteEnv(server.url).reset(seed=0)
    env = textgym.RemoteEnv(server.url, token="s3cret")
    assert len(env.reset(seed=0)[0]) == 2
    env.close()
    monkeypatch.setenv("TEXTGYM_SERVE_TOKEN", "s3cret")
    env = textgym.RemoteEnv(server.url)
    assert len(env.reset(seed=0)[0]) == 2
    env.close()


def owned_task(path) -> dict:
    check = f"def check(c):\n    open({str(path)!r},'w').write('x')\n    assert c(1)==1\n"
    return {"prompt": "def f(x):\n    pass\n", "entry_point": "f", "test": check}


@pytest.fixture(scope="module")
def code_server():
    from tests.serve.conftest import Server

    server = Server("textgym/Code-v0").start()
    yield server
    server.stop()


def test_a_served_code_env_runs_no_task_code_on_the_host_over_ws(code_server, tmp_path):
    owned = tmp_path / "owned"
    with connect(f"ws://127.0.0.1:{code_server.port}/ws", open_timeout=30) as sock:
        sock.send(json.dumps({"type": "reset", "data": {"seed": 0, "options": {"task": owned_task(owned)}}}))
        assert json.loads(sock.recv(timeout=60))["type"] == "observation"
        sock.send(json.dumps({"type": "step", "data": {"content": "def f(x): return x"}}))
        reply = json.loads(sock.recv(timeout=60))
    assert reply["type"] == "observation" and reply["data"]["observation"]["info"]["verification"]["total"] == 1
    assert not owned.exists()


def test_a_served_code_env_runs_no_task_code_on_the_host_over_post_step(code_server, tmp_path):
    owned = tmp_path / "owned"
    body = {"seed": 0, "options": {"task": owned_task(owned)}, "action": {"content": "def f(x): return x"}}
    status, reply = request(code_server, "POST", "/step", json.dumps(body).encode(), JSON)
    assert status == 200 and json.loads(reply)["observation"]["info"]["verification"]["total"] == 1
    assert not owned.exists()


def test_a_deeply_nested_pinned_task_is_an_error_reply(code_server):
    nested = '{"prompt": "p", "entry_point": "f", "tests": [{"args": [' + "[" * 980 + "]" * 980 + '], "expected": 1}]}'
    body = '{"seed": 0, "options": {"task": ' + nested + "}}"
    status, reply = request(code_server, "POST", "/reset", body.encode(), JSON)
    assert 400 <= status < 500, reply
    with connect(f"ws://127.0.0.1:{code_server.port}/ws", open_timeout=30) as sock:
        sock.send('{"type": "reset", "data": ' + body + "}")
        reply = json.loads(sock.recv(timeout=60))
        assert reply["type"] == "error" and reply["data"]["code"] == "VALIDATION_ERROR"
        sock.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        assert json.loads(sock.recv(timeout=60))["type"] == "observation"  # the session goes on


def test_trls_factory_plays_a_server_that_wants_a_token(serve):
    from textgym.integrations.trl import environment_factory, reward_func

    server = serve("textgym/Sudoku-v0", "--token", "s3cret", "--env-kwargs", '{"size": 4}')
    factory = environment_factory("textgym/Remote-v0", url=server.url, token="s3cret")
    env = factory()
    assert "puzzle" in env.reset(seed=0).lower()
    reward_func(["<answer>1</answer>"], [env])
    assert env.get_reward() == 0.0 and env._done
    with pytest.raises(RemoteError, match="401"):
        environment_factory("textgym/Remote-v0", url=server.url)().reset(seed=0)


@pytest.mark.parametrize("token", ["pässword", " padded", "tab\there"])
def test_serve_refuses_a_token_its_clients_cannot_send(token, capsys):
    from textgym.cli import main

    assert main(["serve", "textgym/Sudoku-v0", "--token", token, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "token" in err


def test_an_empty_token_is_refused_not_taken_for_no_token():
    from textgym.serve.guard import Guard

    with pytest.raises(ValueError, match="token"):
        Guard(None, token="")
