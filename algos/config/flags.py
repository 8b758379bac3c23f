"""Command-line flags generated from the config dataclasses: one place for every default and help.

Each field of :class:`~textgym.algos.config.TrainConfig`, :class:`~textgym.algos.config.SFTConfig`
and :class:`~textgym.algos.grpo.GRPOConfig` becomes ``--field-name``; its help is the field's
``doc`` metadata (:mod:`textgym.algos.config.fields`), its type and choices come from the annotation
(``Literal`` gives choices, ``bool`` gives ``--x/--no-x``, a ``dict`` takes a JSON object, a
``tuple[T, ...]`` comma-separated ``T`` values), and its default is the dataclass's own. Flags that
are not given are left out of the namespace (``argparse.SUPPRESS``), so the preset or the
dataclass decides, and no default is written twice.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from textgym.algos.config.fields import field_docs, plain
from textgym.arguments import comma_separated, json_object, seed_int


def _optional(hint: Any) -> Any:
    """``X`` for ``X | None``, else the hint itself."""
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _element(hint: Any) -> Any:
    """The element type of a repeated flag's field (``str`` for ``str | tuple[str, ...]``)."""
    args = [a for a in get_args(hint) if a is not type(None)] or [hint]
    return args[0] if args[0] in (int, float, str) else get_args(args[0])[0]


def add_fields(group: Any, cls: type, *, skip: tuple[str, ...] = (), repeat: tuple[str, ...] = ()) -> None:
    """Add ``--field-name`` for every field of ``cls`` except ``skip``.

    Args:
        group: A parser or argument group.
        cls: The config dataclass.
        skip: Fields without a flag (set elsewhere, or not settable from the command line).
        repeat: Fields whose flag may be given several times (a tuple of values).
    """
    hints, docs = get_type_hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        hint = _optional(hints[f.name])
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "dest": f.name}
        help_text = plain(docs[f.name])
        if f.default is not dataclasses.MISSING and f.default is not None and hint is not bool:
            help_text += f" (default: {f.default})"
        if f.name in repeat:
            kwargs.update(action="append", type=_element(hints[f.name]))
        elif get_origin(hint) is Literal:
            kwargs["choices"] = get_args(hint)
        elif hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
            help_text += f" (default: {'on' if f.default else 'off'})"
        elif f.name == "seed":
            kwargs["type"] = seed_int
        elif get_origin(hint) is dict or hint is dict:
            kwargs["type"] = json_object
        elif get_origin(hint) is tuple:
            kwargs["type"] = comma_separated(get_args(hint)[0])
        elif hint in (int, float, str):
            kwargs["type"] = hint
        else:
            raise TypeError(f"no flag type for {cls.__name__}.{f.name}: {hints[f.name]}")
        group.add_argument("--" + f.name.replace("_", "-"), help=help_text.replace("%", "%%"), **kwargs)


def given(args: argparse.Namespace, cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of ``cls`` that the command line set (others stay the preset's or the dataclass's)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.name not in skip and hasattr(args, f.name)}
