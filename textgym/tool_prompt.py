"""Tools for every local model: the Hermes tool prompt, for chat templates that drop ``tools=``.

Many chat templates (SmolLM2's among them) render only ``message.content``: a model prompted
through them is never told which tools exist, and the oracle's demonstrated tool calls vanish
from its turns. :func:`probe` finds out what a template does by rendering small conversations
(never by a model name); :class:`ToolPrompt` then rewrites the messages before the template sees
them, in one format, the Hermes / Qwen2.5 one that textgym's own template and parser use:

* the tool schemas go to the end of the system message (one is added when the conversation has
  none), after the system text and a blank line::

      # Tools

      You may call one or more functions to assist with the user query.

      You are provided with function signatures within <tools></tools> XML tags:
      <tools>
      {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}
      </tools>

      For each function call, return a json object with function name and arguments within
      <tool_call></tool_call> XML tags:
      <tool_call>
      {"name": <function-name>, "arguments": <args-json-object>}
      </tool_call>

  (the last paragraph is one line in the prompt);
* an assistant message's structured ``tool_calls`` become ``<tool_call>`` blocks in its text,
  which is exactly what :func:`textgym.parsing.parse_turn` reads back from a sampled turn.

Templates that render tools (or tool calls) keep doing so; a template that drops the system
turn as well (the tiny preset's ``compact`` one, by design) is left alone, since no message
could carry the tools through it. The rewrite is a pure function of the messages, so a
prefix-preserving template stays prefix-preserving.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

_PROBE_TOOL = "textgym_probe_tool"
_PROBE_SYSTEM = "TextGym-System-Probe"
_WARNED: set[str] = set()  # templates already warned about (once per process)


def tools_block(tools: Sequence[Mapping[str, Any]]) -> str:
    """The ``# Tools`` section listing ``tools`` (OpenAI schemas), one JSON object a line."""
    return HEADER + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + FOOTER


def tool_call_text(call: Mapping[str, Any]) -> str:
    """One OpenAI tool call (``{"function": {"name", "arguments"}}``) as a ``<tool_call>`` block."""
    fn = call.get("function", call)
    arguments = fn.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return '<tool_call>\n{"name": ' + json.dumps(fn["name"], ensure_ascii=False) + ', "arguments": ' + arguments + "}\n</tool_call>"


@dataclass(frozen=True)
class ToolPrompt:
    """What to write into the messages for one chat template (see :func:`probe`).

    Attributes:
        inline_tools: Put the tool schemas into the system message (the template drops ``tools=``
            but renders a system message).
        inline_calls: Write assistant ``tool_calls`` into the message text (the template drops them).
        template: Who the template belongs to, for the warning.
    """

    inline_tools: bool = False
    inline_calls: bool = False
    template: str = ""  # names the template in the one warning

    def apply(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """``(messages, tools)`` to render: plain dicts, rewritten where the template needs it.

        A message that is a ``dict`` already and needs no rewrite is passed on as it is (never
        changed here: a rewrite makes a new dict).
        """
        out = [m if type(m) is dict else dict(m) for m in messages]
        if self.inline_calls:
            out = [_calls_as_text(m) if m.get("role") == "assistant" and m.get("tool_calls") else m for m in out]
        if not (self.inline_tools and tools):
            return out, (list(tools) if tools else None)
        _warn_once(self.template)
        block = tools_block(tools)
        if out and out[0].get("role") == "system":
            out[0] = dict(out[0], content=f"{out[0].get('content') or ''}\n\n{block}")
        else:
            out.insert(0, {"role": "system", "content": block})
        return out, None


def _calls_as_text(message: dict[str, Any]) -> dict[str, Any]:
    blocks = [tool_call_text(c) for c in message["tool_calls"]]
    content = message.get("content") or ""
    text = "\n".join(([content] if content else []) + blocks)
    return {k: v for k, v in message.items() if k != "tool_calls"} | {"content": text}


def probe(tokenizer: Any, chat_template: str | None = None) -> ToolPrompt:
    """Render three small conversations to learn whether the template shows tools and tool calls.

    A template that raises on ``tools=`` or on a tool call counts as dropping it. The first
    :meth:`ToolPrompt.apply` that writes tool schemas for a template warns (``UserWarning``, once
    per template and process).
    """
    from jinja2.exceptions import TemplateError as JinjaError

    def shows(marker: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> bool:
        try:
            text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=chat_template, tokenize=False)
        except (JinjaError, TypeError, KeyError, ValueError):
            return False
        return marker in text

    user = {"role": "user", "content": "Hi."}
    schema = {
        "type": "function",
        "function": {"name": _PROBE_TOOL, "description": "probe", "parameters": {"type": "object", "properties": {}}},
    }
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c0", "type": "function", "function": {"name": _PROBE_TOOL, "arguments": "{}"}}],
    }
    renders_system = shows(_PROBE_SYSTEM, [{"role": "system", "content": _PROBE_SYSTEM}, user])
    template = chat_template if chat_template is not None else str(tokenizer.chat_template)
    owner = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return ToolPrompt(
        inline_tools=renders_system and not shows(_PROBE_TOOL, [user], [schema]),
        inline_calls=not shows(_PROBE_TOOL, [user, call]),
        template=f"{owner} ({hashlib.sha256(template.encode()).hexdigest()[:12]})",
    )


def _warn_once(template: str) -> None:
    if template in _WARNED:
        return
    _WARNED.add(template)
    warnings.warn(
        f"the chat template of {template} ignores tools=; textgym writes the tool schemas into the system "
        "message in the Hermes format (a <tools> block of JSON schemas, <tool_call> calls; see textgym.tool_prompt)",
        UserWarning,
        stacklevel=3,
    )
