"""Serving: sessions held, step latency and overhead over the wire, OpenEnv's own server, faults.

Every figure comes from real sockets on this machine: ``textgym serve`` (and, side by side,
OpenEnv's ``create_app`` hosting the same env through ``textgym.integrations.openenv``) in one
process, the clients in this one. Episodes replay the oracle's actions, recorded in-process
first, so every episode must end with the reward it had in-process (anything else is a lost
episode).

    python benchmarks/serve_bench.py                      # all four parts
    python benchmarks/serve_bench.py --only latency --episodes 50

* ``sessions``: N concurrent sessions per env (Sudoku, Workplace), all connected and reset
  before any steps (held at once), then every one plays its whole episode concurrently;
  errors, lost episodes, p50/p99 step latency, steps/s (all steps over the wall time from the
  first connection to the last episode's end) and the server's peak RSS. The client runs in
  this process, on the same cores as the server.
* ``latency``: one client, one step at a time; p50 of the in-process step, of the round trip
  over the wire (a bare WebSocket client) and of ``RemoteEnv.step``. Wire minus in-process is
  the per-step cost of serving (server, client and loopback together); the transport floor
  (frames as large as the real replies echoed by the same uvicorn/Starlette stack, parsed by
  the same client) taken off as well leaves textgym's own server work per step. Rounds
  alternate ours, OpenEnv's, the floor and in-process.
* ``faults``: clients killed mid-episode (do their sessions come back?), the server killed and
  restarted under RemoteEnv clients (one clear error each, then the same episodes again),
  garbage frames interleaved with real episodes (an error reply each, episodes intact).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import gymnasium as gym

import textgym
from textgym.messages import thaw

REPO = Path(__file__).resolve().parents[1]
ENVS = {"sudoku": "textgym/Sudoku-v0", "workplace": "textgym/Workplace-v0"}
OPENENV_APP = (
    "import sys, uvicorn\n"
    "from openenv.core.env_server.http_server import create_app\n"
    "from textgym.integrations.openenv import environment_class, TextGymAction, TextGymObservation\n"
    "app = create_app(environment_class(sys.argv[1]), TextGymAction, TextGymObservation,"
    " max_concurrent_envs=int(sys.argv[3]))\n"
    "uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[2]), log_level='error', ws_max_size=16 << 20)\n"
)
# The transport floor: the same ASGI stack (uvicorn, websockets-sansio, uvloop, Starlette), echoing.
ECHO_APP = (
    "import sys, uvicorn\n"
    "from starlette.applications import Starlette\n"
    "from starlette.routing import Route, WebSocketRoute\n"
    "from starlette.responses import JSONResponse\n"
    "async def ws(websocket):\n"
    "    await websocket.accept()\n"
    "    while True:\n"
    "        m = await websocket.receive()\n"
    "        if m['type'] == 'websocket.disconnect': return\n"
    "        await websocket.send_text(m['text'])\n"
    "async def health(request): return JSONResponse({'status': 'healthy'})\n"
    "app = Starlette(routes=[WebSocketRoute('/ws', ws), Route('/health', health)])\n"
    "uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[2]), ws='websockets-sansio', log_level='error')\n"
)


# ----- servers -----


class Server:
    def __init__(self, kind: str, env_id: str, max_sessions: int, port: int | None = None):
        self.kind, self.env_id, self.max_sessions = kind, env_id, max_sessions
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}/ws"

    def __enter__(self) -> Server:
        if self.kind == "textgym":
            cmd = [
                sys.executable,
                "-m",
                "textgym.cli",
                "serve",
                self.env_id,
                "--port",
                str(self.port),
                "--max-sessions",
                str(self.max_sessions),
            ]
        else:
            app = OPENENV_APP if self.kind == "openenv" else ECHO_APP
            cmd = [sys.executable, "-c", app, self.env_id, str(self.port), str(self.max_sessions)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.kind} server did not start: {self.proc.stderr.read()}") from None
                time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self) -> float:
        """The server process's CPU seconds so far (user + system): its own work, whatever the load."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- episodes recorded in-process -----


