"""The plain-Python tails of known templates (``textgym._chat_templates.known``) render exactly what
their Jinja tails and ``apply_chat_template`` render.

TokenObservation trusts these functions at every step, so equality is checked here on real
conversations (every start, every prefix) and on fuzzed messages, including those outside a
function's domain (which must reach the Jinja tail, errors included).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.chat_templates.test_render import played, reference
from tests.wrappers.chat_fixtures import LadderEnv, make_env, tokenizer
from tests.wrappers.token_reference import assert_steps_match_reference, decode, encode, reference_render
from textgym._chat_templates import known as chat_known
from textgym._chat_templates.known import KnownTail
from textgym._chat_templates.render import TemplateRenderer
from textgym._chat_templates.tail import MARK
from textgym.messages import thaw
from textgym.tokenizer import CHAT_TEMPLATE
from textgym.wrappers import TokenObservation

DOUBLE = '<tool_call>{"name": "step_up", "arguments": {}}</tool_call>' * 2
ENVS = ["textgym/Sudoku-v0", "textgym/Workplace-v0", "textgym/Code-v0", "ladder"]


def renderers(source: str = CHAT_TEMPLATE) -> tuple[TemplateRenderer, TemplateRenderer]:
    """The known and the Jinja tail of ``source`` (tiny tokenizer), both set up for tools and without."""
    known, jinja = TemplateRenderer(tokenizer("tiny"), source), TemplateRenderer(tokenizer("tiny"), source)
    for with_tools in (True, False):
        known.reach(with_tools)
    saved, chat_known.KNOWN = chat_known.KNOWN, {}
    try:
        for with_tools in (True, False):
            jinja.reach(with_tools)
    finally:
        chat_known.KNOWN = saved
    return known, jinja


def conversation(env_id: str, seed: int) -> tuple[list[dict], list | None]:
    """The final conversation of an oracle episode (plain dicts) and the tool schemas."""
    if env_id != "ladder":
        conversations, tools = played(env_id, seed)
        return [thaw(m) for m in conversations[-1]], tools
    env = LadderEnv()
    obs, info = env.reset(seed=seed)
    obs, *_ = env.step(DOUBLE)  # two tool results in a row: one user turn
    while True:
        obs, _, terminated, truncated, _ = env.step(env.oracle_action())
        if terminated or truncated:
            return [thaw(m) for m in obs], [thaw(t) for t in info["tools"]]


def test_only_the_exact_template_text_is_known():
    known, jinja = renderers()
    assert isinstance(known._tails[True], KnownTail) and not isinstance(jinja._tails[True], KnownTail)
    for changed in (CHAT_TEMPLATE + " ", CHAT_TEMPLATE.replace("<|im_end|>\\n", "<|im_end|>", 1)):
        assert not isinstance(renderers(changed)[0]._tails[True], KnownTail)


@pytest.mark.parametrize("env_id", ENVS)
def test_known_tails_are_the_jinja_tails_and_end_the_rendering(env_id):
    known, jinja = renderers()
    tok = known.tokenizer
    for seed in (0, 1):
        final, tools = conversation(env_id, seed)
        for n in range(1, len(final) + 1):
            chat = known.prepare(final[:n])
            for with_tools in (tools, None):
                for prompt in (True, False):
                    whole = reference(tok, final[:n], with_tools, prompt)
                    for start in range(n + 1):
                        parts = known.tail(chat, start, with_tools, prompt)
                        assert parts == jinja.tail(chat, start, with_tools, prompt)
                        assert whole.endswith("".join(parts))


_PIECES = ["a", " ", "\n", "é", "🙂", "<|im_end|>", "<tool_response>", "{{", "%}", "tool", MARK]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer"]), "content": _TEXT},
        optional={"name": _TEXT, "tool_call_id": _TEXT},
    ),
    # outside the Python tail's domain: the Jinja tail answers (or raises, as render() would)
    st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool"]), "content": _TEXT, "tool_calls": st.just([])}),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "tool"])}),
    st.fixed_dictionaries({"content": _TEXT}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": st.just(["a list"])}),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_MESSAGE, min_size=1, max_size=6), st.integers(0, 6), st.booleans(), st.booleans())
def test_known_tails_equal_the_jinja_tails_on_fuzzed_messages(messages, start, with_tools, prompt):
    known, jinja = renderers_once()
    start = min(start, len(messages))
    tools = [{"type": "function", "function": {"name": "f"}}] if with_tools else None
    chat = known.prepare(messages)

    def outcome(r):
        try:
            return r.tail(chat, start, tools, prompt)
        except Exception as e:  # the same error either way
            return type(e)

    fast, slow = outcome(known), outcome(jinja)
    if slow is None and fast is not None:  # the Jinja tail's split failed on a marker: compare with the whole rendering
        try:
            whole = reference(known.tokenizer, messages, tools, prompt, CHAT_TEMPLATE)
        except Exception:  # a message before `start` that the template cannot render
            assume(False)
        assert whole.endswith("".join(fast))
    else:
        assert fast == slow


_RENDERERS: list = []


def renderers_once():
    if not _RENDERERS:
        _RENDERERS.extend(renderers())
    return _RENDERERS


@pytest.mark.parametrize("env_id", ["textgym/Workplace-v0", "ladder"])
def test_token_observation_with_the_known_tail_stays_exact(env_id):
    tok = tokenizer("tiny")
    env = TokenObservation(make_env(env_id), tok)
    env.reset(seed=0)
    assert isinstance(env._renderer._tails[True], KnownTail) and env._tail is not None
    assert assert_steps_match_reference(make_env(env_id), tok, range(3), junk=3) >= 6


def test_grouped_tool_results_stay_exact():
    env = TokenObservation(LadderEnv(), tokenizer("tiny"))
    obs, info = env.reset(seed=2)
    tools = [thaw(t) for t in info["tools"]]
    for text in (DOUBLE, DOUBLE, "Done?", DOUBLE, "<answer>4</answer>"):
        ids = encode(env.tokenizer, text) + [env.tokenizer.eos_token_id]
        new, _, terminated, truncated, _ = env.step(ids)
        after = reference_render(env.tokenizer, env.unwrapped.conversation, tools, not (terminated or truncated))
        head = decode(env.tokenizer, obs) + decode(env.tokenizer, ids)
        assert after.startswith(head) and new.tolist() == obs.tolist() + ids + encode(env.tokenizer, after[len(head) :])
        obs = new
        if terminated or truncated:
            break
    assert env._tail is not None  # rendered from the tail to the end


def test_a_wrong_known_tail_is_caught_at_reset(monkeypatch):
    # Every reset compares a tail with apply_chat_template's rendering before trusting it: a wrong
    # function (here one that drops a user turn's newline) renders whole from then on, still exact.
    bodies, reach = chat_known.KNOWN[CHAT_TEMPLATE]

    def wrong(messages, start, prompt):
        return [p.replace("user\n", "user") for p in bodies(messages, start, prompt)]

    monkeypatch.setitem(chat_known.KNOWN, CHAT_TEMPLATE, (wrong, reach))
    tok = tokenizer("tiny")
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=0)
    assert env._tail is None
    assert assert_steps_match_reference(LadderEnv(), tok, range(2), junk=2) >= 4
