"""Sudoku side by side: textgym vs GEM vs TextArena, reset cost and step throughput in one run.

Each library runs in its own worker process (textgym from this repo with ``.venv``; GEM and
TextArena from a separate virtualenv), and the workers are interleaved round by round so that
machine load hits every library alike. Times are CPU seconds of the worker (``time.process_time``).

Cases (the same scripted policy everywhere: one correct placement per turn until solved; actions
are built from the env's solution before the clock starts):

* reset 4x4: textgym ``size=4, blanks=10``; GEM ``game:Sudoku-v0-easy`` (4x4, digs 10 cells).
  TextArena has no 4x4 Sudoku.
* reset 9x9: textgym ``size=9, blanks=50``; GEM ``game:Sudoku-v0-hard`` (digs 50 cells);
  TextArena ``Sudoku-v0-raw`` (digs 21 cells). Every one checks uniqueness.
* floor: the same actions stepped into an env whose step only appends one message to the
  conversation it returns (``gym.make``'d, so with the same wrappers); the last column is
  textgym's step time over the floor's.
* steps 4x4 / 9x9: ``step`` calls per CPU second over whole episodes. textgym is made with
  ``gym.make`` and returns the whole conversation (tuple of messages) every step; GEM returns the
  latest message only; TextArena's loop is ``get_observation()`` + ``step()``.

Run (about 6 CPU-minutes in all; 13 wall-clock minutes on a busy 2-core machine)::

    python3 -m venv .bench-venvs/gem && .bench-venvs/gem/bin/pip install gem-llm textarena
    .venv/bin/python benchmarks/sudoku_bench.py --peer-python .bench-venvs/gem/bin/python --rounds 3 --seconds 2

It prints a Markdown table (medians over rounds) and the ratios quoted in docs/benchmarks.md.
``--baseline-python OLD_VENV/bin/python`` (a venv with another checkout installed editable) adds
that checkout's textgym as a column, stepped by the same adapters in the same alternated rounds,
for before/after figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = ("reset4", "reset9", "steps4", "steps9")
LIBS = ("textgym", "gem", "textarena", "floor")


# ----- adapters: make, reset and the scripted solver moves for each library -----


class TextgymAdapter:
    def __init__(self, size: int):
        import gymnasium as gym

        self.env = gym.make("textgym/Sudoku-v0", size=size, blanks=10 if size == 4 else 50)
        self.size = size

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)

    def moves(self) -> list[str]:
        u = self.env.unwrapped
        call = '<tool_call>{"name": "place", "arguments": {"row": %d, "col": %d, "digit": %d}}</tool_call>'
        n = self.size
        return [call % (i // n + 1, i % n + 1, s) for i, (p, s) in enumerate(zip(u.puzzle, u.solution)) if not p]

    def step(self, action: str) -> bool:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return terminated or truncated


class GemAdapter:
    def __init__(self, size: int):
        import gem

        self.env = gem.make("game:Sudoku-v0-easy" if size == 4 else "game:Sudoku-v0-hard")

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)

    def moves(self) -> list[str]:
        e = self.env
        return [
            "\\boxed{%d %d %d}" % (r + 1, c + 1, e.full_grid[r][c]) for r in range(e.scale) for c in range(e.scale) if e.board[r][c] == 0
        ]

    def step(self, action: str) -> bool:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return terminated or truncated


class TextArenaAdapter:
    def __init__(self, size: int):
        if size != 9:
            raise NotImplementedError("TextArena's Sudoku is 9x9 only")
        import textarena as ta

        self.env = ta.make("Sudoku-v0-raw")

    def reset(self, seed: int) -> None:
        self.env.reset(num_players=1, seed=seed)

    def moves(self) -> list[str]:
        e = self.env
        board = e.state.game_state["board"]
        return ["[%d %d %d]" % (r + 1, c + 1, e.full_grid[r][c]) for r in range(9) for c in range(9) if board[r][c] == 0]

    def step(self, action: str) -> bool:
        self.env.get_observation()
        done, info = self.env.step(action)
        return done


class FloorAdapter(TextgymAdapter):
    """The floor: the same episodes' actions, each stepped into an env made with
    ``gym.make`` whose step only appends the action as one message to the conversation it
    returns (what any env that returns the whole conversation must do at least)."""

    def __init__(self, size: int):
        import gymnasium as gym

        from textgym import messages
        from textgym.spaces import AssistantTurn, Conversation

        super().__init__(size)

        class Floor(gym.Env):
            metadata = {"render_modes": [], "render_fps": 1}
            observation_space, action_space = Conversation(), AssistantTurn()

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.conversation = (messages.user("start"),)
                return self.conversation, {}

            def step(self, action):
                self.conversation = (*self.conversation, messages.assistant(action))
                return self.conversation, 0.0, False, False, {}

        if "bench/Floor-v0" not in gym.registry:
            # wrapped as gym.make wraps textgym's ids (which leave out the passive checker)
            checker_off = gym.spec("textgym/Sudoku-v0").disable_env_checker
            gym.register("bench/Floor-v0", entry_point=Floor, disable_env_checker=checker_off)
        self.floor = gym.make("bench/Floor-v0")
        self.left = 0
        self.episodes: list[list[str]] = []  # the first 20 seeds' moves, then again in turn
        self._moves: list[str] = []

    def reset(self, seed: int) -> None:
        if len(self.episodes) < 20:
            super().reset(seed)
            self.episodes.append(super().moves())
        self._moves = self.episodes[seed % len(self.episodes)]
        self.floor.reset(seed=seed)
        self.left = len(self._moves)

    def moves(self) -> list[str]:
        return self._moves

    def step(self, action: str) -> bool:
        self.floor.step(action)
        self.left -= 1
        return self.left == 0


ADAPTERS = {"textgym": TextgymAdapter, "gem": GemAdapter, "textarena": TextArenaAdapter, "floor": FloorAdapter}


# ----- one measurement in a worker process -----


def measure(lib: str, case: str, seconds: float, seed0: int) -> dict:
    """CPU time per reset, or steps per CPU second, for ``seconds`` of work (at least 5 episodes)."""
    size = 4 if case.endswith("4") else 9
    if lib == "floor" and case.startswith("reset"):
        return {"lib": lib, "case": case, "skipped": "the floor is a step"}
    try:
        env = ADAPTERS[lib](size)
    except NotImplementedError as exc:
        return {"lib": lib, "case": case, "skipped": str(exc)}
    env.reset(seed0)  # warm-up: imports, caches, first-call checks
    for action in env.moves():
        if env.step(action):
            break
    spent, count, episodes, blanks = 0.0, 0, 0, 0
    seed = seed0 + 1
    while spent < seconds or episodes < 5:
        if case.startswith("reset"):
            t = time.process_time()
            env.reset(seed)
            spent += time.process_time() - t
            count += 1
            blanks += len(env.moves())
        else:
            env.reset(seed)
            actions = env.moves()
            blanks += len(actions)
            t = time.process_time()
            for action in actions:
                count += 1
                if env.step(action):
                    break
            spent += time.process_time() - t
        episodes += 1
        seed += 1
    out = {"lib": lib, "case": case, "episodes": episodes, "mean_blanks": blanks / episodes}
    if case.startswith("reset"):
        out["ms_per_reset"] = 1000 * spent / count
    else:
        out["steps_per_cpu_s"] = count / spent
    return out


# ----- the orchestrator -----


def run_worker(python: str, lib: str, case: str, seconds: float, seed0: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if lib == "baseline":  # textgym as that venv installed it: this repo on the path would mix the two
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    worker = "textgym" if lib == "baseline" else lib
    cmd = [python, __file__, "--worker", worker, case, "--seconds", str(seconds), "--seed", str(seed0)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"lib": lib, "case": case, "error": last}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", default=".bench-venvs/gem/bin/python", help="python with gem-llm and textarena")
    parser.add_argument("--textgym-python", default=sys.executable, help="python with textgym's dependencies")
    parser.add_argument("--baseline-python", help="python of a venv with another textgym checkout (before/after)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per measurement")
    parser.add_argument("--worker", nargs=2, metavar=("LIB", "CASE"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    args = parser.parse_args(argv)
    if args.worker:
        lib, case = args.worker
        print(json.dumps(measure(lib, case, args.seconds, args.seed)))
        return 0

    libs = LIBS + ("baseline",) if args.baseline_python else LIBS
    pythons = {"textgym": args.textgym_python, "floor": args.textgym_python, "baseline": args.baseline_python}
    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for case in args.cases:
            for lib in libs:
                python = pythons.get(lib, args.peer_python)
                res = run_worker(python, lib, case, args.seconds, seed0=1000 * r)
                results.setdefault((lib, case), []).append(res)
                print(f"round {r + 1} {case:7s} {lib:9s} {json.dumps(res)}", file=sys.stderr)
    print_table(results, args.cases, libs)
    return 0


def _median(rows: list[dict], key: str) -> float | None:
    values = [row[key] for row in rows if key in row]
    return statistics.median(values) if values else None


def print_table(results: dict[tuple[str, str], list[dict]], cases: list[str], libs: tuple[str, ...] = LIBS) -> None:
    extra = " textgym vs baseline |" if "baseline" in libs else ""
    print("| case | " + " | ".join(libs) + " | textgym vs GEM | textgym step / floor step |" + extra)
    print("|---|" + "---|" * (len(libs) + 2 + bool(extra)))
    for case in cases:
        key = "ms_per_reset" if case.startswith("reset") else "steps_per_cpu_s"
        unit = "ms/reset" if key == "ms_per_reset" else "steps/CPU-s"
        cells, values = [], {}
        for lib in libs:
            rows = results[(lib, case)]
            value = _median(rows, key)
            values[lib] = value
            if value is None:
                why = rows[0].get("skipped") or rows[0].get("error", "?")
                cells.append(f"n/a ({why})")
            else:
                blanks = _median(rows, "mean_blanks")
                cells.append(f"{value:,.3g} {unit} ({blanks:.0f} blanks)" if key == "ms_per_reset" else f"{value:,.0f} {unit}")
        tg, gm, fl = values["textgym"], values["gem"], values["floor"]
        if tg and gm:
            ratio = gm / tg if key == "ms_per_reset" else tg / gm
            what = "faster reset" if key == "ms_per_reset" else "step throughput"
            cells.append(f"{ratio:.2f}x {what}")
        else:
            cells.append("n/a")
        cells.append(f"{fl / tg:.1f}x" if tg and fl and key != "ms_per_reset" else "n/a")
        if extra:
            base = values["baseline"]
            cells.append(f"{(base / tg if key == 'ms_per_reset' else tg / base):.2f}x" if tg and base else "n/a")
        print(f"| {case} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
