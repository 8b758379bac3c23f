"""The workplace tools' argument types and the checks that turn a value into its stored form.

A bad value raises :class:`~textgym.error.ToolError`, which the env returns as the tool message.
"""

from __future__ import annotations

from typing import Annotated

from textgym.envs.workplace import schema as S
from textgym.error import ToolError
from textgym.tools import EMAIL_PATTERN, Param

Email = Annotated[str, Param(format="email")]
Day = Annotated[str, Param(format="date", description="A date as YYYY-MM-DD.")]
Moment = Annotated[str, Param(format="date-time", description="A date-time as YYYY-MM-DD HH:MM:SS.")]
Page = Annotated[int, Param(minimum=1, maximum=1_000_000, description="Page number of results to return, from 1.")]
PageSize = Annotated[int, Param(minimum=1, maximum=100, description="Number of results per page (at most 100).")]
Minutes = Annotated[int, Param(minimum=1, maximum=1440, description="Duration in minutes.")]


def canonical_datetime(value: str) -> str:
    try:
        return S.parse_datetime(value.strip())
    except ValueError:
        raise ToolError(f"expected a date-time as YYYY-MM-DD HH:MM:SS, got {value!r}") from None


def canonical_date(value: str) -> str:
    try:
        return S.parse_date(value.strip())
    except ValueError:
        raise ToolError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def check_email(value: str) -> str:
    if not EMAIL_PATTERN.match(value.strip()):
        raise ToolError(f"expected an email address, got {value!r}")
    return value.strip()


def one_of(options: tuple[str, ...]):
    def check(value: str) -> str:
        if value not in options:
            raise ToolError(f"expected one of {list(options)}, got {value!r}")
        return value

    return check


def whole_minutes(value: str) -> int:
    try:
        minutes = float(value)
    except ValueError:
        raise ToolError(f"duration must be a number of minutes, got {value!r}") from None
    if not minutes.is_integer() or not 1 <= minutes <= 1440:
        raise ToolError(f"duration must be a whole number of minutes from 1 to 1440, got {value!r}")
    return int(minutes)


def nonempty_text(value: str) -> str:
    if not value.strip():
        raise ToolError("the new value must not be empty")
    return value


def like_pattern(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def date_bounds(lo: str | None, hi: str | None) -> tuple[str | None, str | None]:
    """A date range's bounds as YYYY-MM-DD, an omitted (or empty) bound None."""
    return canonical_date(lo) if lo else None, canonical_date(hi) if hi else None


def normalise_id(value: str) -> str:
    value = value.strip()
    return value.zfill(8) if value.isdigit() else value
