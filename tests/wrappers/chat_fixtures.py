"""Offline tokenizers with ChatML and Llama-3 style chat templates, and a small multi-turn env
(not a test module: shared by the token-observation and rollout tests).

The tokenizers are byte-level BPE models trained here on a few lines of text, so they have real
merges: re-tokenizing a rendered conversation gives other ids than the ones a policy sampled,
which is the drift that :class:`textgym.wrappers.TokenObservation` must not suffer from.
"""

from __future__ import annotations

import json
from functools import cache

import gymnasium as gym

from textgym import messages as M
from textgym.env import Outcome, TextEnv, tool_messages
from textgym.tasks import Task, task_id
from textgym.tools import Toolset

LADDER_ID = "textgym-test/Ladder-v0"

# ChatML (Hermes/Qwen-like): tools in the system turn, tool results as their own `tool` turns.
CHATML_TEMPLATE = """{%- if tools or messages[0].role == 'system' %}<|im_start|>system
{%- if messages[0].role == 'system' %}
{{ messages[0].content }}{% endif %}
{%- if tools %}
# Tools
<tools>
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}
</tools>{% endif %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}<|im_start|>assistant
{{ m.content }}
{%- for c in m.tool_calls or [] %}<tool_call>{"name": {{ c.function.name | tojson }}, "arguments": {{ c.function.arguments }}}</tool_call>{% endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>tool
{{ m.content }}<|im_end|>
{% elif m.role != 'system' or not loop.first %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

# Llama 3.1 style: bos, header ids, trimmed content, tools in the system turn, results as `ipython`.
LLAMA3_TEMPLATE = """{{- bos_token }}
{%- if tools or messages[0].role == 'system' %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}
{%- if tools %}{{- 'Environment: ipython\\n\\nYou have these functions:\\n' }}{% for t in tools %}{{- t | tojson + '\\n' }}{% endfor %}{% endif %}
{%- if messages[0].role == 'system' %}{{- messages[0].content | trim }}{% endif %}
{{- '<|eot_id|>' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first %}
{%- elif m.role == 'tool' %}
{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}
{%- elif m.role == 'assistant' and m.tool_calls %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- for c in m.tool_calls %}{{- '{"name": "' + c.function.name + '", "parameters": ' + c.function.arguments + '}' }}{% endfor %}
{{- '<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"""

# Qwen3-like: drops <think> blocks from assistant turns before the last user message, so
# rendering more messages rewrites earlier turns (not prefix-preserving).
THINK_DROPPING_TEMPLATE = """{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in m.content %}{{ m.content.split('</think>')[-1] }}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

_CORPUS = [
    "Climb the ladder: call step_up until you reach the top, then give the answer.",
    '<tool_call>{"name": "step_up", "arguments": {}}</tool_call> {"rung": 1} {"error": "unknown tool"}',
    "<answer>3</answer> The quick brown fox jumps over the lazy dog. Sudoku rows columns digits 0123456789",
    'def solve(x):\n    return [x for x in range(10)]\n {"type": "function", "function": {"name": "place"}}',
    "Error: please try again. Nothing was changed. héllo wörld 日本語 ✓",
]


@cache
def bpe_tokenizer(kind: str):
    """A trained byte-level BPE tokenizer with the ``chatml``, ``llama3`` or ``think`` template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = {
        "chatml": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "think": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "llama3": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    }[kind]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    backend.train_from_iterator(_CORPUS * 3, trainer)
    template = {"chatml": CHATML_TEMPLATE, "llama3": LLAMA3_TEMPLATE, "think": THINK_DROPPING_TEMPLATE}[kind]
    if kind == "llama3":
        return PreTrainedTokenizerFast(
            tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", chat_template=template
        )
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=template)


def tokenizer(kind: str):
    """``tiny`` (textgym's built-in tokenizer) or a trained BPE one (:func:`bpe_tokenizer`)."""
    if kind == "tiny":
        from textgym.tokenizer import tiny_tokenizer

        return _tiny(tiny_tokenizer)
    return bpe_tokenizer(kind)


@cache
def _tiny(build):
    return build()


class LadderEnv(TextEnv):
    """Call ``step_up`` once per rung (``n`` in [1, 4]), then answer ``<answer>n</answer>``.

    Oracle episodes last ``n + 1`` turns, so sub-envs of a vector env finish at different steps.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("max_turns", 6)
        super().__init__(**kwargs)
        self._tools = Toolset([self.step_up])
        self.rung = 0

    def step_up(self) -> dict:
        """Climb one rung."""
        self.rung += 1
        return {"rung": self.rung}

    @property
    def tools(self):
        return self._tools

    def generate_task(self, rng):
        n = int(rng.integers(1, 5))
        return Task(task_id("ladder", n), {"n": n}, n)

    def task_from_dict(self, d):
        return Task(task_id("ladder", int(d["n"])), {"n": int(d["n"])}, int(d["n"]))

    def begin(self, task):
        self.rung = 0
        return [M.system("Climb the ladder."), M.user(f"There are {task.answer} rungs. Call step_up per rung, then answer.")]

    def respond(self, turn):
        if turn.tool_calls:
            msgs, errors = tool_messages(self._tools, turn)
            return Outcome(messages=msgs, error="; ".join(errors) or None)
        if turn.answer is not None:
            ok = turn.answer == str(self.task.answer) and self.rung == self.task.answer
            return Outcome([M.user("Correct." if ok else "Wrong.")], float(ok), True, ok, {"rung": self.rung})
        return Outcome([M.user("Call step_up or answer.")])

    def oracle_action(self):
        if self.task is not None and self.rung < self.task.answer:
            return '<tool_call>{"name": "step_up", "arguments": {}}</tool_call>'
        return f"<answer>{self.task.answer if self.task else 0}</answer>"


def make_env(env_id: str) -> gym.Env:
    """A registered env by id, or the ``"ladder"`` test env, for tests parametrised over both."""
    return LadderEnv() if env_id == "ladder" else gym.make(env_id)


def as_text(action) -> str:
    """An oracle action as the text a model would write (tool calls as ``<tool_call>`` JSON)."""
    if isinstance(action, str):
        return action
    text = action.get("content") or ""
    for call in action.get("tool_calls") or ():
        fn = call.get("function", call)
        args = fn.get("arguments", {})
        args = json.loads(args) if isinstance(args, str) else args
        text += "<tool_call>" + json.dumps({"name": fn["name"], "arguments": args}) + "</tool_call>"
    return text
