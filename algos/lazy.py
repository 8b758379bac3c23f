"""Lazy exports for the backend packages: importing one is cheap, its framework loads on first use.

Both ``textgym.algos.jax`` and ``textgym.algos.torch`` build their module ``__getattr__`` here, so
they import the same way, check their extra the same way (a missing install raises
:class:`textgym.error.MissingDependency` naming the ``pip install``), and export the same names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from textgym.error import require

CONTRACT: tuple[str, ...] = ("Learner", "Policy", "grpo_loss", "load_policy", "make_schedule")
"""The names both backends export (their ``__all__``); each also keeps its own extras importable."""


def exports(package: str, table: Mapping[str, str], modules: Sequence[str], extra: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table[name]`` (a submodule of ``package``) on first use.

    Args:
        package: The backend package's ``__name__``.
        table: Exported name -> the submodule defining it; must cover :data:`CONTRACT`.
        modules: Third-party modules the backend needs, checked before the first import.
        extra: The pip extra that installs them.
    """
    missing = set(CONTRACT) - set(table)
    if missing:
        raise ValueError(f"{package} must export {sorted(missing)}")

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        for module in modules:
            require(module, extra)
        value = getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
