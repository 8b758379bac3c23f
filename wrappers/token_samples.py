"""Training samples split where a chat template rewrites earlier turns (thinking models).

Qwen3's template drops the ``<think>`` block of every assistant turn once a new user turn
follows, so the rendering of turn *k + 1* does not start with the tokens the model saw at turn
*k*: no single token sequence is both what the model saw and what it will see. With
``TokenObservation(..., on_template_break="new_sample")`` the episode becomes several samples
(prime-rl's approach): a sample continues as long as the template's rendering of the whole
conversation extends its text, and where it does not, the next sample begins with that
rendering as its prompt. Each sample is a sequence of its own (its loss mask is 1 exactly on its
sampled ids); the trainers pack each as a row, and all samples of an episode share its GRPO
advantage (``Rollout.sample_spans``, :func:`textgym.algos.grpo.pack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

OnTemplateBreak = Literal["raise", "new_sample"]
"""What :class:`~textgym.wrappers.TokenObservation` does where the template rewrites earlier turns."""


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, content)`` of a reply, split at its last ``</think>`` as Qwen3's template
    splits an assistant message; ``(None, text)`` when it has no reasoning block.

    Example:
        >>> split_reasoning("<think>\\nplan\\n</think>\\n\\nanswer")
        ('plan', 'answer')
        >>> split_reasoning("answer")
        (None, 'answer')
    """
    if "</think>" not in text:
        return None, text
    reasoning = text.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
    return reasoning, text.split("</think>")[-1].lstrip("\n")


@dataclass
class SampleSplitter:
    """The samples of one episode so far.

    Attributes:
        messages: The conversation as the template renders it: the env's messages, with each
            sampled reply's reasoning as the assistant message's ``reasoning_content``.
        text: The current sample's text, which is always the template's rendering of
            ``messages`` (with the generation prompt while the episode runs).
        starts: ``(chunk index, byte offset)`` of each sample after the first, in the token
            wrapper's context.
    """

    messages: list[dict[str, Any]]
    text: str
    starts: list[tuple[int, int]] = field(default_factory=list)

    def advance(self, sampled: str, new: list[dict[str, Any]], rendered: str, done: bool) -> tuple[str, bool]:
        """Account one step: the policy's ``sampled`` text, the ``new`` messages (its reply as the
        env recorded it, then the env's) and the template's ``rendered`` conversation after them.

        Returns:
            ``(text, fresh)``: the env text to append, and whether it opens a new sample (it is
            then the whole rendering, the new sample's prompt). An episode that ended where the
            template broke starts no sample: there is nothing left to train in it.
        """
        self.messages.extend(new)
        context = self.text + sampled
        self.text = rendered
        if rendered.startswith(context):
            return rendered[len(context) :], False
        if done:
            return "", False
        return rendered, True
