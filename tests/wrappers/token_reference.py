"""A reference TokenObservation built from transformers alone (not a test module: shared by the
exactness tests here and in tests/models).

It does what the wrapper promises in the plainest way, with none of its shortcuts: every step
renders the whole conversation with ``apply_chat_template``, checks that the rendering starts
with the previous one followed by the sampled text, and appends ``tokenizer.encode`` of the rest.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tests.wrappers.chat_fixtures import as_text
from textgym.messages import thaw
from textgym.wrappers import TokenObservation


def reference_render(tok, conversation, tools, generation_prompt: bool) -> str:
    return tok.apply_chat_template([thaw(m) for m in conversation], tools=tools, tokenize=False, add_generation_prompt=generation_prompt)


def decode(tok, ids) -> str:
    return tok.decode(np.asarray(ids).tolist(), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def encode(tok, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def sampled(tok, text: str, turn: int) -> np.ndarray:
    """Canonical ids + stop token, cut off without one, or spelled one character at a time."""
    ids = encode(tok, text)
    if turn % 3 == 1:
        return np.asarray(ids, np.int32)
    if turn % 3 == 2:
        ids = [i for ch in text for i in encode(tok, ch)]
    return np.asarray(ids + [tok.eos_token_id], np.int32)


# Turns that change nothing but the conversation: the env answers them with feedback.
JUNK = ('Checking. <tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>', "<tool_call>{oops</tool_call> é🙂")


def assert_steps_match_reference(env: gym.Env, tok, seeds, max_steps: int = 40, junk: int = 0, render=reference_render) -> int:
    """Play the oracle through ``TokenObservation(env, tok)``, after ``junk`` turns of feedback-only
    text per episode, and check every observation against the reference (``render(tok,
    conversation, tools, generation_prompt)``); returns the number of steps checked."""
    wrapped = TokenObservation(env, tok)
    base = env.unwrapped
    checked = 0
    for seed in seeds:
        obs, info = wrapped.reset(seed=seed)
        tools = [thaw(t) for t in info.get("tools") or ()] or None
        rendered = render(tok, base.conversation, tools, True)
        assert obs.tolist() == encode(tok, rendered)
        for turn in range(max_steps):
            text = JUNK[turn % len(JUNK)] if turn < junk else as_text(base.oracle_action())
            ids = sampled(tok, text, turn)
            new, _, terminated, truncated, info = wrapped.step(ids)
            after = render(tok, base.conversation, tools, not (terminated or truncated))
            head = rendered + decode(tok, ids)
            assert after.startswith(head), "the reference template is not prefix-preserving here"
            assert new.tolist() == obs.tolist() + ids.tolist() + encode(tok, after[len(head) :])
            obs, rendered = new, after
            checked += 1
            if terminated or truncated:
                np.testing.assert_array_equal(info["trajectory"].token_ids, obs)
                break
    return checked
