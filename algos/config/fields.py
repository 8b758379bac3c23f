"""Documented config fields: each field's help text lives once, in its metadata.

A config dataclass declares ``name: type = option(default, "what it means")``. The same text then
feeds the class docstring (:func:`documented` appends an ``Attributes:`` section), the command
line's ``--help`` (:mod:`textgym.algos.config.flags`) and the field tables of docs/trainers.md
(:func:`field_table`; ``python -m textgym.algos.config.tables docs/trainers.md`` rewrites them), so no
field is described twice.

Example:
    >>> from dataclasses import dataclass
    >>> @documented
    ... @dataclass(frozen=True, kw_only=True)
    ... class Run:
    ...     '''A run.'''
    ...     steps: int = option(100, "Optimiser steps.")
    >>> field_docs(Run)
    {'steps': 'Optimiser steps.'}
    >>> print(Run.__doc__.splitlines()[-1].strip())
    steps: Optimiser steps.
"""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")


def option(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = dataclasses.MISSING, **metadata: Any) -> Any:
    """A dataclass field with its documentation (``doc``) and any other ``metadata``.

    Args:
        default: The default value (``factory`` for a mutable one).
        doc: What the field means, in one or a few sentences (reStructuredText inline markup).
        factory: A zero-argument callable that makes the default.
        metadata: More entries of the field's metadata.
    """
    return dataclasses.field(default=default, default_factory=factory, metadata={"doc": doc, **metadata})


def field_docs(cls: type) -> dict[str, str]:
    """``{field: its documentation}`` for every field of the dataclass ``cls``."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}


def plain(text: str) -> str:
    """``text`` without reStructuredText roles and backticks (for ``--help``).

    Example:
        >>> plain("See :class:`~textgym.algos.grpo.SeedTree` and ``seed``.")
        'See textgym.algos.grpo.SeedTree and seed.'
    """
    return re.sub(r"(?::\w+:)?`+~?([^`]*)`+", r"\1", text)


def documented(cls: type[T]) -> type[T]:
    """Append an ``Attributes:`` section built from the fields' docs to ``cls``'s docstring."""
    lines = ["", "Attributes:"]
    for name, doc in field_docs(cls).items():
        lines += textwrap.wrap(f"{name}: {doc}", width=96, initial_indent="    ", subsequent_indent="        ")
    cls.__doc__ = (textwrap.dedent(cls.__doc__ or "").rstrip() + "\n" + "\n".join(lines)).strip("\n") + "\n"
    return cls


def check_choices(config: Any) -> None:
    """Raise ``ValueError`` unless every ``Literal``-typed field of ``config`` holds one of its values.

    The one validation of choice fields (``backend``, ``chat_template``, ``loss_aggregation``, ...):
    each config calls it in ``__post_init__``.
    """
    hints = get_type_hints(type(config))
    for f in dataclasses.fields(config):
        allowed = literal_values(hints[f.name])
        value = getattr(config, f.name)
        if allowed and value not in allowed and not (value is None and _optional(hints[f.name])):
            raise ValueError(f"{f.name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def literal_values(hint: Any) -> tuple[Any, ...]:
    """The values of a ``Literal`` hint (or of ``Literal[...] | None``), else ``()``."""
    for arg in (hint, *get_args(hint)):
        if get_origin(arg) is Literal:
            return get_args(arg)
    return ()


def _optional(hint: Any) -> bool:
    return type(None) in get_args(hint)


def to_json(config: Any) -> str:
    """A config (nested dataclasses, tuples as lists) as indented JSON: what ``--print-config`` shows
    and what a run writes to ``config.json``."""
    return json.dumps(dataclasses.asdict(config), indent=2) + "\n"


def markdown(text: str) -> str:
    """``text`` with reStructuredText roles as Markdown code spans (double backticks stay: Markdown reads them too).

    Example:
        >>> markdown("See :class:`~textgym.algos.grpo.SeedTree` and ``seed``.")
        'See `textgym.algos.grpo.SeedTree` and ``seed``.'
    """
    return re.sub(r":\w+:`~?([^`]*)`", r"`\1`", text)


def field_table(cls: type) -> str:
    """A Markdown table (field, default, meaning) of ``cls``'s fields, for docs/trainers.md."""
    rows = ["| field | default | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f"`{f.default!r}`"
        elif f.default_factory is not dataclasses.MISSING:
            made = f.default_factory()
            default = f"`{made!r}`" if not dataclasses.is_dataclass(made) else f"`{type(made).__name__}()`"
        else:
            default = "required"
        doc = markdown(f.metadata.get("doc", "")).replace("|", "\\|")
        rows.append(f"| `{f.name}` | {default} | {doc} |")
    return "\n".join(rows) + "\n"


_TABLE = re.compile(r"(<!-- fields: (\w+) -->\n)(.*?)(<!-- end fields -->)", re.DOTALL)


def render_tables(text: str, classes: dict[str, type]) -> str:
    """``text`` with every ``<!-- fields: Name -->`` ... ``<!-- end fields -->`` block rewritten as
    :func:`field_table` of ``classes[Name]``."""
    return _TABLE.sub(lambda m: m.group(1) + field_table(classes[m.group(2)]) + m.group(4), text)
