"""A template rendered from a message on is the end of its whole rendering, and what it leaves out
does not change when messages are appended (``textgym._chat_templates.tail``).

TokenObservation's per-step prefix check compares only these tails, so each claim the module
makes about a template it accepts is checked here on real conversations, for every start, against
``apply_chat_template``; and templates outside the shape it proves must be refused.
"""

from __future__ import annotations

import copy

import pytest

from tests.chat_templates.test_render import played, reference
from tests.wrappers.chat_fixtures import CHATML_TEMPLATE, LLAMA3_TEMPLATE, THINK_DROPPING_TEMPLATE, LadderEnv, tokenizer
from tests.wrappers.token_reference import assert_steps_match_reference
from textgym._chat_templates.render import TemplateRenderer
from textgym.tokenizer import CHAT_TEMPLATE
from textgym.wrappers import TokenObservation

# Counts the turns (loop.index): prefix-preserving, and exact from any start only because the copy
# offsets the counters. Also reads the next message (reach 1) and the first one.
NUMBERED_TEMPLATE = """{%- if tools %}{% for t in tools %}{{ t | tojson }}
{% endfor %}{% endif %}
{%- for m in messages %}
{%- if loop.first and m.role == 'system' %}[{{ m.content }}]
{% else %}<{{ loop.index }}:{{ m.role }}{% if not loop.first and messages[loop.index0 - 1].role == m.role %}+{% endif %}>{{ m.content }}
{%- for c in m.tool_calls or [] %}({{ c.function.name }} {{ c.function.arguments }}){% endfor %}
{%- if m.role != 'tool' or loop.last or messages[loop.index0 + 1].role != 'tool' %}</{{ loop.index0 }}>{% endif %}
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<{{ messages | length + 1 }}:assistant>{% endif %}"""

TEMPLATES = {"tiny": CHAT_TEMPLATE, "chatml": CHATML_TEMPLATE, "llama3": LLAMA3_TEMPLATE, "numbered": NUMBERED_TEMPLATE}
REACH = {"tiny": 1, "chatml": 0, "llama3": 0, "numbered": 1}


def renderer(kind: str) -> TemplateRenderer:
    tok = tokenizer("tiny" if kind in ("tiny", "numbered") else kind)
    return TemplateRenderer(tok, TEMPLATES[kind])


@pytest.mark.parametrize("kind", TEMPLATES)
@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0"])
def test_tails_end_the_rendering_and_the_rest_stays(kind, env_id):
    r = renderer(kind)
    tools = played(env_id)[1]
    assert r.reach(True) == REACH[kind] and r.reach(False) == REACH[kind]
    final = [dict(m) for m in played(env_id)[0][-1]]
    final = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in m.items()} for m in final]
    whole = {}
    for n in range(1, len(final) + 1):
        for prompt in (True, False):
            whole[n, prompt] = reference(r.tokenizer, final[:n], tools, prompt, TEMPLATES[kind])
    bodies = {}  # (n, prompt) -> each message's text and the footer's, rendered from message 0 on
    for n in range(1, len(final) + 1):
        for prompt in (True, False):
            bodies[n, prompt] = r.tail(r.prepare(final[:n]), 0, tools, prompt)
            assert len(bodies[n, prompt]) == n + 1
    for n in range(1, len(final) + 1):
        chat = r.prepare(final[:n])
        for start in range(n + 1):
            for prompt in (True, False):
                parts = r.tail(chat, start, tools, prompt)
                # A message's text is the same from whichever message the rendering starts.
                assert parts == bodies[n, prompt][start:]
                tail = "".join(parts)
                assert whole[n, prompt].endswith(tail)
                kept = whole[n, prompt][: len(whole[n, prompt]) - len(tail)]
                # Appending messages leaves the header and the bodies before `start` as they were,
                # once `start` is at least `reach` messages from the end.
                if start <= n - REACH[kind]:
                    for m in range(n, len(final) + 1):
                        later = whole[m, not prompt]
                        assert later.startswith(kept)
                        assert later == kept + "".join(r.tail(r.prepare(final[:m]), start, tools, not prompt))
                        assert bodies[m, not prompt][:start] == bodies[n, prompt][:start]


