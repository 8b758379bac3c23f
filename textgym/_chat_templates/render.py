"""The tokenizer work TokenObservation does at every step, as transformers does it, faster.

:class:`TemplateRenderer` renders a chat template as ``apply_chat_template(..., tokenize=False)``
does; :class:`Codec` encodes and decodes as the tokenizer's ``encode``/``decode`` do.

:class:`~textgym.wrappers.TokenObservation` renders the whole conversation at every step, and
most of that work is the same every time: transformers rebuilds the tool schemas out of plain
types (``_plain_template_data``) and the template serialises each of them (``tojson``) on every
call. With Workplace-v0's 27 tools that was ~0.8 ms of a render that the conversation itself
needs ~0.05 ms for. :class:`TemplateRenderer` does what ``apply_chat_template`` does
(pick the template, drop ``None`` values, hand the template plain data, the special tokens and
the reasoning aliases) but prepares a tool list once and remembers each tool's ``tojson`` text.

The rest of a render's cost is per message, paid again at every step: transformers rebuilds each
message out of plain types, and the sandbox answers every ``message.role`` by first trying
``getattr`` on the dict (an ``AttributeError`` caught) and then checking the result. The
renderer prepares each message once (messages never change; the wrapper hands the same objects
back every step) and answers attribute lookups on plain dicts with the item lookup the sandbox
ends up doing anyway.

It uses transformers' own template compiler and helpers, whose names are private: every
:meth:`TemplateRenderer.check` compares a rendering with ``apply_chat_template``'s, and any
difference (or a transformers without those helpers) makes the renderer hand every later call
to ``apply_chat_template`` itself. Exactness never depends on the shortcut.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from textgym._chat_templates.known import KnownTail, known_tail
from textgym._chat_templates.tail import TailTemplate, tail_template
from textgym.messages import all_str
from textgym.tokenizer import ByteCodec

# Names a plain dict answers with getattr (its methods and object's): the sandbox's own path for them.
_DICT_ATTRIBUTES = frozenset(dir(dict))
# A loop's counters and flags: ints and bools, which the sandbox hands out unchecked.
_LOOP_COUNTERS = frozenset({"first", "last", "index", "index0", "revindex", "revindex0", "length", "depth", "depth0"})
_MAX_PREPARED = 4096  # prepared messages kept (one episode's worth many times over)


class TemplateRenderer:
    """Render ``messages`` with a tokenizer's chat template, as ``apply_chat_template`` would.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        chat_template: A template that replaces the tokenizer's own, or None.
    """

    def __init__(self, tokenizer: Any, chat_template: str | None = None):
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.fast = True
        self._tools_in: Any = None  # the tool list last prepared, and what it became
        self._tools_given: Any = None  # the list object it came in
        self._tools_out: Any = None
        self._tool_ids: dict[int, Any] = {}
        self._templates: dict[bool, Any] = {}  # compiled, by "tools given" (may pick another template)
        self._sources: dict[bool, str] = {}
        self._tails: dict[bool, TailTemplate | KnownTail | None] = {}  # their copies rendered from a message on
        self._messages: dict[int, tuple] = {}  # id(message) -> (message, as the template sees it)
        try:
            from transformers.utils import chat_template_utils as ctu

            self._plain = ctu._plain_template_data
            self._alias = ctu._alias_reasoning_fields
            self._reasoning = frozenset(ctu._REASONING_FIELDS)  # the fields it copies between
            self._compile = ctu._compile_jinja_template
            self._kwargs = self._plain(dict(tokenizer.special_tokens_map))
        except (ImportError, AttributeError):
            self.fast = False

    def render(self, messages: Sequence[Mapping[str, Any]], tools: list | None, generation_prompt: bool) -> str:
        """The template's text for plain message dicts (``thaw``-ed) and a tool list.

        A message dict is prepared for the template the first time it is seen, and so is a tool
        list: neither must be changed after it was rendered (pass a new one instead).
        """
        if not self.fast:
            return self._reference(messages, tools, generation_prompt)
        chat = [self._prepared_message(m) for m in messages]
        return self._template(tools is not None).render(
            messages=chat,
            tools=self._prepared(tools),
            documents=None,
            add_generation_prompt=generation_prompt,
            **self._kwargs,
        )

    def reach(self, with_tools: bool) -> int | None:
        """How many messages after its own a message's rendering may depend on, where the template
        renders from a message on (:mod:`~textgym._chat_templates.tail`); None where it cannot."""
        if not self.fast:
            return None
        if with_tools not in self._tails:
            template = self._template(with_tools)
            source = self._sources[with_tools]
            self._tails[with_tools] = known_tail(source, tail_template(template.environment, source))
        tail = self._tails[with_tools]
        return None if tail is None else tail.reach

    def prepare(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` as the template sees them, for :meth:`tail`. Not remembered, as :meth:`render`
        remembers them: the caller keeps the prepared list and prepares each message once."""
        return [self._template_message(m) for m in messages]

    def tail(self, chat: list[dict[str, Any]], start: int, tools: list | None, generation_prompt: bool) -> list[str] | None:
        """The rendering of the :meth:`prepare`-d messages ``chat`` without the header and the
        messages before ``start``, as one text per message from ``start`` on and the footer's
        (joined: the end of :meth:`render`'s text), where :meth:`reach` is not None; None where a
        message holds the marker that splits them (:class:`~textgym._chat_templates.tail.TailTemplate`).
        The caller keeps ``chat`` from step to step and extends it (preparing a whole
        conversation at every step was a sixth of the wrapper's time)."""
        return self._tails[tools is not None].render(
            chat, start, tools=self._prepared(tools), documents=None, add_generation_prompt=generation_prompt, **self._kwargs
        )

    def drop_tail(self) -> None:
        """Render whole conversations from now on (a tail that did not end the whole rendering)."""
        self._tails = {True: None, False: None}

    def check(self, messages: Sequence[Mapping[str, Any]], tools: list | None, generation_prompt: bool) -> str:
        """Render with ``apply_chat_template`` and, while the shortcut is on, compare: a difference
        turns the shortcut off for good. Returns the reference text."""
        reference = self._reference(messages, tools, generation_prompt)
        if self.fast:
            try:
                same = self.render(messages, tools, generation_prompt) == reference
            except Exception:  # any failure of the shortcut means: use the reference
                same = False
            self.fast = same
        return reference

    def _reference(self, messages, tools, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=tools,
            chat_template=self.chat_template,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )

    def _prepared_message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """``message`` as ``apply_chat_template`` hands it to the template (no None values, plain
        types, reasoning aliases), made once per message object."""
        hit = self._messages.get(id(message))
        if hit is None or hit[0] is not message:
            if len(self._messages) >= _MAX_PREPARED:
                self._messages.clear()
            hit = self._messages[id(message)] = (message, self._template_message(message))  # held, so no id is reused while cached
        return hit[1]

    def _template_message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        # A dict of exact strs (so no None) without a reasoning field is what the helpers
        # return for it: the same dict serves (templates render in a sandbox that changes nothing).
        if type(message) is dict and self._as_is(message):
            return message
        plain = {k: v for k, v in message.items() if v is not None}
        return plain if self._as_is(plain) else self._alias(self._plain([plain]))[0]

    def _as_is(self, message: Mapping[str, Any]) -> bool:
        """Exact str keys and values and no reasoning field: the template takes it unchanged."""
        return all_str(message) and all_str(message.values()) and self._reasoning.isdisjoint(message)

    def _prepared(self, tools: list | None) -> list | None:
        """The tool list as the template sees it, rebuilt only when other tool objects come in."""
        if tools is None:
            return None
        if tools is self._tools_given:  # the same list as last time (the wrapper's, every step)
            return self._tools_out
        self._tools_given = tools
        known = self._tools_in
        if not (known is not None and len(tools) == len(known) and all(map(operator.is_, tools, known))):
            self._tools_in, self._tools_out = list(tools), self._plain(list(tools))
            self._tool_ids = {id(t): t for t in self._tools_out}  # held, so no id is reused while cached
            for template in self._templates.values():
                template.environment.filters["tojson"].memo_clear()
        return self._tools_out

    def _template(self, with_tools: bool) -> Any:
        """The compiled template, with a ``tojson`` that remembers its text for the prepared tools.

        The template is the one ``apply_chat_template`` picks (a tokenizer may keep a separate
        ``tool_use`` template). Its environment is an overlay of transformers' own, so every filter,
        global and extension is theirs; only ``tojson`` of one of our prepared tool dicts (which
        nothing changes) is looked up instead of serialised again.
        """
        if with_tools not in self._templates:
            source = self.tokenizer.get_chat_template(self.chat_template, [] if with_tools else None)
            base = self._compile(source).environment
            env = base.overlay()
            env.filters = dict(base.filters)  # an overlay shares the dict: transformers' own stays as it is
            tojson, memo = base.filters["tojson"], {}

            def cached_tojson(x, *args, **kwargs):
                if self._tool_ids.get(id(x)) is not x:
                    return tojson(x, *args, **kwargs)
                key = (id(x), args, tuple(sorted(kwargs.items()))) if args or kwargs else id(x)
                text = memo.get(key)
                if text is None:
                    text = memo[key] = tojson(x, *args, **kwargs)
                return text

            cached_tojson.memo_clear = memo.clear
            env.filters["tojson"] = cached_tojson
            env.getattr = _dict_getattr(env, env.getattr)
            self._templates[with_tools] = env.from_string(source)
            self._sources[with_tools] = source
        return self._templates[with_tools]


