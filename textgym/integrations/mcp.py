"""An env's tools as an MCP server (``textgym mcp <id>``), through the official ``mcp`` SDK.

Each MCP session plays its own episodes of its own env. Its tools:

* ``reset(seed, options?)`` starts an episode and returns the first observation as text;
* every tool of the env, with the env's JSON schema: a call is one assistant turn that calls
  that tool, and its result is what the env answered (the tool's result, and for Sudoku the
  board); bad arguments come back as a tool error (``isError``) and the episode goes on;
* ``respond(message)`` sends a plain assistant turn (Workplace's final answer, a Sudoku
  ``<answer>`` grid, a Code program).

Every call counts a turn, as a step does. The call that ends the episode adds a JSON block to its
result, also given as ``structuredContent``: ``reward`` (the episode's total), ``success``,
``end_reason``, ``terminated``, ``truncated`` and ``verification``.

Transports: stdio (the default, for a client that spawns the server), or streamable HTTP on a
loopback port (``--http PORT``, path ``/mcp``) with the SDK's DNS-rebinding protection on and,
with ``--token`` or ``$TEXTGYM_SERVE_TOKEN``, a shared token as ``textgym serve`` takes it:
loopback and Host/Origin checks keep browsers out, not the other users of one machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from textgym.error import TextGymError, require
from textgym.messages import render, thaw
from textgym.parsing import ToolCall
from textgym.remote import TOKEN_VARIABLE, checked_token, shared_token

RESET_SCHEMA = {
    "type": "object",
    "properties": {
        "seed": {"type": "integer", "minimum": 0, "description": "The task seed: the same seed gives the same task."},
        "options": {"type": "object", "description": 'Reset options, e.g. {"task": {...}} to pin a task.'},
    },
    "required": ["seed"],
    "additionalProperties": False,
}
RESPOND_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "The assistant's message."}},
    "required": ["message"],
    "additionalProperties": False,
}
RESPOND_HELP = (
    "Send a plain assistant message (no tool call): the final answer, an <answer> grid or a program, as the task "
    "asks. The result is the environment's reply; once the episode ends it carries the reward and the verification."
)


@dataclass
class _Episode:
    """One MCP session's env and the episode it is playing."""

    env: Any
    lock: Any
    live: bool = False
    reward: float = 0.0
    seen: int = 0  # messages of the conversation already returned
    outcome: dict[str, Any] | None = field(default=None)


