"""Every observation TokenObservation hands out is, id for id, what transformers alone gives.

The wrapper renders through :class:`~textgym._chat_templates.render.TemplateRenderer` (prepared
tools and messages, a faster sandbox lookup), keeps the rewritten conversation from step to step,
and encodes through :class:`~textgym._chat_templates.render.Codec` (the ``tokenizers`` backend or
:class:`~textgym.tokenizer.ByteCodec`). None of that may change one id: each step is compared with
``apply_chat_template`` of the whole conversation and ``tokenizer.encode`` of the new text.
"""

from __future__ import annotations

import pytest

from tests.wrappers.chat_fixtures import LadderEnv, make_env, tokenizer
from tests.wrappers.token_reference import assert_steps_match_reference
from textgym.wrappers import TokenObservation


@pytest.mark.parametrize("kind", ["tiny", "chatml", "llama3"])
@pytest.mark.parametrize(
    ("env_id", "seeds"),
    [("ladder", range(4)), ("textgym/Sudoku-v0", range(3)), ("textgym/Workplace-v0", range(8)), ("textgym/Code-v0", range(2))],
)
def test_every_observation_equals_the_reference(kind, env_id, seeds):
    # Three feedback-only turns first (unknown tools, malformed JSON): longer episodes whose
    # kept conversation grows one step at a time.
    assert assert_steps_match_reference(make_env(env_id), tokenizer(kind), seeds, junk=3) >= 3 * len(seeds)


def test_a_changed_tool_list_is_rendered_at_the_next_reset():
    from textgym.tools import Toolset

    def step_down() -> dict:
        """Go down one rung."""
        return {}

    tok = tokenizer("tiny")
    env = LadderEnv()
    wrapped = TokenObservation(env, tok)
    first, _ = wrapped.reset(seed=0)
    env._tools = Toolset([env.step_up, step_down])
    second, _ = wrapped.reset(seed=0)
    assert "step_down" not in tok.decode(first.tolist()) and "step_down" in tok.decode(second.tolist())
    assert assert_steps_match_reference(env, tok, range(2)) >= 2  # and every step agrees with the new list


def test_a_tokenizer_that_does_not_decode_its_text_back_is_refused():
    # The decode-and-compare check stays for every tokenizer but the byte codec's.
    import copy

    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast

    from tests.wrappers.chat_fixtures import CHATML_TEMPLATE
    from textgym.error import TemplateError

    backend = copy.deepcopy(tokenizer("chatml").backend_tokenizer)
    backend.normalizer = normalizers.Lowercase()
    lowering = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", chat_template=CHATML_TEMPLATE)
    env = TokenObservation(LadderEnv(), lowering)
    assert not env._codec.lossless
    with pytest.raises(TemplateError, match="lossless tokenizer"):
        env.reset(seed=0)  # "Climb the ladder." comes back as "climb the ladder."
