"""Turning rollout records into the one self-contained HTML page of ``textgym view``.

The page is ``page.html`` with ``view.css`` and ``view.js`` inlined and the episodes embedded as
one JSON document, so it opens from disk and fetches nothing. The JSON is kept compact, since a
training run logs thousands of episodes: message texts that repeat (system prompts, tool lists)
are stored once in ``strings``, token texts once per distinct id in ``vocab``, logprobs only on
policy tokens and rounded to 3 decimals.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from textgym.view.records import RecordError

_ASSETS = "textgym.view"
_LOGPROB_DECIMALS = 3


class _Strings:
    """A table of distinct strings; each text is written once and referred to by index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def ref(self, text: Any) -> int:
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        return self.index.setdefault(text, len(self.index))

    def table(self) -> list[str]:
        return list(self.index)


def page_data(records: Iterable[Mapping[str, Any]], vocab: Mapping[int, str] | None, title: str) -> dict[str, Any]:
    """The JSON document the page renders: ``{"title", "strings", "vocab", "episodes"}``."""
    strings = _Strings()
    episodes = [_episode(i, r, strings) for i, r in enumerate(records)]
    return {"title": title, "strings": strings.table(), "vocab": dict(vocab) if vocab else None, "episodes": episodes}


def _episode(index: int, r: Mapping[str, Any], strings: _Strings) -> dict[str, Any]:
    messages = r.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise RecordError(f"{r.get('_source', 'a record')}: 'messages' must be a list of message objects")
    return {
        "i": index,
        "env": r.get("env_id"),
        "policy": r.get("policy"),
        "step": r.get("step"),
        "task": r.get("task_id"),
        "seed": r.get("seed"),
        "group": r.get("group"),
        "reward": r.get("reward"),
        "success": r.get("success"),
        "end": r.get("end_reason"),
        "turns": r.get("turns"),
        "truncated": r.get("truncated"),
        "advantage": r.get("advantage"),
        "turn_rewards": r.get("turn_rewards"),
        "turn_advantages": r.get("turn_advantages"),
        "turn_states": r.get("turn_state_keys"),
        "source": r.get("_source"),
        "messages": [_message(m, strings) for m in messages],
        "verifications": r.get("verifications"),
        "tokens": _tokens(r),
    }


def _message(m: Mapping[str, Any], strings: _Strings) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.get("role"), "c": strings.ref(m.get("content", ""))}
    for key in ("tool_calls", "tool_call_id", "name"):
        if m.get(key):
            out[key] = m[key]
    return out


def _tokens(r: Mapping[str, Any]) -> dict[str, Any] | None:
    """Ids, the policy spans (the loss mask as ``[start, end)`` runs) and their logprobs (None
    where one is not a finite number)."""
    ids, mask = r.get("token_ids"), r.get("loss_mask")
    if not ids or mask is None:
        return None
    where = r.get("_source", "a record")
    if not isinstance(ids, list) or not all(type(t) is int for t in ids):
        raise RecordError(f"{where}: 'token_ids' must be a list of integers")
    if not isinstance(mask, list) or not all(m in (0, 1) and type(m) in (int, bool) for m in mask):
        raise RecordError(f"{where}: 'loss_mask' must be a list of 0s and 1s")
    spans, start = [], None
    for t, m in enumerate([*mask, 0]):
        if m and start is None:
            start = t
        elif not m and start is not None:
            spans.append([start, t])
            start = None
    logprobs = r.get("logprobs")
    policy_lps = None
    if logprobs:
        end = spans[-1][1] if spans else 0
        if not isinstance(logprobs, list) or len(logprobs) < end:
            raise RecordError(f"{where}: 'logprobs' must be a list covering the loss mask's {end} tokens")
        policy_lps = [_logprob(logprobs[t]) for a, b in spans for t in range(a, b)]
    return {"ids": list(ids), "spans": spans, "logprobs": policy_lps}


def _logprob(value: Any) -> float | None:
    number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    return round(number, _LOGPROB_DECIMALS) if math.isfinite(number) else None


def decode_vocab(tokenizer: Any, records: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Each distinct token id of ``records`` decoded on its own (what the token view shows)."""
    ids = sorted({int(t) for r in records for t in r.get("token_ids") or ()})
    return {i: tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids}


def render(data: Mapping[str, Any]) -> str:
    """The HTML page for ``data`` (see :func:`page_data`), with every asset inlined.

    Each placeholder is filled in one pass, so no inserted text (a path naming a placeholder)
    is ever filled again; lone surrogates (a record's ``"\\ud800"``, a file name's stray byte)
    become U+FFFD, which UTF-8 can write.
    """
    files = resources.files(_ASSETS)
    page = (files / "page.html").read_text(encoding="utf-8")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # No record text may close the <script> element: "<" only occurs inside JSON strings.
    payload = payload.replace("<", "\\u003c")
    parts = {
        "/*VIEW_CSS*/": (files / "view.css").read_text(encoding="utf-8"),
        "/*VIEW_JS*/": (files / "view.js").read_text(encoding="utf-8"),
        "__VIEW_TITLE__": _escape(str(data.get("title", "textgym view"))),
        "/*VIEW_DATA*/": payload,
    }
    html = _PLACEHOLDERS.sub(lambda m: parts[m.group(0)], page)
    return _SURROGATES.sub("\ufffd", html)


_PLACEHOLDERS = re.compile("|".join(re.escape(p) for p in ("/*VIEW_CSS*/", "/*VIEW_JS*/", "__VIEW_TITLE__", "/*VIEW_DATA*/")))
_SURROGATES = re.compile("[\ud800-\udfff]")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