class EnvToolServer:
    """The MCP server of one env id: tools listed once, each session's calls played on its own env.

    Args:
        env_id: A registered id, e.g. ``textgym/Workplace-v0``.
        env_kwargs: Keyword arguments for every session's env.
        make_env: ``make_env(env_id, **kwargs)``; :func:`textgym.arguments.make_env` by default.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None, make_env: Callable | None = None):
        types = require("mcp.types", "mcp")
        if make_env is None:
            from textgym.arguments import make_env
        self.env_id = env_id
        self._make = lambda: make_env(env_id, **dict(env_kwargs or {}))
        probe = self._make()
        served_elsewhere = not hasattr(probe.unwrapped, "tools")
        toolset = getattr(probe.unwrapped, "tools", None)
        probe.close()
        if served_elsewhere:  # textgym/Remote-v0: the tools live in the server's env, not in this process
            raise TextGymError(f"{env_id} has no tools in this process to serve: run textgym mcp where its env runs")
        schemas = toolset.schemas() if toolset else []
        clash = {s["function"]["name"] for s in schemas} & {"reset", "respond"}
        if clash:
            raise TextGymError(f"{env_id} has tools named {sorted(clash)}, which the MCP server's own tools use")
        reset_help = f"Start a new episode of {env_id} and return the task (its first observation)."
        self.tools = [
            types.Tool(name="reset", description=reset_help, inputSchema=RESET_SCHEMA),
            *(_mcp_tool(types, s["function"]) for s in schemas),
            types.Tool(name="respond", description=RESPOND_HELP, inputSchema=RESPOND_SCHEMA),
        ]
        self._episodes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def server(self):
        """A low-level ``mcp`` Server whose handlers route each session's calls to its env."""
        lowlevel = require("mcp.server.lowlevel", "mcp")
        anyio = require("anyio", "mcp")
        server = lowlevel.Server("textgym", instructions=f"Episodes of {self.env_id}: call reset first.")

        @server.list_tools()
        async def list_tools():
            return self.tools

        # The env checks arguments itself (and counts the turn, as a step does): no SDK validation.
        @server.call_tool(validate_input=False)
        async def call_tool(name: str, arguments: dict[str, Any]):
            session = server.request_context.session
            episode = self._episodes.get(session)
            if episode is None:
                episode = _Episode(await anyio.to_thread.run_sync(self._make), anyio.Lock())
                self._episodes[session] = episode
            async with episode.lock:  # one call at a time per episode, off the event loop
                return await anyio.to_thread.run_sync(self.call, episode, name, arguments)

        return server

    def call(self, episode: _Episode, name: str, arguments: Mapping[str, Any]):
        """Play one tool call on a session's episode; returns a ``CallToolResult``."""
        if name == "reset":
            return self._reset(episode, arguments)
        if not episode.live:
            after = f" (it ended with reward {episode.outcome['reward']:g})" if episode.outcome else ""
            return _result(f"No episode is running{after}; call reset(seed=...) first.", error=True)
        if name == "respond":
            message = arguments.get("message")
            if not isinstance(message, str) or set(arguments) != {"message"}:
                return _result('respond takes one argument, "message", a string.', error=True)
            action: Any = message
        else:
            call = ToolCall(f"mcp_{episode.env.unwrapped.turn + 1}", name, dict(arguments))
            action = {"role": "assistant", "content": "", "tool_calls": [call.to_openai()]}
        obs, reward, terminated, truncated, info = episode.env.step(action)
        episode.reward += float(reward)
        reply = "\n\n".join(m["content"] for m in obs[episode.seen + 1 :])  # after the agent's own message
        episode.seen = len(obs)
        if not (terminated or truncated):
            return _result(reply, error=info.get("error") is not None)
        episode.live = False
        episode.outcome = {
            "reward": episode.reward,
            "success": bool(info.get("success")),
            "end_reason": info.get("end_reason"),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "verification": thaw(info.get("verification")),
        }
        return _result(reply, error=info.get("error") is not None, outcome=episode.outcome)

    def _reset(self, episode: _Episode, arguments: Mapping[str, Any]):
        seed, options = arguments.get("seed"), arguments.get("options")
        if type(seed) is not int or seed < 0 or not (options is None or isinstance(options, dict)):
            return _result("reset takes seed (an integer >= 0) and optionally options (an object).", error=True)
        if set(arguments) - {"seed", "options"}:
            return _result(f"reset takes seed and options, not {sorted(set(arguments) - {'seed', 'options'})}", error=True)
        try:
            obs, _ = episode.env.reset(seed=seed, options=options)
        except (TextGymError, ValueError, TypeError) as exc:  # a bad pinned task: no episode, the session goes on
            episode.live = False
            return _result(f"reset failed: {exc}", error=True)
        episode.live, episode.reward, episode.seen, episode.outcome = True, 0.0, len(obs), None
        return _result(render(obs))


def _mcp_tool(types: Any, function: Mapping[str, Any]):
    return types.Tool(name=function["name"], description=function.get("description") or None, inputSchema=function["parameters"])


def _result(text: str, *, error: bool = False, outcome: dict[str, Any] | None = None):
    from mcp.types import CallToolResult, TextContent

    content = [TextContent(type="text", text=text or "(no reply)")]
    if outcome is not None:
        content.append(TextContent(type="text", text=json.dumps(outcome, default=str)))
    return CallToolResult(content=content, structuredContent=outcome, isError=error)


# ----- the command line -----


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from textgym.arguments import json_object

    parser.add_argument("env_id", help="environment id, e.g. textgym/Workplace-v0")
    parser.add_argument("--env-kwargs", type=json_object, default={}, help="JSON object of env keyword arguments")
    parser.add_argument(
        "--http", type=int, default=None, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio"
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"with --http: shared secret every client sends as 'Authorization: Bearer <token>' (default: ${TOKEN_VARIABLE}); "
        "loopback and the Host/Origin checks do not keep apart the users of one machine",
    )


def run(args: argparse.Namespace) -> int:
    if args.http is not None and not 0 < args.http < 65536:
        raise ValueError(f"--http must be a port in [1, 65535], got {args.http}")
    try:
        token = checked_token(shared_token(args.token))
    except ValueError as exc:
        raise ValueError(f"--token (or ${TOKEN_VARIABLE}): {exc}") from None
    if args.token is not None and args.http is None:
        raise ValueError("--token guards --http; a stdio server answers only the client that started it")
    require("mcp", "mcp")
    server = EnvToolServer(args.env_id, args.env_kwargs).server()
    if args.http is None:
        import anyio

        anyio.run(_serve_stdio, server)
    else:
        _serve_http(server, args.http, token)
    return 0


async def _serve_stdio(server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(server, port: int, token: str | None) -> None:
    import uvicorn
    from mcp.server.fastmcp.server import StreamableHTTPASGIApp
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from textgym.serve.command import bind
    from textgym.serve.guard import TokenGuard

    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    security = TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts])
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lambda app: manager.run())
    if token is not None:
        app.add_middleware(TokenGuard, token=token)
    sock = bind("127.0.0.1", port)  # a port in use is one line, before anything says it serves
    print(f"serving MCP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
