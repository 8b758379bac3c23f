"""The built-in tokenizer of the ``tiny`` preset: byte-level, offline, with a Qwen-style chat template.

Every id below 256 is the byte of the same value, so any text (and any byte string a policy
samples) has a lossless tokenization and ``tokenize(a + b) == tokenize(a) + tokenize(b)`` away
from the added tokens. On top of the bytes sit the ChatML control tokens and a few markup tokens
the envs use (``<tool_call>``, ``<answer>``, ...), which keeps turns short. There are no merges:
the vocabulary is small enough for a tiny random model, and nothing is trained or downloaded.

The chat template follows Qwen2.5: tools are listed in the system turn, assistant tool calls are
rendered as ``<tool_call>`` JSON, consecutive tool results are grouped into one ``user`` turn of
``<tool_response>`` blocks, and ``add_generation_prompt`` opens an assistant turn. It renders
every past turn verbatim, so it is prefix-preserving (see :mod:`textgym.wrappers.token_observation`).

:class:`ByteCodec` encodes and decodes for such a tokenizer as its ``tokenizers`` backend does,
~100x faster (the tokenizer work of every TokenObservation step).

transformers and tokenizers are imported only when a tokenizer is built (the ``tokens`` extra).
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from textgym.error import require

EOS_TOKEN = "<|im_end|>"
_SHORT = 512  # characters: ByteCodec encodes a text up to this long through a Python list
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", EOS_TOKEN, "<|pad|>")
# Markup the envs and the template use; added (not special) so decoding keeps them as text.
MARKUP_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
    "<answer>",
    "</answer>",
    "<think>",
    "</think>",
)

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- if not loop.first %}{{- '<|im_start|>system\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' }}"
    "{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

COMPACT_CHAT_TEMPLATE = CHAT_TEMPLATE[CHAT_TEMPLATE.index("{%- for message in messages %}") :]
"""The template without its system turn and tool list (the ``tiny`` model's ``compact`` choice):
a tiny model learns from demonstrations, not from reading rules. Later turns render as in the full one."""


def byte_alphabet() -> list[str]:
    """The 256 printable stand-ins of byte-level BPE, listed in byte order (id == byte value)."""
    # GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the rest are
    # shifted past U+0100 in byte order; the tokenizers ByteLevel pre-tokenizer uses the same map.
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) | set(range(ord("®"), 256))
    chars, shift = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + shift))
            shift += 1
    return chars


TINY_VOCABS = ("bytes", "bpe")
TINY_BPE_FILE = Path(__file__).with_name("tiny_bpe.json")
"""The ``bpe`` vocabulary, trained by :mod:`textgym.tiny_bpe` (``python -m textgym.tiny_bpe``)."""


def tiny_tokenizer(vocab: str = "bytes") -> Any:
    """Build the ``tiny`` preset's tokenizer (a ``transformers.PreTrainedTokenizerFast``).

    Returns the same vocabulary in every process. ``vocab="bytes"``: ids 0-255 are bytes, then
    ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` (eos), ``<|pad|>`` (pad) and the markup
    tokens. ``vocab="bpe"``: the byte-level BPE of :mod:`textgym.tiny_bpe`, trained on the envs'
    own text (a Sudoku ``place`` call in 30 tokens instead of 67), with the same special and
    markup tokens. ``save_pretrained(dir)`` writes a directory that
    ``AutoTokenizer.from_pretrained(dir)`` reads.

    Raises:
        MissingDependency: transformers/tokenizers are not installed (``pip install 'textgym[tokens]'``).

    Example:
        >>> tok = tiny_tokenizer()
        >>> text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
        ...                                add_generation_prompt=True)
        >>> text
        '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
        >>> tok.decode(tok.encode(text)) == text
        True
    """
    tokenizers = require("tokenizers", "tokens")
    transformers = require("transformers", "tokens")

    if vocab == "bpe":
        backend = tokenizers.Tokenizer.from_file(str(TINY_BPE_FILE))
    elif vocab == "bytes":
        byte_ids = {ch: i for i, ch in enumerate(byte_alphabet())}
        backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=byte_ids, merges=[]))
        # No regex split: without merges it would change nothing but cost time.
        backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        backend.decoder = tokenizers.decoders.ByteLevel()
        backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
        backend.add_tokens([tokenizers.AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    else:
        raise ValueError(f"vocab must be one of {', '.join(TINY_VOCABS)}, got {vocab!r}")
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS_TOKEN,
        pad_token="<|pad|>",
        unk_token=None,
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1 << 20,
        clean_up_tokenization_spaces=False,
    )


class ByteCodec:
    """Encode and decode exactly as a byte-level BPE without merges (the tiny preset's) does, faster.

    Such a tokenizer's ids are the UTF-8 bytes of the text between its added tokens, each mapped
    to its byte token, and decoding is the inverse followed by UTF-8 decoding with U+FFFD for
    malformed bytes. The ``tokenizers`` library does this one Python-visible call per text but
    ~0.5 us per byte (it tracks offsets for every character), so a Workplace tool schema list
    (18 KiB) took ~10 ms to encode and a KiB tool result ~0.5 ms. Here it is one
    regex split and a table lookup in numpy.

    :meth:`of` builds one only for a backend whose serialisation says exactly that: no normalizer,
    a ``ByteLevel`` pre-tokenizer without a prefix space, a BPE model with no merges, no dropout,
    no byte fallback and a vocabulary of the 256 byte tokens, a ``ByteLevel`` decoder, and added
    tokens with ASCII text that match as they are (no ``lstrip``/``rstrip``/``single_word``, not
    normalized). Anything else (every tokenizer with merges) returns None.
    """

    def __init__(self, byte_ids: dict[int, int], added: dict[str, int]):
        size = max([*byte_ids.values(), *added.values()]) + 1
        self.size = size  # one past the largest id it knows
        self._to_id = np.zeros(256, np.int32)  # byte value -> id
        for byte, i in byte_ids.items():
            self._to_id[byte] = i
        self._identity = all(byte == i for byte, i in byte_ids.items())
        self._added = added
        # encode_raw's path where ids are the byte values, every added id is a character UTF-32
        # writes (no surrogate) and int32s are little-endian: an added token's id as a character.
        fits = self._identity and sys.byteorder == "little" and all(i < 0xD800 for i in added.values())
        self._chars = {text: chr(i) for text, i in added.items()} if fits else None
        # id -> its bytes: a byte token's byte, an added token's text (ASCII: its byte tokens' bytes too)
        self._bytes_of = {i: bytes([byte]) for byte, i in byte_ids.items()} | {i: text.encode() for text, i in added.items()}
        # Leftmost-longest, as tokenizers' Aho-Corasick matcher: at each position the longest first.
        alternatives = sorted(added, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, alternatives)) + ")").split if added else None

    @classmethod
    def of(cls, backend: Any) -> ByteCodec | None:
        """The codec of a ``tokenizers.Tokenizer``, or None unless it is a byte-level BPE without merges."""
        try:
            spec = json.loads(backend.to_str())
        except Exception:  # a backend that does not serialise is not one we can read
            return None
        model, pre, decoder = spec.get("model") or {}, spec.get("pre_tokenizer") or {}, spec.get("decoder") or {}
        alphabet = {ch: b for b, ch in enumerate(byte_alphabet())}
        vocab = model.get("vocab") or {}
        if not (
            spec.get("normalizer") is None
            and pre.get("type") == "ByteLevel"
            and not pre.get("add_prefix_space")
            and decoder.get("type") == "ByteLevel"
            and model.get("type") == "BPE"
            and not model.get("merges")
            and model.get("dropout") is None
            and not model.get("byte_fallback")
            and not model.get("continuing_subword_prefix")
            and not model.get("end_of_word_suffix")
            and set(vocab) == set(alphabet)
        ):
            return None
        added = {}
        for token in spec.get("added_tokens") or ():
            text = token["content"]
            if token["lstrip"] or token["rstrip"] or token["single_word"] or token["normalized"]:
                return None
            if not text or not text.isascii() or text in added or int(token["id"]) in vocab.values():
                return None
            added[text] = int(token["id"])
        return cls({alphabet[ch]: int(i) for ch, i in vocab.items()}, added)

    def encode(self, text: str) -> np.ndarray:
        """The ids of ``text`` (an ``int32`` array), as ``backend.encode(text, add_special_tokens=False).ids``."""
        if self._split is None:
            return self._bytes_to_ids(text.encode())
        parts = self._split(text)  # text, token, text, token, ..., text
        if len(parts) == 1:
            return self._bytes_to_ids(text.encode())
        if self._identity and len(text) <= _SHORT:
            # A short text (an env turn) as one list: fewer distinct numpy calls, which cost more
            # than the per-byte work here between env steps that evict the caches.
            listed = list(parts[0].encode())
            for k in range(1, len(parts), 2):
                listed.append(self._added[parts[k]])
                listed += parts[k + 1].encode()
            return np.array(listed, np.int32)
        raw = [part.encode() for part in parts[0::2]]
        # One placeholder byte per added token, then its id written over the placeholder's (one
        # at a time: a handful, and numpy's list indexing costs more than the loop).
        ids = self._bytes_to_ids(b"\0".join(raw))
        at = -1
        for r, token in zip(raw, parts[1::2]):
            at += len(r) + 1
            ids[at] = self._added[token]
        return ids

    def encode_raw(self, text: str) -> bytes:
        """:meth:`encode`'s ids as the bytes of int32s (native order), for a context kept as bytes."""
        if self._chars is None:
            return self.encode(text).tobytes()
        # Each id as one character (a byte as the Latin-1 character of its value, an added token
        # as chr(id)), written out as UTF-32: the int32 ids, all in C and without numpy, which
        # costs more between env steps that evict the caches.
        parts = self._split(text) if self._split is not None else [text]  # text, token, ..., text
        parts[0::2] = [part.encode().decode("latin-1") for part in parts[0::2]]
        parts[1::2] = [self._chars[token] for token in parts[1::2]]
        return "".join(parts).encode("utf-32-le")

    def decode(self, ids: np.ndarray | list[int] | array) -> str | None:
        """The text of ``ids`` (an int array, a list of ints or an ``array("i")``), as
        ``backend.decode(ids, skip_special_tokens=False)``; None for an id this codec does not know
        (the caller asks the backend), so also for any id outside the vocabulary."""
        if type(ids) is not array:
            ids = ids if type(ids) is np.ndarray else np.asarray(ids)
            if ids.size and ids.dtype.kind not in "iu":
                return None
            ids = ids.tolist()
        try:
            # One lookup per id: fewer distinct numpy calls than a vectorised path, which matters
            # more than per-id speed between env steps that evict the caches. An added
            # token's bytes are its ASCII text: decoding the whole byte string at once is then the
            # same as tokenizers' decoding of the bytes between added tokens one by one.
            raw = b"".join(map(self._bytes_of.__getitem__, ids))
        except KeyError:  # not an id of this codec
            return None
        return raw.decode("utf-8", "replace")

    def _bytes_to_ids(self, raw: bytes) -> np.ndarray:
        values = np.frombuffer(raw, np.uint8)
        return values.astype(np.int32) if self._identity else self._to_id[values]
