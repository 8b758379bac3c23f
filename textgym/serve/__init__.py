"""Serve any textgym env over the OpenEnv wire protocol (``textgym serve``, extra ``textgym[serve]``).

Stock OpenEnv clients work unchanged::

    textgym serve textgym/Sudoku-v0 --port 8000

    from openenv import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=3)
        result = env.step({"content": "<answer>...</answer>"})

See docs/serving.md for the protocol, the limits and the recipes.
"""

from textgym.error import require

require("fastapi", "serve")
require("uvicorn", "serve")
require("orjson", "serve")

from textgym.serve.app import EnvServer, create_app  # noqa: E402 - after the checks, so a missing extra names itself
from textgym.serve.command import add_arguments, run  # noqa: E402

__all__ = ["EnvServer", "add_arguments", "create_app", "run"]