def _dict_getattr(env: Any, sandboxed: Any) -> Any:
    """The sandbox's ``getattr`` with its answers for a plain dict's keys and a loop's counters
    given directly.

    For a ``dict`` and a name that is not one of its attributes, the sandbox's ``getattr`` fails,
    then returns ``obj[name]`` or undefined; this does exactly that without the failed lookup.
    ``loop.first``, ``loop.index0``... are public properties whose values (ints, bools) pass every
    check of the sandbox. Everything else (a dict method, any other object or attribute) goes
    through the sandbox's checks.
    """
    from jinja2.runtime import LoopContext

    def getattr_(obj: Any, attribute: str) -> Any:
        kind = type(obj)
        if kind is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                return env.undefined(obj=obj, name=attribute)
        if kind is LoopContext and attribute in _LOOP_COUNTERS:
            return getattr(obj, attribute)
        return sandboxed(obj, attribute)

    return getattr_


class Codec:
    """``tokenizer.encode(text, add_special_tokens=False)`` and ``tokenizer.decode(ids,
    skip_special_tokens=False, clean_up_tokenization_spaces=False)`` on ``int32`` arrays, sent
    straight to a fast tokenizer's ``tokenizers`` backend when that gives the same ids and text,
    and for a byte-level BPE without merges (the tiny preset's) to
    :class:`~textgym.tokenizer.ByteCodec`, which does the same ~100x faster.

    transformers' wrappers around the backend cost about as much again as the backend itself
    (they check every id in Python before decoding). The backend is used only when it holds no
    truncation or padding of its own (transformers would switch those off) and agrees with the
    wrappers on a probe text with special tokens, markup, whitespace and non-ASCII characters,
    and on that text's ids reversed (malformed UTF-8); so is the byte codec.

    Args:
        tokenizer: A Hugging Face tokenizer.
        probe: Extra text to compare on (the template's own rendering, say).
    """

    def __init__(self, tokenizer: Any, probe: str = ""):
        self.tokenizer = tokenizer
        backend = getattr(tokenizer, "_tokenizer", None)
        self.backend = None
        self.bytes: ByteCodec | None = None
        if backend is not None and callable(getattr(backend, "encode", None)) and not getattr(tokenizer, "split_special_tokens", False):
            if getattr(backend, "truncation", None) is None and getattr(backend, "padding", None) is None:
                self.backend = backend
                if not self._agrees(probe):
                    self.backend = None
                self.bytes = ByteCodec.of(backend) if self.backend is not None else None
                if self.bytes is not None and not self._agrees(probe):
                    self.bytes = None

    @property
    def lossless(self) -> bool:
        """Whether every text decodes back from its ids without being checked: so for the byte
        codec, whose ids are the text's UTF-8 bytes and its whole added tokens."""
        return self.bytes is not None

    def encode(self, text: str) -> np.ndarray:
        if self.bytes is not None:
            return self.bytes.encode(text)
        if self.backend is None:
            return np.asarray(self._reference_encode(text), np.int32)
        return np.asarray(self.backend.encode(text, add_special_tokens=False).ids, np.int32)

    def encode_raw(self, text: str) -> bytes:
        """:meth:`encode`'s ids as the bytes of int32s (native order)."""
        return self.bytes.encode_raw(text) if self.bytes is not None else self.encode(text).tobytes()

    def decode(self, ids: np.ndarray | list[int]) -> str:
        if self.bytes is not None:
            text = self.bytes.decode(ids)
            if text is not None:
                return text
        ids = ids if type(ids) is list else np.asarray(ids).tolist()
        if self.backend is None:
            return self._reference_decode(ids)
        return self.backend.decode(ids, skip_special_tokens=False)

    def decode_known(self, ids: np.ndarray) -> str | None:
        """:meth:`decode` where the byte codec knows every id of ``ids``, else None (also for
        other codecs): then each id is one of the byte codec's."""
        return self.bytes.decode(ids) if self.bytes is not None else None

    def _agrees(self, probe: str) -> bool:
        text = probe + " ".join(map(str, getattr(self.tokenizer, "all_special_tokens", []))) + "  a\tb\n\nÉté 東京 🙂 </tool_call>"
        try:
            ids = self._reference_encode(text)
            same = self.encode(text).tolist() == ids
            return same and all(self.decode(np.asarray(x, np.int32)) == self._reference_decode(x) for x in (ids, ids[::-1]))
        except Exception:  # a backend that fails is a backend not used
            return False

    def _reference_encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _reference_decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
