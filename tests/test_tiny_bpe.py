"""The tiny model's BPE vocabulary: fewer tokens per move, digits kept apart, lossless, and read
back the same by transformers' AutoTokenizer from a model directory."""

import json

import pytest

pytest.importorskip("transformers")

from textgym import tiny_bpe
from textgym.tokenizer import tiny_tokenizer

MOVE = '<tool_call>{"name": "place", "arguments": {"row": 2, "col": 1, "digit": 4}}</tool_call><|im_end|>'
FEEDBACK = (
    '<|im_start|>user\n<tool_response>\n{"error": "4 at row 3, col 2 conflicts with the 4 at row 3, col 3 (same row)"}\n'
    "</tool_response><|im_end|>\n<|im_start|>user\nBoard (2 empty cells left):\n4132\n2314\n3.41\n142.<|im_end|>\n"
)


def test_a_move_takes_fewer_tokens_and_every_digit_is_its_own_token():
    bpe, byte = tiny_tokenizer("bpe"), tiny_tokenizer("bytes")
    ids = bpe.encode(MOVE)
    assert len(ids) <= 30 < len(byte.encode(MOVE)) == 67
    pieces = [bpe.decode([i]) for i in ids]
    assert [p for p in pieces if any(ch.isdigit() for ch in p)] == ["2", "1", "4"]
    assert len(bpe.encode(FEEDBACK)) * 2 < len(byte.encode(FEEDBACK))


def test_it_keeps_the_byte_tokenizers_special_tokens_and_decodes_what_it_encodes():
    bpe, byte = tiny_tokenizer("bpe"), tiny_tokenizer("bytes")
    assert bpe.eos_token == byte.eos_token == "<|im_end|>" and bpe.pad_token == byte.pad_token
    assert bpe.chat_template == byte.chat_template
    for text in (MOVE, FEEDBACK, "def f(x):\n    return x * 2  # ünïcode ✓\n", '{"name": "crm_search", "arguments": {}}'):
        assert bpe.decode(bpe.encode(text)) == text


def test_a_created_model_directory_reads_back_the_same_ids(tmp_path):
    from transformers import AutoTokenizer

    from textgym.algos.models import tiny

    path = tiny.create(
        tmp_path / "m",
        seed=0,
        size=tiny.TinySize(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1),
        vocab="bpe",
    )
    loaded = AutoTokenizer.from_pretrained(path)
    assert loaded.encode(FEEDBACK + MOVE) == tiny_tokenizer("bpe").encode(FEEDBACK + MOVE)
    config = json.loads((path / "config.json").read_text())
    assert config["vocab_size"] == len(loaded) == len(tiny_bpe.load().get_vocab())
    # The stamp names the vocabulary, so a byte model is never reused for a BPE run or back.
    assert tiny.resolve("tiny", tmp_path / "run", vocab="bpe") != tiny.resolve("tiny", tmp_path / "run2")
    assert json.loads((tmp_path / "run" / "tiny-init" / "textgym_tiny.json").read_text())["vocab"] == "bpe"


def test_an_unknown_vocabulary_and_a_vocabulary_for_another_model_are_refused():
    from textgym.algos.config import TrainConfig

    with pytest.raises(ValueError, match="vocab must be one of bytes, bpe"):
        tiny_tokenizer("words")
    with pytest.raises(ValueError, match="tiny_vocab is for model='tiny'"):
        TrainConfig(env="textgym/Sudoku-v0", model="smollm2-135m", tiny_vocab="bpe")


@pytest.mark.slow
def test_training_again_on_the_envs_text_gives_the_shipped_vocabulary():
    assert json.loads(tiny_bpe.train(tiny_bpe.corpus()).to_str()) == json.loads(tiny_bpe.VOCAB_FILE.read_text())