REFUSED = {
    "think-dropping (a namespace filled by another loop over messages)": THINK_DROPPING_TEMPLATE,
    "loop.length": "{% for m in messages %}{{ loop.length }}{{ m.content }}{% endfor %}",
    "loop.revindex": "{% for m in messages %}{{ loop.revindex }}{{ m.content }}{% endfor %}",
    "the last message": "{% for m in messages %}{{ m.content }}{{ messages[-1].role }}{% endfor %}",
    "a count in the header": "{{ messages | length }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "a later message in the header": "{{ messages[1].content }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "the prompt flag in the body": "{% for m in messages %}{{ m.content }}{{ add_generation_prompt }}{% endfor %}",
    "the prompt flag in the header": "{{ add_generation_prompt }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "a header variable read in the body": "{% set s = messages[0].content %}{% for m in messages %}{{ s }}{% endfor %}",
    "a header variable read in the footer": "{% set s = 'x' %}{% for m in messages %}{{ m.content }}{% endfor %}{{ s }}",
    "a namespace of the header written in the body": (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}"
    ),
    "an unguarded look back": "{% for m in messages %}{{ messages[loop.index0 - 1].role }}{% endfor %}",
    "a look back past the guard": "{% for m in messages %}{% if not loop.first %}{{ messages[loop.index0 - 2].role }}{% endif %}{% endfor %}",
    "a date": "{{ strftime_now('%d') }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "a macro": "{% macro f(m) %}{{ m.content }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}",
    "two loops over messages": "{% for m in messages %}{{ m.content }}{% endfor %}{% for m in messages %}{% endfor %}",
    "a loop inside an if": "{% if messages %}{% for m in messages %}{{ m.content }}{% endfor %}{% endif %}",
    "a filtered loop": "{% for m in messages if m.role != 'system' %}{{ loop.index }}{% endfor %}",
    "a break": "{% for m in messages %}{% if m.role == 'tool' %}{% break %}{% endif %}{{ m.content }}{% endfor %}",
    "previtem": "{% for m in messages %}{{ loop.previtem }}{% endfor %}",
    "a nested loop over messages": "{% for m in messages %}{% for x in messages %}{{ x.role }}{% endfor %}{% endfor %}",
    "the loop object kept": "{% for m in messages %}{% set l = loop %}{{ l.index }}{% endfor %}",
}


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_templates_of_another_shape_are_refused(source):
    assert TemplateRenderer(tokenizer("tiny"), source).reach(False) is None


def test_a_guarded_look_back_and_a_look_ahead_are_accepted():
    source = (
        "{% for m in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1].role == 'tool' %}+{% endif %}"
        "{% if not loop.last %}{{ messages[loop.index0 + 2] is defined }}{% endif %}{{ m.content }}{% endfor %}"
    )
    assert TemplateRenderer(tokenizer("tiny"), source).reach(False) == 2


def test_token_observation_renders_tails_and_stays_exact_with_numbered_turns():
    tok = copy.deepcopy(tokenizer("tiny"))
    tok.chat_template = NUMBERED_TEMPLATE
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=3)
    assert env._tail is not None  # the tail is what each step renders
    assert assert_steps_match_reference(LadderEnv(), tok, range(3), junk=4) >= 6


@pytest.mark.parametrize("known", [False, True], ids=["jinja", "known"])
def test_a_message_that_holds_the_marker_renders_whole_and_stays_exact(known, monkeypatch):
    # The Jinja tail's texts are split at a marker; a message holding it gives no split (not a wrong
    # one), the step renders the whole conversation, and every id stays the reference's. The tiny
    # template's plain-Python tail (_chat_templates/known.py) needs no marker: its texts are the message's.
    from tests.wrappers.token_reference import decode, encode, reference_render
    from textgym._chat_templates import known as chat_known
    from textgym._chat_templates.tail import MARK
    from textgym.messages import thaw

    if not known:
        monkeypatch.setattr(chat_known, "KNOWN", {})
    r = renderer("tiny")
    assert r.reach(False) == 1
    parts = r.tail(r.prepare([{"role": "user", "content": "a" + MARK}]), 0, None, True)
    assert parts == (["<|im_start|>user\na" + MARK + "<|im_end|>\n", "<|im_start|>assistant\n"] if known else None)
    tok = tokenizer("tiny")
    env = TokenObservation(LadderEnv(), tok)
    base = env.unwrapped
    obs, info = env.reset(seed=1)
    tools = [thaw(t) for t in info["tools"]]
    for text in ("Climbing" + MARK + ".", '<tool_call>{"name": "step_up", "arguments": {}}</tool_call>', "Up" + MARK):
        sampled = encode(tok, text) + [tok.eos_token_id]
        new, _, terminated, truncated, _ = env.step(sampled)
        after = reference_render(tok, base.conversation, tools, not (terminated or truncated))
        head = decode(tok, obs) + decode(tok, sampled)
        assert after.startswith(head) and new.tolist() == obs.tolist() + sampled + encode(tok, after[len(head) :])
        obs = new
