"""Sudoku-v0: 4x4, 6x6 and 9x9 puzzles with unique solutions, solved by tool moves or one answer.

Registered as ``textgym/Sudoku-v0`` (entry point ``textgym.envs.sudoku:SudokuEnv``); see
``docs/envs/sudoku.md``.
"""

from textgym.envs.sudoku.env import BLANKS, MAX_BLANKS, SudokuEnv
from textgym.envs.sudoku.solver import count_solutions, generate

__all__ = ["BLANKS", "MAX_BLANKS", "SudokuEnv", "count_solutions", "generate"]
