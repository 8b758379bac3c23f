"""Chat templates we ship, rendered from a message on in plain Python instead of Jinja.

:class:`~textgym.wrappers.TokenObservation` renders, at every step, the loop bodies of the last
messages and the footer (:mod:`~textgym._chat_templates.tail`). Through Jinja that is a context, a
loop and a generator per step: on Workplace-v0 the largest part of the wrapper's cost per step
(see docs/benchmarks.md), though for the tiny preset's template each body is a few string concatenations.

A template's tail is rendered here only when the template's source is *exactly* one of the texts
in :data:`KNOWN` (any other text, even one character apart, keeps the Jinja path), and only for
messages inside the domain the function below was written for: plain dicts whose ``role`` and
``content`` are strs and without ``tool_calls``. Anything else is answered by the Jinja tail.
Equality with Jinja and with ``apply_chat_template`` is what ``tests/chat_templates/test_known.py``
checks, over real Sudoku, Workplace and Code conversations, every start and every prefix, and
fuzzed messages; and every reset compares a tail with ``apply_chat_template``'s rendering before
the wrapper trusts it (``TokenObservation._anchor``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textgym._chat_templates.tail import TailTemplate
from textgym.tokenizer import CHAT_TEMPLATE as TINY_TEMPLATE

# (messages, start, add_generation_prompt) -> [body_start, ..., body_n, footer], or None outside its domain
Bodies = Callable[[list, int, bool], "list[str] | None"]


def _tiny(messages: list, start: int, add_generation_prompt: bool) -> list[str] | None:
    """The tiny preset's template (:data:`textgym.tokenizer.CHAT_TEMPLATE`): ChatML turns, the
    first system message left to the header, consecutive tool results grouped into one user turn.
    Reach 1: a tool result closes its turn unless the next message is a tool result too."""
    last = len(messages) - 1
    out = []
    for i in range(start, last + 1):
        m = messages[i]
        if type(m) is not dict or "tool_calls" in m:
            return None
        role, content = m.get("role"), m.get("content")
        if type(role) is not str or type(content) is not str:
            return None
        if role == "tool":
            previous = _role(messages[i - 1]) if i else ""
            following = _role(messages[i + 1]) if i < last else ""
            if previous is None or following is None:
                return None
            before, after = previous != "tool", following != "tool"
            text = "\n<tool_response>\n" + content + "\n</tool_response>"
            out.append(("<|im_start|>user" if before else "") + text + ("<|im_end|>\n" if after else ""))
        elif role == "system":
            out.append("<|im_start|>system\n" + content + "<|im_end|>\n" if i else "")
        else:  # assistant (without tool calls) and every other role: the same frame
            out.append("<|im_start|>" + role + "\n" + content + "<|im_end|>\n")
    out.append("<|im_start|>assistant\n" if add_generation_prompt else "")
    return out


def _role(message: Any) -> str | None:
    """A neighbour's role where it is a plain dict's str (what ``!= 'tool'`` compares), else None."""
    role = message.get("role") if type(message) is dict else None
    return role if type(role) is str else None


# Exact template source -> (its bodies in Python, its reach)
KNOWN: dict[str, tuple[Bodies, int]] = {TINY_TEMPLATE: (_tiny, 1)}


class KnownTail:
    """A :class:`~textgym._chat_templates.tail.TailTemplate` whose bodies come from a function of
    :data:`KNOWN`; the Jinja tail answers the messages outside that function's domain."""

    def __init__(self, bodies: Bodies, jinja: TailTemplate):
        self.bodies = bodies
        self.jinja = jinja
        self.reach = jinja.reach

    def render(self, messages: list, start: int, *, add_generation_prompt: bool, **context: Any) -> list[str] | None:
        """As :meth:`TailTemplate.render` (``context``, the tools and special tokens, is what the
        Jinja tail needs; a known template's bodies and footer do not read it)."""
        parts = self.bodies(messages, start, add_generation_prompt)
        if parts is None:
            return self.jinja.render(messages, start, add_generation_prompt=add_generation_prompt, **context)
        return parts


def known_tail(source: str, jinja: TailTemplate | None) -> TailTemplate | KnownTail | None:
    """The plain-Python tail of ``source`` where it is exactly a known template (and its Jinja
    tail was proven to have that template's reach), else ``jinja`` itself."""
    known = KNOWN.get(source)
    if known is None or jinja is None or jinja.reach != known[1]:
        return jinja
    return KnownTail(known[0], jinja)
