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

transformers and tokenizers are imported only when a tokenizer is built (the ``tokens`` extra).
"""

from __future__ import annotations

from typing import Any

from textgym.error import require

EOS_TOKEN = "<|im_end|>"
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
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
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


def tiny_tokenizer() -> Any:
    """Build the ``tiny`` preset's tokenizer (a ``transformers.PreTrainedTokenizerFast``).

    Returns the same vocabulary in every process: ids 0-255 are bytes, then
    ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` (eos), ``<|pad|>`` (pad) and the markup tokens.
    ``save_pretrained(dir)`` writes a directory that ``AutoTokenizer.from_pretrained(dir)`` reads.

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

    vocab = {ch: i for i, ch in enumerate(byte_alphabet())}
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    # No regex split: without merges it would change nothing but cost time.
    backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = tokenizers.decoders.ByteLevel()
    backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.add_tokens([tokenizers.AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
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
