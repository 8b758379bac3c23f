"""TokenObservation with SmolLM2-135M-Instruct's own tokenizer, id for id against transformers.

SmolLM2's template drops ``tools=``, so the wrapper writes the tool schemas into the system
message (:mod:`textgym.tool_prompt`) and keeps that rewritten conversation from step to step; its
tokenizer has merges, so encoding goes through the ``tokenizers`` backend. Slow: the tokenizer is
read from the GGUF file of the ``smollm2`` extra.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.wrappers.token_reference import assert_steps_match_reference, reference_render
from textgym.messages import thaw
from textgym.tool_prompt import tools_block

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:the chat template")]


def render_with_tools_in_system(tok, conversation, tools, generation_prompt):
    """The reference rendering as the wrapper promises it for SmolLM2: the tools in the system
    message, Hermes style (the template itself drops ``tools=``)."""
    messages = [thaw(m) for m in conversation]
    if tools and messages[0]["role"] == "system":
        messages[0] = dict(messages[0], content=messages[0]["content"] + "\n\n" + tools_block(tools))
    elif tools:
        messages.insert(0, {"role": "system", "content": tools_block(tools)})
    return reference_render(tok, messages, None, generation_prompt)


@pytest.mark.parametrize(
    ("env_id", "seeds"), [("textgym/Workplace-v0", range(4)), ("textgym/Sudoku-v0", range(2)), ("textgym/Code-v0", range(1))]
)
def test_every_observation_equals_the_reference(smollm2_tokenizer, env_id, seeds):
    steps = assert_steps_match_reference(gym.make(env_id), smollm2_tokenizer, seeds, junk=2, render=render_with_tools_in_system)
    assert steps >= 3 * len(seeds)
