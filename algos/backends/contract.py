"""Lazy exports for the backend packages: importing one is cheap, its framework loads on first use.

Both ``textgym.algos.jax`` and ``textgym.algos.torch`` build their module ``__getattr__`` here, so
they import the same way, check their extra the same way (a missing install raises
:class:`textgym.error.MissingDependency` naming the ``pip install``), and export the same names.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from textgym.error import require

CONTRACT: Mapping[str, str] = {
    "Learner": "learner",
    "grpo_loss": "loss",
    "load_model": "model",
    "make_schedule": "learner",
}
"""The names both backends export (their ``__all__``) -> the submodule that defines each, the same
file in both backends; each backend also keeps its own extras importable. Both also have a
``processes`` module with the same functions (:mod:`textgym.algos.distributed.processes`)."""

RENAMED: Mapping[str, str] = {"load_policy": "load_model"}
"""Old names both backends still answer to -> the name they now have (with a DeprecationWarning)."""


def exports(package: str, own: Mapping[str, str], modules: Sequence[str], extra: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports a name from its submodule of ``package`` on first use.

    Args:
        package: The backend package's ``__name__``.
        own: The backend's names beyond :data:`CONTRACT` -> the submodule defining each.
        modules: Third-party modules the backend needs, checked before the first import.
        extra: The pip extra that installs them.
    """
    table = {**CONTRACT, **own}

    def __getattr__(name: str) -> Any:
        if name in RENAMED:
            warnings.warn(f"{package}.{name} is renamed {RENAMED[name]}", DeprecationWarning, stacklevel=2)
            return __getattr__(RENAMED[name])
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        for module in modules:
            require(module, extra)
        value = getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
