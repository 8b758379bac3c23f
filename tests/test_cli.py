"""The command line: listing, playing, and one-line errors with exit status 2."""

import subprocess
import sys

import pytest

from textgym.cli import main
from textgym.registration import ENVS


def run(*args):
    return subprocess.run([sys.executable, "-m", "textgym.cli", *args], capture_output=True, text=True)


def test_list_shows_every_id():
    out = run("list")
    assert out.returncode == 0
    for entry in ENVS:
        assert entry.id in out.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((), "required"),
        (("bogus",), "invalid choice"),
        (("play",), "env_id"),
        (("play", "textgym/Nope-v0"), "unknown environment id"),
        (("play", "textgym/Sudoku-v0", "--env-kwargs", "{bad"), "not valid JSON"),
        (("play", "textgym/Sudoku-v0", "--env-kwargs", '{"no_such_option": 1}'), "cannot make"),
        (("play", "textgym/Sudoku-v0", "--seed", "-1"), "a seed must be an integer >= 0, got -1"),
        (("eval", "textgym/Sudoku-v0", "--seed", "-5"), "a seed must be an integer >= 0, got -5"),
        (("play", "textgym/Sudoku-v0", "--seed", "one"), "expected an integer >= 0"),
    ],
)
def test_bad_arguments_print_one_line_and_exit_2(args, fragment):
    out = run(*args)
    assert out.returncode == 2
    assert fragment in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_play_a_game_with_scripted_input(capsys):
    script = iter(["<answer>", "not a grid", "", "/quit"])
    from textgym.cli import cmd_play

    assert cmd_play("textgym/Sudoku-v0", 0, {"size": 4}, read=lambda prompt: next(script)) == 0
    out = capsys.readouterr().out
    assert "episode over" in out or "[user]" in out


def test_play_turns_hostile_json_into_feedback_not_a_traceback(capsys):
    script = iter(["<tool_call>" + "[" * 30000 + "</tool_call>", "", "/quit"])
    from textgym.cli import cmd_play

    assert cmd_play("textgym/Workplace-v0", 0, {}, read=lambda prompt: next(script)) == 0
    assert "nested too deeply" in capsys.readouterr().out


def test_main_returns_2_on_textgym_errors(capsys):
    assert main(["play", "textgym/Missing-v0"]) == 2
