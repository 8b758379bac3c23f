"""A scripted OpenAI-compatible chat server on loopback (stdlib http.server), for tests.

The request's model name picks the script: ``text`` answers with logprobs, ``tool`` returns
native ``tool_calls``, ``slow`` replies after 2 s, ``flaky`` fails with HTTP 500 until its third
request, ``sleepy`` sleeps briefly so a test can count the requests in flight at once, ``long`` is cut by
``max_tokens`` (``finish_reason: "length"``) in the middle of a wrong answer.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.flaky_failures = 0

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        server: FakeChatServer = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.requests.append(body)
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            self.reply(server, body)
        finally:
            with server.lock:
                server.in_flight -= 1

    def reply(self, server, body):
        model = body["model"]
        if model == "flaky":
            with server.lock:
                fail = server.flaky_failures < 2
                server.flaky_failures += fail
            if fail:
                return self.send(500, {"error": {"message": "overloaded", "type": "server_error"}})
        if model == "slow":
            time.sleep(2.0)
        if model == "sleepy":
            time.sleep(0.3)
        message = {"role": "assistant", "content": "<answer>7</answer>"}
        logprobs = {
            "content": [
                {"token": t, "logprob": -0.25 * (i + 1), "bytes": None, "top_logprobs": []}
                for i, t in enumerate(["<answer>", "7", "</answer>"])
            ]
        }
        finish = "stop"
        if model == "long":  # max_tokens cut the reply in the middle of its answer
            message, finish = {"role": "assistant", "content": "<answer>1"}, "length"
        if model == "tool":
            n = len(body["messages"])
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{n}", "type": "function", "function": {"name": "check", "arguments": json.dumps({"number": 7})}}
                ],
            }
            logprobs = None
        self.send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("retry-after-ms", "10")  # the openai client honours it: fast retries
        self.end_headers()
        self.wfile.write(data)


def serve():
    """Start a server in a daemon thread; stop it with ``stop(server)``."""
    srv = FakeChatServer()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def stop(srv):
    srv.shutdown()
    srv.server_close()
