"""The faster template rendering and tokenizer calls of TokenObservation equal transformers' own.

:class:`~textgym._chat_templates.render.TemplateRenderer` prepares the tool list once and remembers
each tool's ``tojson`` text; :class:`~textgym._chat_templates.render.Codec` calls a fast tokenizer's
backend directly. Both must give exactly what ``apply_chat_template``, ``encode`` and ``decode``
give, and any disagreement must switch the shortcut off.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wrappers.chat_fixtures import CHATML_TEMPLATE, tokenizer
from textgym._chat_templates.render import Codec, TemplateRenderer
from textgym.messages import thaw

KINDS = ["tiny", "chatml", "llama3", "think"]


def played(env_id, seed=0):
    """The conversations of an oracle episode, one per step, and the env's tool schemas."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    out = [obs]
    while True:
        obs, _, terminated, truncated, _ = env.step(env.unwrapped.oracle_action())
        out.append(obs)
        if terminated or truncated:
            return out, [thaw(t) for t in info["tools"]] or None


def reference(tok, messages, tools, generation_prompt, chat_template=None):
    return tok.apply_chat_template(
        messages, tools=tools, chat_template=chat_template, tokenize=False, add_generation_prompt=generation_prompt
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0"])
def test_renderings_equal_apply_chat_template(kind, env_id):
    tok = tokenizer(kind)
    renderer = TemplateRenderer(tok)
    assert renderer.fast
    for seed in (0, 1):
        conversations, tools = played(env_id, seed)
        for conversation in conversations:
            messages = [thaw(m) for m in conversation]
            for with_tools in (tools, None):
                for prompt in (True, False):
                    assert renderer.render(messages, with_tools, prompt) == reference(tok, messages, with_tools, prompt)
    assert renderer.check(messages, tools, True) == reference(tok, messages, tools, True) and renderer.fast


def test_a_given_template_and_a_new_tool_list_are_followed():
    tok = tokenizer("llama3")
    renderer = TemplateRenderer(tok, chat_template=CHATML_TEMPLATE)
    conversations, tools = played("textgym/Workplace-v0")
    messages = [thaw(m) for m in conversations[-1]]
    assert renderer.render(messages, tools, True) == reference(tok, messages, tools, True, CHATML_TEMPLATE)
    fewer = tools[:3]
    assert renderer.render(messages, fewer, True) == reference(tok, messages, fewer, True, CHATML_TEMPLATE)


def test_a_shortcut_that_disagrees_is_switched_off(monkeypatch):
    tok = tokenizer("chatml")
    renderer = TemplateRenderer(tok)
    messages = [{"role": "user", "content": "hi"}]
    monkeypatch.setattr(renderer, "_kwargs", {"unexpected": 1})  # still renders, maybe differently
    monkeypatch.setattr(renderer, "_prepared_message", lambda message: {"role": "user", "content": "changed"})
    assert renderer.check(messages, None, True) == reference(tok, messages, None, True)
    assert not renderer.fast
    assert renderer.render(messages, None, True) == reference(tok, messages, None, True)


def test_transformers_own_environment_is_left_alone():
    tok = tokenizer("tiny")
    conversations, tools = played("textgym/Workplace-v0")
    messages = [thaw(m) for m in conversations[-1]]
    before = reference(tok, messages, tools, True)
    TemplateRenderer(tok).render(messages, tools, True)
    from transformers.utils.chat_template_utils import _compile_jinja_template

    env = _compile_jinja_template(tok.chat_template).environment
    assert env.filters["tojson"].__name__ == "tojson" and reference(tok, messages, tools, True) == before


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_codec_equals_encode_and_decode(kind, text):
    tok = tokenizer(kind)
    codec = Codec(tok)
    assert codec.backend is not None  # these are fast tokenizers: the shortcut is taken
    ids = tok.encode(text, add_special_tokens=False)
    assert codec.encode(text).tolist() == list(ids)
    assert codec.decode(np.asarray(ids, np.int32)) == tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_codec_takes_the_byte_codec_only_where_it_agrees(monkeypatch):
    from textgym.tokenizer import ByteCodec

    assert Codec(tokenizer("tiny")).bytes is not None
    assert Codec(tokenizer("chatml")).bytes is None  # merges: the tokenizers backend
    monkeypatch.setattr(ByteCodec, "decode", lambda self, ids: "wrong")
    codec = Codec(tokenizer("tiny"))
    assert codec.bytes is None and codec.backend is not None
    ids = tokenizer("tiny").encode("héllo <|im_end|>", add_special_tokens=False)
    assert codec.decode(np.asarray(ids, np.int32)) == "héllo <|im_end|>"


def test_messages_are_prepared_once_and_lookups_match_the_sandbox():
    tok = tokenizer("tiny")
    renderer = TemplateRenderer(tok)
    messages = [{"role": "user", "content": "hi", "keys": "a dict attribute name as a key"}, {"role": "assistant", "content": None}]
    assert renderer.render(messages, None, True) == reference(tok, messages, None, True)
    prepared = renderer._prepared_message(messages[0])
    assert renderer._prepared_message(messages[0]) is prepared  # the same object: prepared once
    template = "{{ messages[0].keys is defined }} {{ messages[0].role }} {{ messages[0].nope is defined }}|{{ messages[1].content }}"
    custom = TemplateRenderer(tok, chat_template=template)
    assert custom.render(messages, None, False) == reference(tok, messages, None, False, template) == "True user False|"


def test_loop_counters_read_as_the_sandbox_reads_them():
    tok = tokenizer("chatml")
    template = (
        "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.length }}"
        "{{ loop.first }}{{ loop.last }}{{ loop.depth }}{{ loop.depth0 }}{{ loop.previtem is defined }}{{ loop.cycle('a', 'b') }};{% endfor %}"
    )
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert TemplateRenderer(tok, chat_template=template).render(messages, None, False) == reference(tok, messages, None, False, template)
