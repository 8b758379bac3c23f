"""The ``textgym`` command line: list, play, eval (and eval reverify), train, sft, serve, view and mcp.

Each command imports what it needs inside the command, so ``textgym list`` never loads an
env, and only ``train``/``sft`` load a deep-learning backend. Usage errors and textgym errors
print one line and exit with status 2; there are no tracebacks for a user's mistakes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from textgym.arguments import json_object, make_env, seed_int
from textgym.error import TextGymError

# (command, module, add-arguments function, run function, help) for commands that live in
# other modules; they are imported only when the command line names them.
_DELEGATED = (
    ("eval", "textgym.evaluate.command", "add_arguments", "run", "compare policies on the same seeds"),
    ("train", "textgym.algos.train.command", "add_train_arguments", "run_train", "GRPO training (jax or torch backend)"),
    ("sft", "textgym.algos.train.command", "add_sft_arguments", "run_sft", "supervised warm start on oracle demonstrations"),
    ("serve", "textgym.serve", "add_arguments", "run", "serve an env over the OpenEnv protocol (WebSocket)"),
    ("view", "textgym.view", "add_arguments", "run", "browse rollouts in one self-contained HTML page"),
    ("mcp", "textgym.integrations.mcp", "add_arguments", "run", "serve an env's tools over MCP (stdio, or --http PORT)"),
)
# Subcommands of a command whose first argument is positional (``textgym eval <id>``): the pair
# of words selects them, so ``textgym eval reverify FILE`` never reaches eval's own parser.
_NESTED = {
    ("eval", "reverify"): ("textgym.reverify", "add_arguments", "run", "re-score saved rollouts with today's verifiers"),
}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str):  # argparse hook
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="textgym", description="Multi-turn text environments for language-model RL.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("list", help="list the registered environment ids")

    play = sub.add_parser("play", help="play an environment yourself in the terminal")
    play.add_argument("env_id", help="environment id, e.g. textgym/Sudoku-v0")
    play.add_argument("--seed", type=seed_int, default=None, help="task seed (an integer >= 0)")
    play.add_argument("--env-kwargs", type=json_object, default={}, help="JSON object of env keyword arguments")

    wanted = argv[0] if argv else None
    for name, module, add_args, _, help_text in _DELEGATED:
        cmd = sub.add_parser(name, help=help_text)
        nested = [f"'textgym {a} {b}' {h}" for (a, b), (*_, h) in _NESTED.items() if a == name]
        cmd.epilog = "; ".join(nested) or None
        if name == wanted:  # import the command's module only when it is the one being run
            try:
                getattr(_import(module), add_args)(cmd)
            except ImportError as exc:
                parser.exit(2, f"textgym {name}: error: {exc}\n")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    nested = _NESTED.get(tuple(argv[:2]))
    if nested is not None:
        return _run_nested(argv[:2], argv[2:], *nested)
    args = build_parser(argv).parse_args(argv)
    args.command_line = argv  # what a launcher (textgym train --nproc) runs again in each process
    return _one_line_errors(args.command, lambda: _run(args))


def _one_line_errors(name: str, command: Callable[[], int | None]) -> int:
    """Run a command; a user's mistake or a textgym error is one line on stderr and status 2."""
    try:
        return int(command() or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (TextGymError, ValueError, FileNotFoundError, ImportError) as exc:
        print(f"textgym {name}: error: {exc}", file=sys.stderr)
        return 2


def _run_nested(words: list[str], argv: list[str], module: str, add_args: str, run: str, help_text: str) -> int:
    name = " ".join(words)
    parser = _Parser(prog=f"textgym {name}", description=help_text)
    try:
        mod = _import(module)
    except ImportError as exc:
        parser.exit(2, f"textgym {name}: error: {exc}\n")
    getattr(mod, add_args)(parser)
    args = parser.parse_args(argv)
    return _one_line_errors(name, lambda: getattr(mod, run)(args))


def _run(args: argparse.Namespace) -> int:
    if args.command == "list":
        return cmd_list()
    if args.command == "play":
        return cmd_play(args.env_id, args.seed, args.env_kwargs)
    for name, module, _, run, _ in _DELEGATED:
        if args.command == name:
            return int(getattr(_import(module), run)(args) or 0)
    raise AssertionError(args.command)


def cmd_list() -> int:
    from rich.console import Console
    from rich.table import Table

    from textgym.registration import ENVS

    table = Table("id", "description", box=None, show_header=True)
    for entry in ENVS:
        table.add_row(entry.id, entry.description)
    Console(width=160).print(table)
    return 0


def cmd_play(env_id: str, seed: int | None, env_kwargs: dict, read: Callable[[str], str] = input) -> int:
    """Play an env: type the assistant's turn; an empty line sends it, /quit leaves, /new restarts."""
    env = make_env(env_id, render_mode="ansi", **env_kwargs)
    print(f"{env_id}: type your turn (several lines allowed); an empty line sends it. /new, /quit.")
    obs, info = env.reset(seed=seed)
    print(env.render())
    shown = len(obs)
    while True:
        lines = []
        while True:
            try:
                line = read("> " if not lines else ". ")
            except EOFError:
                return 0
            if line.strip() == "/quit":
                return 0
            if line.strip() == "/new":
                obs, info = env.reset()
                print(env.render())
                shown, lines = len(obs), []
                continue
            if not line and lines:
                break
            if line:
                lines.append(line)
        obs, reward, terminated, truncated, info = env.step("\n".join(lines))
        for msg in obs[shown + 1 :]:
            print(f"[{msg['role']}] {msg['content']}")
        shown = len(obs)
        if terminated or truncated:
            verdict = "solved" if info.get("success") else "not solved"
            print(f"episode over after {info['turn']} turns: {verdict}, reward {reward:g}")
            print(json.dumps(info.get("verification"), default=str)[:2000])
            obs, info = env.reset()
            print("\nnew task:")
            print(env.render())
            shown = len(obs)


def _import(module: str):
    import importlib

    return importlib.import_module(module)


if __name__ == "__main__":
    sys.exit(main())
