"""The tiny preset's tokenizer: lossless byte ids, a Qwen-style template, a HF directory."""

import json
from array import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wrappers.chat_fixtures import tokenizer

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "héllo 日本"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "place", "arguments": '{"row": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "look", "arguments": {"all": True}}},
        ],
    },
    {"role": "tool", "content": '{"ok": true}', "tool_call_id": "a", "name": "place"},
    {"role": "tool", "content": "[]", "tool_call_id": "b", "name": "look"},
    {"role": "assistant", "content": "<answer>1</answer>"},
]
TOOLS = [
    {"type": "function", "function": {"name": "place", "description": "Put a digit.", "parameters": {"type": "object", "properties": {}}}}
]


def test_vocabulary_is_bytes_then_chat_tokens():
    tok = tokenizer("tiny")
    assert tok.encode("Az\n", add_special_tokens=False) == [ord("A"), ord("z"), 10]
    assert tok.convert_ids_to_tokens([256, 257, 258, 259]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    assert 256 < len(tok) < 512


@settings(max_examples=50, deadline=None)
@given(st.text())
def test_any_text_round_trips(text):
    tok = tokenizer("tiny")
    assert tok.decode(tok.encode(text, add_special_tokens=False), clean_up_tokenization_spaces=False) == text


def test_template_renders_tools_tool_calls_and_tool_results():
    tok = tokenizer("tiny")
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    system, rest = text.split("<|im_end|>\n", 1)
    assert system.startswith("<|im_start|>system\nYou are terse.\n\n# Tools") and json.dumps(TOOLS[0]) in system
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "place", "arguments": {"row": 1}}\n</tool_call>\n<tool_call>\n{"name": "look", "arguments": {"all": true}}\n</tool_call><|im_end|>\n'
        in rest
    )
    # Consecutive tool results share one user turn, as in Qwen2.5.
    assert '<|im_start|>user\n<tool_response>\n{"ok": true}\n</tool_response>\n<tool_response>\n[]\n</tool_response><|im_end|>\n' in rest
    assert text.endswith("<|im_start|>assistant\n<answer>1</answer><|im_end|>\n<|im_start|>assistant\n")
    without_tools = tok.apply_chat_template(CONVERSATION[:2], tokenize=False)
    assert without_tools == "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhéllo 日本<|im_end|>\n"


def test_template_is_prefix_preserving():
    tok = tokenizer("tiny")
    for n in range(1, len(CONVERSATION)):
        shorter = tok.apply_chat_template(CONVERSATION[:n], tools=TOOLS, tokenize=False)
        longer = tok.apply_chat_template(CONVERSATION[: n + 1], tools=TOOLS, tokenize=False)
        if CONVERSATION[n]["role"] != "tool":  # a tool result closes the previous one's turn
            assert longer.startswith(shorter)


def test_saves_and_loads_as_a_hugging_face_directory(tmp_path):
    from transformers import AutoTokenizer

    tok = tokenizer("tiny")
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert loaded.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True) == text
    assert loaded.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
    assert (loaded.eos_token_id, loaded.pad_token_id, len(loaded)) == (tok.eos_token_id, tok.pad_token_id, len(tok))
    ids = loaded.apply_chat_template(CONVERSATION, tools=TOOLS, add_generation_prompt=True)["input_ids"]
    np.testing.assert_array_equal(ids, tok.encode(text, add_special_tokens=False))


# ----- ByteCodec: the tiny tokenizer's encode/decode without the tokenizers library's per-byte cost -----

_PIECES = [
    "a",
    " ",
    "\n",
    "é",
    "東",
    "🙂",
    "<",
    "|",
    ">",
    "<tool",
    "<|im_end|>",
    "<|im_start|>",
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<think>",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30) | st.text(max_size=60))
def test_byte_codec_encodes_as_the_backend(parts):
    from textgym.tokenizer import ByteCodec

    tok = tokenizer("tiny")
    codec, generic = ByteCodec.of(tok.backend_tokenizer), ByteCodec.of(tok.backend_tokenizer)
    generic._chars = None  # encode_raw's path for a codec whose ids are not the byte values
    for text in ("".join(parts), "".join(parts) * 30):  # short texts go through a list, long ones numpy
        expected = tok.backend_tokenizer.encode(text, add_special_tokens=False).ids
        assert codec.encode(text).tolist() == expected
        for c in (codec, generic):  # the same ids as int32 bytes
            assert np.frombuffer(c.encode_raw(text), np.int32).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 255) | st.integers(256, 269), max_size=40))
def test_byte_codec_decodes_any_ids_as_the_backend(ids):
    # Lone UTF-8 lead and continuation bytes, encoded surrogates, added tokens between them.
    from textgym.tokenizer import ByteCodec

    tok = tokenizer("tiny")
    codec = ByteCodec.of(tok.backend_tokenizer)
    got = codec.decode(np.asarray(ids, np.int32))
    assert got == codec.decode(array("i", ids)) == tok.backend_tokenizer.decode(ids, skip_special_tokens=False)


def test_byte_codec_is_only_for_byte_level_bpe_without_merges(tmp_path):
    from tokenizers import AddedToken

    from textgym.tokenizer import ByteCodec, tiny_tokenizer

    assert ByteCodec.of(tokenizer("tiny").backend_tokenizer) is not None
    tokenizer("tiny").save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    assert ByteCodec.of(AutoTokenizer.from_pretrained(tmp_path).backend_tokenizer) is not None  # saved and loaded
    for kind in ("chatml", "llama3"):  # trained merges
        assert ByteCodec.of(tokenizer(kind).backend_tokenizer) is None
    stripping = tiny_tokenizer()
    stripping.backend_tokenizer.add_tokens([AddedToken("<x>", lstrip=True)])  # eats the space before it
    assert ByteCodec.of(stripping.backend_tokenizer) is None
    assert ByteCodec.of(object()) is None
    codec = ByteCodec.of(tokenizer("tiny").backend_tokenizer)
    assert codec.decode(np.asarray([0, 270], np.int32)) is None  # an id it does not know: ask the backend
    for ids in ([65, -1], [65, -191], [65, 2**40], [-(2**40)]):  # never a byte wrapped around
        assert codec.decode(np.asarray(ids, np.int64)) is None
    assert codec.decode(np.asarray([65, 258], np.uint16)) == "A<|im_end|>" == codec.decode([65, 258])
    assert codec.decode(np.asarray([65.0])) is None and codec.decode(np.asarray([], np.int32)) == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=30))
def test_byte_codec_round_trips_every_text(parts):
    # Why TokenObservation skips its decode-and-compare check for this codec: nothing to catch.
    from textgym.tokenizer import ByteCodec

    codec = ByteCodec.of(tokenizer("tiny").backend_tokenizer)
    text = "".join(parts)
    assert codec.decode(codec.encode(text)) == text