def wire(action) -> dict:
    return {"content": action} if isinstance(action, str) else {k: v for k, v in thaw(action).items() if k != "role"}


def record(env_id: str, seeds) -> list[dict]:
    """The oracle's episode for each seed: its wire actions, rewards and in-process step times."""
    env = gym.make(env_id)
    plans = []
    for seed in seeds:
        env.reset(seed=seed)
        actions, reward, step_s, done = [], 0.0, [], False
        while not done:
            action = env.unwrapped.oracle_action(place=5) if "Sudoku" in env_id else env.unwrapped.oracle_action()
            started = time.perf_counter()
            _, r, terminated, truncated, _ = env.step(action)
            step_s.append(time.perf_counter() - started)
            actions.append(wire(action))
            reward += r
            done = terminated or truncated
        plans.append({"seed": seed, "actions": actions, "reward": reward, "step_s": step_s})
    env.close()
    return plans


def replay(env_id: str, plans: list[dict]) -> None:
    """The recorded episodes, in-process (no env checker, as the server makes its envs)."""
    env = gym.make(env_id, disable_env_checker=True)
    for plan in plans:
        env.reset(seed=plan["seed"])
        for action in plan["actions"]:
            env.step(action if "tool_calls" in action else action["content"])
    env.close()


# ----- part 1: sessions held -----


