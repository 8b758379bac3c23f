"""textgym: Gymnasium environments for multi-turn, verifiable language-model RL.

``import textgym`` registers the ``textgym/<Name>-v0`` ids with Gymnasium; it imports neither
JAX nor torch.
"""

from typing import TYPE_CHECKING

from textgym.env import Outcome, TextEnv
from textgym.error import InvalidAction, InvalidTask, ResetNeeded, TextGymError, ToolError
from textgym.registration import ENVS, register_envs
from textgym.tasks import Task

if TYPE_CHECKING:  # for type checkers only: at run time __getattr__ below imports it on first use
    from textgym.remote import RemoteEnv

__version__ = "0.1.0"

register_envs()


def __getattr__(name: str):
    # RemoteEnv is imported on first use, so ``import textgym`` never loads a WebSocket client.
    if name == "RemoteEnv":
        from textgym.remote import RemoteEnv

        return RemoteEnv
    raise AttributeError(f"module 'textgym' has no attribute {name!r}")


__all__ = [
    "ENVS",
    "InvalidAction",
    "InvalidTask",
    "RemoteEnv",
    "Outcome",
    "ResetNeeded",
    "Task",
    "TextEnv",
    "TextGymError",
    "ToolError",
    "__version__",
]
