"""Command-line flags generated from the config dataclasses: one place for every default and help.

Each field of :class:`~textgym.algos.config.TrainConfig`, :class:`~textgym.algos.config.SFTConfig`
and :class:`~textgym.algos.grpo.GRPOConfig` becomes ``--field-name``; its help is the field's entry
in the class docstring's ``Attributes:`` section, its type and choices come from the annotation
(``Literal`` gives choices, ``bool`` gives ``--x/--no-x``, a ``dict`` takes a JSON object), and its
default is the dataclass's own. Flags that are not given are left out of the namespace
(``argparse.SUPPRESS``), so the dataclass (or a recipe, for fields whose default is ``None``)
decides, and no default is written twice.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from textgym.cli import json_object, seed_int


def field_docs(cls: type) -> dict[str, str]:
    """``{field: its description}`` from the ``Attributes:`` section of ``cls``'s docstring.

    Example:
        >>> from textgym.algos.grpo import GRPOConfig
        >>> field_docs(GRPOConfig)["kl_beta"].split(";")[0]
        'Weight of the k3 KL to the frozen reference policy'
    """
    doc = inspect.cleandoc(cls.__doc__ or "")
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    docs: dict[str, str] = {}
    name = None
    for line in section.splitlines():
        entry = re.match(r"^    ([a-z_][a-z0-9_, ]*):\s*(.*)$", line)
        if entry:
            names = [n.strip() for n in entry.group(1).split(",")]
            for n in names:
                docs[n] = entry.group(2)
            name = names
        elif name and line.startswith("        "):
            for n in name:
                docs[n] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break  # the next section
    return {k: re.sub(r"(?::\w+:)?`+~?([^`]*)`+", r"\1", v) for k, v in docs.items()}


def _optional(hint: Any) -> Any:
    """``X`` for ``X | None``, else the hint itself."""
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def csv_floats(text: str) -> tuple[float, ...]:
    """argparse type for ``0.5,0.5``."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def add_fields(
    group: Any, cls: type, *, skip: tuple[str, ...] = (), required: tuple[str, ...] = (), repeat: tuple[str, ...] = (),
    see: type | None = None,
) -> None:
    """Add ``--field-name`` for every field of ``cls`` except ``skip``.

    Args:
        group: A parser or argument group.
        cls: The config dataclass.
        skip: Fields without a flag (set elsewhere, or not settable from the command line).
        required: Fields whose flag must be given.
        repeat: Fields whose flag may be given several times (a tuple of values).
        see: The class that entries reading "See <class>[.field]." refer to; its entry is used.
    """
    hints, docs = get_type_hints(cls), field_docs(cls)
    if see is not None:
        other = field_docs(see)
        for name, text in docs.items():
            ref = re.fullmatch(rf"See {see.__name__}(?:\.(\w+))?\.?", text.strip())
            if ref:
                docs[name] = other[ref.group(1) or name]
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        hint = _optional(hints[f.name])
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "dest": f.name}
        help_text = docs.get(f.name, "")
        if f.default is not dataclasses.MISSING and f.default is not None and hint is not bool:
            help_text += f" (default: {f.default})"
        if f.name in repeat:
            kwargs.update(action="append", required=f.name in required)
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
            kwargs["type"] = csv_floats
        elif hint in (int, float, str):
            kwargs["type"] = hint
        else:
            raise TypeError(f"no flag type for {cls.__name__}.{f.name}: {hints[f.name]}")
        if f.name in required and f.name not in repeat:
            kwargs["required"] = True
        group.add_argument("--" + f.name.replace("_", "-"), help=help_text.replace("%", "%%"), **kwargs)


def given(args: argparse.Namespace, cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of ``cls`` that the command line set (others stay the dataclass's or the recipe's)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.name not in skip and hasattr(args, f.name)}