async def play(url: str, plan: dict, latencies: list, barrier: asyncio.Barrier | None, stats: dict) -> None:
    from websockets.asyncio.client import connect

    try:
        async with connect(url, max_size=None, compression=None, open_timeout=120, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": plan["seed"]}}))
            reply = json.loads(await ws.recv())
            if reply["type"] != "observation":
                raise RuntimeError(reply)
            if barrier is not None:
                await barrier.wait()  # every session is live before any steps
            total = 0.0
            for action in plan["actions"]:
                frame = json.dumps({"type": "step", "data": action})
                started = time.perf_counter()
                await ws.send(frame)
                reply = json.loads(await ws.recv())
                latencies.append(time.perf_counter() - started)
                if reply["type"] != "observation":
                    raise RuntimeError(reply)
                total += reply["data"]["reward"]
            if total != plan["reward"] or not reply["data"]["done"]:
                stats["lost"] += 1
    except Exception as exc:  # every failure is counted, none stops the run
        stats["errors"] += 1
        stats.setdefault("first_error", repr(exc)[:200])
        if barrier is not None and not barrier.broken:
            await barrier.abort()


def sessions_run(kind: str, env_id: str, plans: list[dict]) -> dict:
    with Server(kind, env_id, max_sessions=len(plans) + 8) as server:
        latencies: list[float] = []
        stats = {"errors": 0, "lost": 0}

        async def main():
            barrier = asyncio.Barrier(len(plans))
            await asyncio.gather(*(play(server.ws, p, latencies, barrier, stats) for p in plans))

        started, cpu = time.perf_counter(), server.cpu_s()
        asyncio.run(main())
        wall, cpu = time.perf_counter() - started, server.cpu_s() - cpu
        return {
            "server": kind,
            "env": env_id,
            "sessions": len(plans),
            **stats,
            "steps": len(latencies),
            "p50_ms": pct(latencies, 50) * 1e3,
            "p99_ms": pct(latencies, 99) * 1e3,
            "steps_per_s": len(latencies) / wall,
            "wall_s": wall,
            "server_peak_rss_mib": server.peak_rss_mib(),
            "server_cpu_s": cpu,
            "server_cpu_ms_per_episode": cpu / len(plans) * 1e3,
        }


# ----- part 2: latency, one step at a time -----


def sequential(url: str, plans: list[dict], sizes: list[int] | None = None) -> list[float]:
    """Step round trips; the reply sizes go to ``sizes``."""
    from websockets.sync.client import connect

    out = []
    with connect(url, max_size=None, compression=None) as ws:
        for plan in plans:
            ws.send(json.dumps({"type": "reset", "data": {"seed": plan["seed"]}}))
            ws.recv()
            for action in plan["actions"]:
                frame = json.dumps({"type": "step", "data": action})
                started = time.perf_counter()
                ws.send(frame)
                raw = ws.recv()
                reply = json.loads(raw)
                out.append(time.perf_counter() - started)
                assert reply["type"] == "observation", reply
                if sizes is not None:
                    sizes.append(len(raw))
    return out


def echo(url: str, sizes: list[int]) -> list[float]:
    """Round trips of frames as large as the real replies, through the bare ASGI stack."""
    from websockets.sync.client import connect

    out = []
    with connect(url, max_size=None, compression=None) as ws:
        for size in sizes:
            frame = json.dumps({"type": "step", "data": {"content": "x" * max(0, size - 37)}})
            started = time.perf_counter()
            ws.send(frame)
            json.loads(ws.recv())
            out.append(time.perf_counter() - started)
    return out


def remote_env_steps(url: str, plans: list[dict]) -> list[float]:
    env, out = textgym.RemoteEnv(url), []
    for plan in plans:
        env.reset(seed=plan["seed"])
        for action in plan["actions"]:
            started = time.perf_counter()
            env.step(action)
            out.append(time.perf_counter() - started)
    env.close()
    return out


def latency_run(env_id: str, episodes: int, rounds: int) -> dict:
    plans = record(env_id, range(10_000, 10_000 + episodes))
    names = ("in_process", "textgym_wire", "textgym_remote_env", "openenv_wire", "transport_floor")
    results: dict[str, list[float]] = {k: [] for k in names}
    with Server("textgym", env_id, 8) as ours, Server("openenv", env_id, 8) as theirs, Server("echo", env_id, 8) as floor:
        for url in (ours.ws, theirs.ws):  # a warm-up round, not counted: first resets build caches
            sequential(url, plans)
        cpu = {"textgym": 0.0, "openenv": 0.0, "in_process": 0.0}
        for _ in range(rounds):  # alternate, so load on the shared machine hits all alike
            sizes: list[int] = []
            for name, server in (("textgym", ours), ("openenv", theirs)):
                before = server.cpu_s()
                results[f"{name}_wire"].append(pct(sequential(server.ws, plans, sizes if name == "textgym" else None), 50))
                cpu[name] += server.cpu_s() - before
            results["transport_floor"].append(pct(echo(floor.ws, sizes), 50))
            before = time.process_time()
            replay(env_id, plans)
            cpu["in_process"] += time.process_time() - before
            results["textgym_remote_env"].append(pct(remote_env_steps(ours.url, plans), 50))
            results["in_process"].append(pct([s for p in record(env_id, [p["seed"] for p in plans]) for s in p["step_s"]], 50))
    p50 = {k: statistics.median(v) * 1e6 for k, v in results.items()}
    steps = sum(len(p["actions"]) for p in plans)
    return {
        "env": env_id,
        "steps_per_round": steps,
        "rounds": rounds,
        **{f"{k}_p50_us": round(v, 1) for k, v in p50.items()},
        "textgym_overhead_p50_us": round(p50["textgym_wire"] - p50["in_process"], 1),
        "textgym_server_work_p50_us": round(p50["textgym_wire"] - p50["in_process"] - p50["transport_floor"], 1),
        "openenv_overhead_p50_us": round(p50["openenv_wire"] - p50["in_process"], 1),
        "steps_per_s_wire": round(1e6 / p50["textgym_wire"]),
        "steps_per_s_in_process": round(1e6 / p50["in_process"]),
        # CPU per step, its reset included (one per episode), of the server process and of the same
        # episodes replayed in-process: the difference is what serving costs the server per step.
        **{f"{k}_cpu_us_per_step": round(v / (rounds * steps) * 1e6, 1) for k, v in cpu.items()},
        "textgym_server_cpu_overhead_us": round((cpu["textgym"] - cpu["in_process"]) / (rounds * steps) * 1e6, 1),
        "openenv_server_cpu_overhead_us": round((cpu["openenv"] - cpu["in_process"]) / (rounds * steps) * 1e6, 1),
    }


# ----- part 3: faults -----

_HOLDER = (
    "import json, sys, time\n"
    "from websockets.sync.client import connect\n"
    "socks = []\n"
    "for i in range(int(sys.argv[2])):\n"
    "    ws = connect(sys.argv[1]).__enter__(); ws.send(json.dumps({'type': 'reset', 'data': {'seed': i}})); ws.recv()\n"
    "    ws.send(json.dumps({'type': 'step', 'data': {'content': 'thinking'}})); ws.recv(); socks.append(ws)\n"
    "print('held', flush=True); time.sleep(600)\n"
)


def faults_run(env_id: str, n: int) -> dict:
    out: dict[str, object] = {"env": env_id}
    plans = record(env_id, range(n))
    # (a) clients killed mid-episode: their sessions must come back.
    with Server("textgym", env_id, max_sessions=n) as server:
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, server.ws, str(n)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait()
        killed_at = time.perf_counter()
        stats = {"errors": 0, "lost": 0}
        asyncio.run(_gather(server.ws, plans, stats))
        out["killed_clients"] = {
            "sessions_killed": n,
            "new_episodes_after": n,
            **stats,
            "seconds_until_all_replayed": round(time.perf_counter() - killed_at, 2),
            "server_alive": server.alive(),
        }
    # (b) server killed (SIGKILL) and restarted under RemoteEnv clients.
    port = free_port()
    envs = [textgym.RemoteEnv(f"http://127.0.0.1:{port}", timeout=10) for _ in range(n)]
    with Server("textgym", env_id, max_sessions=n, port=port) as server:
        first = [env.reset(seed=p["seed"])[0] for env, p in zip(envs, plans)]
        for env, p in zip(envs, plans):
            env.step(p["actions"][0])
        server.proc.kill()
        server.proc.wait()
        raised = 0
        for env, p in zip(envs, plans):
            try:
                env.step(p["actions"][-1])
            except textgym.error.RemoteError:
                raised += 1
    with Server("textgym", env_id, max_sessions=n, port=port):
        same, complete = 0, 0
        for env, p, obs in zip(envs, plans, first):
            same += env.reset(seed=p["seed"])[0] == obs
            total = sum(env.step(a)[1] for a in p["actions"])
            complete += total == p["reward"]
            env.close()
    out["server_killed"] = {
        "clients": n,
        "raised_remote_error": raised,
        "same_episode_after_restart": same,
        "episodes_complete_after_restart": complete,
    }
    # (c) garbage frames between the real steps of real episodes.
    with Server("textgym", env_id, max_sessions=n) as server:
        counts = {"garbage": 0, "error_replies": 0, "lost": 0, "errors": 0}
        asyncio.run(_garbage(server.ws, plans, counts))
        out["garbage"] = {**counts, "server_alive": server.alive(), "server_peak_rss_mib": round(server.peak_rss_mib(), 1)}
    return out


async def _gather(url, plans, stats):
    await asyncio.gather(*(play(url, p, [], None, stats) for p in plans))


def _junk(rng: random.Random) -> str | bytes:
    kind = rng.randrange(6)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if kind == 1:
        return json.dumps({"type": "step", "data": {"content": "x"}})[: rng.randrange(1, 30)]
    if kind == 2:
        return json.dumps({"type": rng.choice(["jump", "", None, 7, "RESET"]), "data": {}})
    if kind == 3:
        return json.dumps({"type": "step", "data": rng.choice([None, 5, "text", [1], {"content": 1}, {"tool_calls": 3}])})
    if kind == 4:
        return json.dumps({"type": "reset", "data": rng.choice([{"seed": -5}, {"seed": "a"}, {"options": 3}, {"x": 1}])})
    return "x" * (2 << 20)  # oversized


async def _garbage(url, plans, counts):
    from websockets.asyncio.client import connect

    async def one(plan, rng):
        try:
            async with connect(url, max_size=None, compression=None, ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": plan["seed"]}}))
                await ws.recv()
                total = 0.0
                for action in plan["actions"]:
                    for _ in range(rng.randrange(1, 6)):
                        await ws.send(_junk(rng))
                        counts["garbage"] += 1
                        reply = json.loads(await ws.recv())  # read before counting: += across an await loses updates
                        counts["error_replies"] += reply["type"] == "error"
                    await ws.send(json.dumps({"type": "step", "data": action}))
                    reply = json.loads(await ws.recv())
                    total += reply["data"]["reward"]
                counts["lost"] += total != plan["reward"]
        except Exception:
            counts["errors"] += 1

    await asyncio.gather(*(one(p, random.Random(p["seed"])) for p in plans))


def pct(values, q) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def report(results: dict) -> str:
    """The docs/benchmarks.md tables for a run's results."""
    lines = []
    if results.get("sessions"):
        lines += [
            "| env | server | sessions held | errors | lost episodes | p50 / p99 step latency | steps/s | server CPU per episode | server peak RSS |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results["sessions"]:
            lines.append(
                f"| {r['env'].split('/')[1]} | {r['server']} (round {r['round']}) | {r['sessions']} | {r['errors']} | {r['lost']} "
                f"| {r['p50_ms']:.0f} / {r['p99_ms']:.0f} ms | {r['steps_per_s']:.0f} | {r['server_cpu_ms_per_episode']:.1f} ms "
                f"| {r['server_peak_rss_mib']:.0f} MiB |"
            )
        lines.append("")
    if results.get("latency"):
        lines += [
            "| env | in-process step | textgym wire | RemoteEnv.step | OpenEnv create_app wire | transport floor "
            "| textgym server CPU over in-process | OpenEnv server CPU over in-process |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in results["latency"]:
            lines.append(
                f"| {r['env'].split('/')[1]} | {r['in_process_p50_us']:.0f} us | {r['textgym_wire_p50_us']:.0f} us "
                f"| {r['textgym_remote_env_p50_us']:.0f} us | {r['openenv_wire_p50_us']:.0f} us | {r['transport_floor_p50_us']:.0f} us "
                f"| {r['textgym_server_cpu_overhead_us']:.0f} us | {r['openenv_server_cpu_overhead_us']:.0f} us |"
            )
        lines.append("")
    for r in results.get("faults", []):
        lines.append("```\n" + json.dumps(r, indent=1) + "\n```")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=["sessions", "latency", "faults"], choices=["sessions", "latency", "faults"])
    parser.add_argument("--sessions", type=int, default=1000, help="concurrent sessions per env")
    parser.add_argument("--session-rounds", type=int, default=2, help="alternated runs per server in the sessions part")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per latency round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fault-sessions", type=int, default=100)
    parser.add_argument("--servers", nargs="*", default=["textgym", "openenv"], choices=["textgym", "openenv"])
    parser.add_argument("--out", default=None, help="write the results as JSON")
    parser.add_argument("--report", default=None, metavar="JSON", help="only print the tables of an earlier run's --out")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))
        return
    results: dict[str, list] = {}
    if "sessions" in args.only:
        for env_id in ENVS.values():
            plans = record(env_id, range(args.sessions))
            for round_ in range(args.session_rounds):  # alternate servers: the machine's load hits both alike
                for kind in args.servers:
                    row = {"round": round_, **sessions_run(kind, env_id, plans)}
                    print(json.dumps(row), flush=True)
                    results.setdefault("sessions", []).append(row)
    if "latency" in args.only:
        for env_id in ENVS.values():
            row = latency_run(env_id, args.episodes, args.rounds)
            print(json.dumps(row), flush=True)
            results.setdefault("latency", []).append(row)
    if "faults" in args.only:
        row = faults_run(ENVS["sudoku"], args.fault_sessions)
        print(json.dumps(row), flush=True)
        results.setdefault("faults", []).append(row)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))


if __name__ == "__main__":
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    main()
