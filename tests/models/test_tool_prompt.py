"""Tools reach every model: SmolLM2's template ignores ``tools=``, so textgym writes them itself."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest

from textgym import tool_prompt
from textgym.parsing import parse_turn
from textgym.policies import ModelPolicy
from textgym.rollout import collect
from textgym.wrappers import TokenObservation

pytest.importorskip("transformers")

WORKPLACE = "textgym/Workplace-v0"


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(tool_prompt, "_WARNED", set())


def workplace_tools() -> list[str]:
    env = gym.make(WORKPLACE)
    _, info = env.reset(seed=0)
    env.close()
    return [t["function"]["name"] for t in info["tools"]]


def test_every_workplace_tool_is_in_smollm2s_prompt_and_the_fallback_warns_once(smollm2_tokenizer):
    names = workplace_tools()
    assert len(names) == 27
    bare = smollm2_tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi."}], tools=[{"type": "function", "function": {"name": names[0]}}], tokenize=False
    )
    assert names[0] not in bare  # the template itself drops tools=
    with pytest.warns(UserWarning, match="ignores tools="):
        env = TokenObservation(gym.make(WORKPLACE), smollm2_tokenizer)
        ids, info = env.reset(seed=0)
    text = smollm2_tokenizer.decode(ids.tolist())
    assert [n for n in names if f'"name": "{n}"' not in text] == []
    # The env's system text, a blank line, then the documented block: one JSON schema a line.
    system = text[len("<|im_start|>system\n") : text.index("<|im_end|>")]
    env_system = _conversation(0)[0]
    assert env_system["role"] == "system" and system.startswith(env_system["content"] + "\n\n" + tool_prompt.HEADER + "\n")
    assert system.endswith(tool_prompt.FOOTER)
    block = system[len(env_system["content"] + "\n\n" + tool_prompt.HEADER + "\n") : -len(tool_prompt.FOOTER)]
    assert [json.loads(line) for line in block.split("\n")] == [_plain(t) for t in info["tools"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second env (a vector env's next slot) does not warn again
        TokenObservation(gym.make(WORKPLACE), smollm2_tokenizer).reset(seed=1)


def _plain(schema):
    return json.loads(json.dumps(schema, default=dict))


@pytest.mark.filterwarnings("ignore:the chat template")
def test_oracle_demonstrations_show_their_tool_calls_in_the_hermes_convention(smollm2_tokenizer):
    """SFT demonstrations: the oracle's structured tool calls become <tool_call> text in the
    policy tokens, and the env's parser reads the very same calls back from that text."""
    from textgym.algos.train.sft import demonstrations

    [demo] = demonstrations(WORKPLACE, {}, smollm2_tokenizer, None, seeds=[3], num_envs=1)
    assert demo.success
    prompt = smollm2_tokenizer.decode(demo.token_ids[: demo.turn_spans[0][0]].tolist())
    assert all(f'"name": "{n}"' in prompt for n in workplace_tools())
    oracle_calls = [m for m in demo.messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert oracle_calls
    for (start, end), message in zip(demo.turn_spans, [m for m in demo.messages if m["role"] == "assistant"]):
        turn = parse_turn(smollm2_tokenizer.decode(demo.token_ids[start:end].tolist()))
        assert turn.errors == ()
        wanted = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or ()]
        assert [(c.name, c.arguments) for c in turn.tool_calls] == wanted


class Recorder:
    """A generator that records its prompts and answers with end-of-turn at once."""

    def __init__(self, eos: int):
        self.eos, self.prompts = eos, []

    def generate(self, prompts, max_new_tokens, temperature, seed):
        self.prompts += [np.asarray(p) for p in prompts]
        return [np.array([self.eos], np.int32)] * len(prompts), [np.zeros(1, np.float32)] * len(prompts)


@pytest.mark.filterwarnings("ignore:the chat template")
def test_model_policy_is_prompted_with_every_tool(smollm2_tokenizer):
    from textgym.algos.rollouts.token_envs import token_venv

    venv = token_venv(WORKPLACE, {}, smollm2_tokenizer, None, num_envs=2)
    recorder = Recorder(smollm2_tokenizer.eos_token_id)
    try:
        collect(venv, ModelPolicy(recorder, max_new_tokens=4), seeds=[0, 1])
    finally:
        venv.close()
    assert len(recorder.prompts) == 2
    for prompt in recorder.prompts:
        text = smollm2_tokenizer.decode(prompt.tolist())
        assert all(f'"name": "{n}"' in text for n in workplace_tools())


def test_templates_that_render_tools_are_left_alone():
    from textgym.algos.models.tiny import compact_chat_template
    from textgym.tokenizer import tiny_tokenizer

    tok = tiny_tokenizer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = TokenObservation(gym.make(WORKPLACE), tok)
        ids, info = env.reset(seed=0)
        compact = TokenObservation(gym.make(WORKPLACE), tok, chat_template=compact_chat_template())
        compact_ids, _ = compact.reset(seed=0)
    own = tok.apply_chat_template(_conversation(0), tools=[_plain(t) for t in info["tools"]], tokenize=False, add_generation_prompt=True)
    assert tok.decode(ids.tolist()) == own
    prompt = tool_prompt.probe(tok)
    assert not (prompt.inline_tools or prompt.inline_calls)
    # The compact template drops the system turn by design: nothing could carry the tools, none are added.
    assert '"name": "' not in tok.decode(compact_ids.tolist())


def _conversation(seed):
    env = gym.make(WORKPLACE)
    conversation, _ = env.reset(seed=seed)
    env.close()
    return [_plain(m) for m in conversation]


def test_a_template_that_raises_on_tools_counts_as_dropping_them():
    from textgym.tokenizer import tiny_tokenizer

    tok = tiny_tokenizer()
    raising = (
        "{%- if tools %}{{ raise_exception('no tools here') }}{%- endif %}"
        "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    prompt = tool_prompt.probe(tok, raising)
    assert prompt.inline_tools and prompt.inline_calls
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    call = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}],
    }
    with pytest.warns(UserWarning, match="ignores tools="):
        messages, tools = prompt.apply([{"role": "user", "content": "Hi."}, call], [schema])
    assert tools is None
    assert messages[0] == {"role": "system", "content": tool_prompt.tools_block([schema])}
    assert messages[2] == {
        "role": "assistant",
        "content": 'Let me look.\n<tool_call>\n{"name": "lookup", "arguments": {"q": 1}}\n</tool_call>',
    }
    assert [(c.name, c.arguments) for c in parse_turn(messages[2]["content"]).tool_calls] == [("lookup", {"q": 1})]
