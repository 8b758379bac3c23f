"""Token observations: any conversation env as a token-in/token-out env.

Multi-turn RL breaks quietly when a trainer re-tokenizes the conversation: the ids differ from
what the model sampled (BPE merges across turn boundaries, normalisation, malformed bytes), and
the loss is taken on tokens the model never produced. This wrapper keeps the token context
itself and only ever *appends*:

* the policy's sampled ids, verbatim (also when they decode to malformed text);
* after each env turn, the ids of the text that the chat template adds for it: the rest of the
  assistant turn that the model did not sample (``<|im_end|>\\n`` for ChatML when it stopped on
  ``<|im_end|>``), the env's new messages and the next generation prompt.

The end of the assistant turn is measured by rendering a placeholder assistant message (so it
never depends on the sampled text or on how it would re-tokenize); the env's part is the
difference between the renderings of the conversation with and without the env's new messages.
Only that text is tokenized. It needs a *prefix-preserving* template (rendering more messages
only appends text); every step checks this, and a template that rewrites earlier turns (Qwen3's
removal of past ``<think>`` blocks, a date in the system prompt) raises
:class:`~textgym.error.TemplateError` naming the fix, unless ``on_template_break="new_sample"``:
then the episode's trajectory is split where the rendering stops extending the context, and the
next sample starts with the template's fresh rendering as its prompt (prime-rl's way for
thinking models; see :mod:`textgym.wrappers.token_samples`).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from textgym._chat_templates.render import Codec, TemplateRenderer
from textgym.error import InvalidAction, ResetNeeded, TemplateError, TextGymError
from textgym.messages import FrozenDict, thaw
from textgym.rollout import TokenTrajectory
from textgym.spaces import TokenSequence
from textgym.tool_prompt import probe as probe_tool_prompt
from textgym.wrappers.token_samples import OnTemplateBreak, SampleSplitter, split_reasoning

# Stands in for the assistant's text when the template's framing of a turn is measured.
_PLACEHOLDER = "TextGym-Assistant-Turn"  # no edge whitespace: templates may trim
_MASK = {False: b"\0", True: b"\1"}  # a loss mask byte, by "is a policy token"
_FIX = (
    "token-in/token-out needs a prefix-preserving chat template (rendering more messages must only "
    "append text): pass TokenObservation(env, tokenizer, chat_template=...) a template that renders "
    'every past turn verbatim, or TokenObservation(..., on_template_break="new_sample") to start a new '
    "training sample where the template rewrites earlier turns"
)


class TokenObservation(gym.Wrapper):
    """Observe the token ids of the whole context; act with the sampled ids.

    * Observation: a 1-D ``int32`` array (:class:`~textgym.spaces.TokenSequence`) of the whole
      context, ending with the chat template's generation prompt while the episode runs (and
      with the final env messages, without a generation prompt, once it ended).
    * Action: the generated ids (a 1-D int array or a list of ints), or a mapping
      ``{"ids": ids, "logprobs": logprobs}`` that also passes the sampler's logprob of each id
      (Gymnasium's ``step`` takes no extra arguments). A trailing stop token that the template
      uses to close the turn (``<|im_end|>``, ``<|eot_id|>``) is kept in the trajectory and left
      out of the message text the env sees. Text and OpenAI-style assistant messages (tool calls
      included) are accepted too, for policies that do not sample tokens (an endpoint, the
      oracle): their tokens are the text, or the template's rendering of the message, tokenized
      once, and count as policy tokens.
    * ``info["end_reason"]`` becomes ``"length"`` when the turn that ended an unsolved episode
      was sampled ids without a trailing stop token (the sampler's ``max_new_tokens`` cut it).
    * ``info["trajectory"]`` at the end of an episode: a
      :class:`~textgym.rollout.TokenTrajectory` with the ids, the loss mask (1 exactly on the
      sampled ids), the logprobs (when every turn gave them), the ``[start, end)`` span of each
      policy turn and the final conversation.
    * Tools: the env's tool schemas are passed to the template as ``tools=``; a template that
      drops them gets them in the system message instead (:mod:`textgym.tool_prompt`).
    * Time: ``env_seconds`` adds up the seconds spent in the wrapped env's ``reset`` and ``step``,
      ``render_seconds`` those of this wrapper's own work around them (decoding the action, the
      chat template, tokenizing); a trainer reads both through ``venv.get_attr`` to tell env work
      from token rendering (they are not in ``info``: equal seeds must give equal infos).
    * ``reset(options={"state": s, "prompt_ids": ids})``: the episode's prompt is ``ids`` (the
      token context its source episode had at that turn) instead of the template's rendering
      of the state's conversation, so a branch continues its source exactly (docs/state.md).

    Args:
        env: An env whose observation is the whole conversation (a sequence of chat messages)
            and whose step appends the assistant's message and then the env's messages, such as
            every ``textgym`` env.
        tokenizer: A Hugging Face tokenizer with a chat template (``transformers`` tokenizers, or
            :func:`textgym.tokenizer.tiny_tokenizer`).
        chat_template: A Jinja template that replaces the tokenizer's own (e.g. a
            prefix-preserving variant of it).
        on_template_break: ``"raise"`` (the default): a template that rewrites earlier turns is a
            :class:`~textgym.error.TemplateError`. ``"new_sample"``: a step whose rendering does
            not extend the current sample's text starts a new sample, whose prompt is the
            template's rendering of the whole conversation (the observation is the current
            sample's ids; ``TokenTrajectory.sample_spans`` gives each sample's span). In this
            mode the env receives each sampled reply without its reasoning block (the text up
            to ``</think>``), and the trajectory's messages keep it as ``reasoning_content``.

    Raises:
        TemplateError: The template is not prefix-preserving, renders the assistant's text other
            than verbatim after its generation prompt, or the tokenizer does not decode its own
            ids back to the rendered text.

    Example:
        >>> import gymnasium as gym, textgym
        >>> from textgym.tokenizer import tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> env = TokenObservation(gym.make("textgym/Sudoku-v0"), tok)
        >>> ids, info = env.reset(seed=0)
        >>> ids.dtype.name, tok.decode(ids).endswith("<|im_start|>assistant\\n")
        ('int32', True)
        >>> sampled = tok.encode("<answer>?</answer>", add_special_tokens=False) + [tok.eos_token_id]
        >>> new_ids, reward, terminated, truncated, info = env.step(sampled)
        >>> bool((new_ids[ids.size : ids.size + len(sampled)] == sampled).all())  # kept verbatim
        True
    """

    def __init__(self, env: gym.Env, tokenizer: Any, *, chat_template: str | None = None, on_template_break: OnTemplateBreak = "raise"):
        super().__init__(env)
        if on_template_break not in ("raise", "new_sample"):
            raise ValueError(f"on_template_break must be 'raise' or 'new_sample', got {on_template_break!r}")
        self.on_template_break = on_template_break
        if not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise TypeError(f"expected a Hugging Face tokenizer with a chat template, got {type(tokenizer).__name__}")
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise TemplateError("the tokenizer has no chat template: set tokenizer.chat_template or pass chat_template=")
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.vocab_size = len(tokenizer)
        self.observation_space = TokenSequence(self.vocab_size)
        self.action_space = TokenSequence(self.vocab_size)
        added = getattr(tokenizer, "added_tokens_decoder", {})
        self._special_ids = {int(i) for i in tokenizer.all_special_ids} | {int(i) for i, t in added.items() if t.special}
        self._special_texts: dict[int, str] = {}  # a special id's decoded text, once
        self._tools: list[dict[str, Any]] | None = None
        self._tool_prompt = probe_tool_prompt(tokenizer, chat_template)  # tools reach templates that drop them
        self._renderer = TemplateRenderer(tokenizer, chat_template)
        self._codec = Codec(tokenizer)
        # Every id the byte codec decodes is then a token id (see _sampled_text).
        self._ids_known_valid = self._codec.bytes is not None and self._codec.bytes.size <= self.vocab_size
        self._thawed: dict[int, tuple] = {}  # id(message) -> (message, thawed), for one episode
        self._closing_text: str | None = None  # the template's text after an assistant turn
        # The template's rendering of the conversation so far (`_rendered`): `_head`, then the texts
        # of `_tail` where a tail is rendered (the step's part, see _one_render_bridge): (start, the
        # texts of the loop's bodies of the messages from start on, then the footer's).
        self._head = ""
        self._tail: tuple[int, list[str]] | None = None
        if on_template_break == "raise":
            self._probe()
        self._conversation: tuple = ()
        # What the template is given for the conversation so far (tool_prompt's rewrite), grown one
        # step at a time, and how many messages of the conversation it covers.
        self._view: list[dict[str, Any]] = []
        self._view_tools: list[dict[str, Any]] | None = None
        self._view_size = -1
        self._chat: list[dict[str, Any]] = []  # the view prepared for the template (tail renderings)
        # The context as appended chunks: policy turns (sampled ids) and env text, in order.
        self._chunks: list[int] = []  # their sizes
        # The chunks joined, as the bytes of int32 ids (appending a turn writes only its ids, and
        # no numpy call: between env steps, which evict the caches, each distinct numpy call cost
        # 5-20 us); never handed out (copies are).
        self._context = bytearray()
        self._policy: list[bool] = []
        self._logprobs: list[np.ndarray | None] = []  # one per policy chunk
        self._done = True
        self._samples: SampleSplitter | None = None  # on_template_break="new_sample": the samples so far
        self.env_seconds = 0.0  # in the wrapped env's reset and step, since construction
        self.render_seconds = 0.0  # in this wrapper's reset and step around them

    # ----- Gymnasium API -----

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self._timed(self._reset_tokens, seed=seed, options=options)

    def step(self, action: Any):
        return self._timed(self._step_tokens, action)

    def _timed(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)``, its seconds outside the wrapped env added to ``render_seconds``."""
        start, inner = time.perf_counter(), self.env_seconds
        try:
            return method(*args, **kwargs)
        finally:
            self.render_seconds += time.perf_counter() - start - (self.env_seconds - inner)

    def _reset_tokens(self, *, seed: int | None, options: dict[str, Any] | None):
        prompt_ids = None
        if options and "prompt_ids" in options:  # this wrapper's option: the env never sees it
            options = dict(options)
            prompt_ids = self._prompt_ids(options.pop("prompt_ids"))
        start = time.perf_counter()
        conversation, info = self.env.reset(seed=seed, options=options)
        self.env_seconds += time.perf_counter() - start
        self._conversation = _as_conversation(conversation)
        tools = list(info.get("tools") or ())
        # The same schemas from episode to episode (compared with the copy made of them): the same
        # list, which the renderer prepares once. Copying 27 Workplace schemas cost ~1 ms a reset.
        if tools != (self._tools or []):
            self._tools = [thaw(t) for t in tools] or None
        self._chunks, self._policy, self._logprobs = [], [], []
        self._context = bytearray()  # a new one: the last episode's trajectory holds the old one
        self._done = False
        self._thawed = {}
        # transformers' own rendering, which also checks the faster renderer's (_chat_templates/render.py)
        self._view, self._view_tools = self._tool_prompt.apply([self._plain(m) for m in self._conversation], self._tools)
        self._view_size = len(self._conversation)
        self._rendered = self._renderer.check(self._view, self._view_tools, True)
        self._chat = []
        self._anchor()
        self._append((self._encode_raw(self._rendered) if prompt_ids is None else prompt_ids.tobytes(), False))
        if self.on_template_break == "new_sample":
            self._samples = SampleSplitter([self._plain(m) for m in self._conversation], self._rendered)
        return self._ids(), info

    def _prompt_ids(self, ids: Any) -> np.ndarray | None:
        """The ``prompt_ids`` reset option as int32 ids (None: render the conversation), checked.

        A branch of an episode (``options={"state": s, "prompt_ids": ids}``) continues the exact
        context its source episode's policy saw at that turn: its sampled ids verbatim, which a
        BPE tokenizer need not give back when the template's rendering is encoded again.

        Raises:
            ValueError: Not a non-empty 1-D array of token ids, or with ``on_template_break="new_sample"``
                (whose samples start with the template's rendering).
        """
        if ids is None:
            return None
        if self.on_template_break == "new_sample":
            raise ValueError('the prompt_ids reset option needs on_template_break="raise": a new sample starts with the rendering')
        array = np.asarray(ids)
        if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu" or array.min() < 0 or array.max() >= self.vocab_size:
            raise ValueError(f"expected prompt_ids as a non-empty 1-D array of token ids below {self.vocab_size}, got {array!r:.80}")
        return array.astype(np.int32)

    def _step_tokens(self, action: Any):
        if self._done:
            raise ResetNeeded("call reset() before step()" if not self._chunks else "the episode has ended; call reset()")
        if self._samples is not None:
            return self._step_samples(action)
        previous = self._conversation
        cut = False  # sampled ids that end without a stop token: the sampler's max_new_tokens cut the turn
        if _is_mapping(action) and "ids" not in action:
            # An assistant message (OpenAI shape, tool calls included): the env reads it as such
            # and the policy tokens are the template's rendering of what the env recorded.
            closing = self._closing(previous)
            result = self._step_env(action, previous)
            ids, logprobs = self._message_ids(previous, closing), None
            bridge = closing + self._env_turn(previous, self._conversation[len(previous) :])
        else:
            ids, logprobs = self._sampled(action)
            # The closing measured at an earlier step: the one-render check below confirms it.
            closing = self._closing(previous) if self._closing_text is None else self._closing_text
            stop, cut, kept = self._stop(ids, action, closing)
            result = self._step_env(self._sampled_text(ids, ids[:-1] if kept else ids), previous)
            bridge = self._one_render_bridge(previous, closing)
            if bridge is None:  # the slow path, which re-measures the closing and names any fault
                closing = self._closing(previous)
                if kept != (bool(stop) and closing.startswith(stop)):
                    raise TemplateError("the chat template closes assistant turns differently from turn to turn; " + _FIX)
                bridge = closing + self._env_turn(previous, self._conversation[len(previous) :])
            if kept:
                bridge = bridge[len(stop) :]
        reward, terminated, truncated, info = result
        env_ids = self._encode_raw(bridge)  # may raise (a lossy tokenizer): before the context changes
        self._logprobs.append(logprobs)
        self._append((_raw(ids), True), (env_ids, False))
        return self._ids(), reward, terminated, truncated, self._ended(info, cut)

    def _step_samples(self, action: Any):
        """``step`` with ``on_template_break="new_sample"``: one rendering of the whole conversation
        per step, compared with the current sample's text; where it does not extend it, a new
        sample starts (see :class:`~textgym.wrappers.token_samples.SampleSplitter`)."""
        previous, samples = self._conversation, self._samples
        assert samples is not None  # reset makes one in this mode
        prompt = samples.text  # the rendering of samples.messages, with the generation prompt
        # The template's closing of an assistant turn, after a placeholder's text (a template may
        # frame the last turn with more than its generation prompt, e.g. an empty think block).
        framed = self._render([*samples.messages, {"role": "assistant", "content": _PLACEHOLDER}], generation_prompt=False)
        at = framed.rfind(_PLACEHOLDER)
        closing = framed[at + len(_PLACEHOLDER) :] if at >= 0 else ""
        reasoning, cut = None, False
        if _is_mapping(action) and "ids" not in action:  # an assistant message: its rendering is the policy's text
            result = self._step_env(action, previous)
            closed = self._render([*samples.messages, self._plain(self._conversation[len(previous)])], False)
            if not (closed.startswith(prompt) and closed.endswith(closing)):
                raise TemplateError("the chat template does not frame this assistant message like others; " + _FIX)
            ids, logprobs = self._encode(closed[len(prompt) : len(closed) - len(closing)]), None
        else:
            ids, logprobs = self._sampled(action)
            _, cut, kept = self._stop(ids, action, closing)
            reasoning, content = split_reasoning(self._sampled_text(ids, ids[:-1] if kept else ids))
            result = self._step_env(content, previous)  # the env never sees the reasoning block
        reward, terminated, truncated, info = result
        new = [self._plain(m) for m in self._conversation[len(previous) :]]
        if reasoning is not None:
            new[0] = {**new[0], "reasoning_content": reasoning}
        rendered = self._render([*samples.messages, *new], generation_prompt=not self._done)
        env_text, fresh = samples.advance(self._decode(ids), new, rendered, self._done)
        env_ids = self._encode_raw(env_text)  # may raise (a lossy tokenizer): before the context changes
        self._logprobs.append(logprobs)
        self._append((_raw(ids), True))
        if fresh:
            samples.starts.append((len(self._chunks), len(self._context)))
        self._append((env_ids, False))
        return self._ids(), reward, terminated, truncated, self._ended(info, cut)

    def _stop(self, ids: np.ndarray, action: Any, closing: str) -> tuple[str, bool, bool]:
        """``(stop, cut, kept)`` of a sampled turn: the text of its final special token (``""``
        if none), whether it ends without one (the sampler's max_new_tokens cut it), and whether
        that token opens the turn's closing (``<|im_end|>``, ``<|eot_id|>``: part of the
        trajectory but not of the message text; other special tokens stay as text)."""
        last = int(ids[-1]) if len(ids) else None
        stop = self._special_text(last) if last in self._special_ids else ""
        cut = not isinstance(action, str) and len(ids) > 0 and not stop
        return stop, cut, bool(stop) and closing.startswith(stop)

    def _ended(self, info: dict[str, Any], cut: bool) -> dict[str, Any]:
        """``info`` of a step, with the trajectory once the episode has ended (and ``length`` as
        its end reason when a cut turn ended it)."""
        if self._done:
            info = dict(info, trajectory=self.trajectory())
            if cut and info.get("end_reason") in ("failure", "max_turns"):
                info["end_reason"] = "length"
        return info

    def _step_env(self, action: Any, previous: tuple):
        start = time.perf_counter()
        conversation, reward, terminated, truncated, info = self.env.step(action)
        self.env_seconds += time.perf_counter() - start
        self._conversation = _as_conversation(conversation, previous)
        if len(self._conversation) <= len(previous) or _get(self._conversation[len(previous)], "role") != "assistant":
            raise TextGymError("TokenObservation needs an env whose step appends the assistant's message, then the env's")
        self._done = bool(terminated or truncated)
        return reward, terminated, truncated, info

    def trajectory(self) -> TokenTrajectory:
        """The token trajectory so far (``info["trajectory"]`` at the end of an episode)."""
        # Once the episode has ended the context is final (reset starts a new one), so the record
        # takes it as it is instead of a copy (~20 us a Workplace episode); before that it gets a
        # copy, since the context still grows (and a view of it would stop it from growing).
        ids = np.frombuffer(self._context if self._done else bytearray(self._context), np.int32)
        # As bytes, one numpy call (not one per turn): see _context.
        mask = np.frombuffer(bytearray().join(_MASK[p] * n for n, p in zip(self._chunks, self._policy)), np.int8)
        spans, start = [], 0
        for size, is_policy in zip(self._chunks, self._policy):
            if is_policy:
                spans.append((start, start + size))
            start += size
        logprobs = None
        if spans and all(lp is not None for lp in self._logprobs):
            logprobs = np.zeros(ids.size, np.float32)
            for (a, b), lp in zip(spans, self._logprobs):
                logprobs[a:b] = lp
        if self._samples is None:
            return TokenTrajectory(ids, mask, logprobs, tuple(spans), self._conversation)
        starts = [0, *(offset >> 2 for _, offset in self._samples.starts), ids.size]
        sample_spans = tuple(zip(starts[:-1], starts[1:])) if len(starts) > 2 else None
        return TokenTrajectory(ids, mask, logprobs, tuple(spans), tuple(self._samples.messages), sample_spans)

    # ----- tokens -----

    def _ids(self) -> np.ndarray:
        # A copy: Gymnasium's checker requires each call's observation to share no memory with
        # another's (a read-only view of the context would save a tenth of a step here).
        start = self._samples.starts[-1][1] if self._samples is not None and self._samples.starts else 0
        return np.frombuffer(bytearray(self._context[start:]), np.int32)  # the current sample's; the caller may write into it

    def _append(self, *chunks: tuple[bytes, bool]) -> None:
        """Append ``(raw, is_policy)`` chunks to the context, in order (``raw``: int32 ids as bytes)."""
        for raw, is_policy in chunks:
            self._chunks.append(len(raw) >> 2)
            self._policy.append(is_policy)
            self._context += raw

    def _encode_raw(self, text: str) -> bytes:
        """:meth:`_encode` as the bytes of int32 ids."""
        return self._codec.encode_raw(text) if self._codec.lossless else self._encode(text).tobytes()

    def _encode(self, text: str) -> np.ndarray:
        ids = self._codec.encode(text)
        if not self._codec.lossless and self._codec.decode(ids) != text:
            raise TemplateError(
                f"{type(self.tokenizer).__name__} does not decode its ids back to the text it encoded "
                f"({text[:60]!r}...); token-in/token-out needs a lossless tokenizer (byte-level BPE such as "
                "Qwen's or Llama 3's; SentencePiece tokenizers that add a prefix space are not)"
            )
        return ids

    def _decode(self, ids: np.ndarray | list[int]) -> str:
        return self._codec.decode(ids)

    def _special_text(self, i: int) -> str:
        text = self._special_texts.get(i)
        if text is None:
            text = self._special_texts[i] = self._decode(np.array([i], np.int32))
        return text

    def _sampled(self, action: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """Read an action as (ids, logprobs or None): ids a 1-D int array, checked to be token ids
        by :meth:`_sampled_text`."""
        logprobs = None
        if type(action) is list:  # as a sampler's list, without numpy where every item is an int32
            ids = _int32s(action)
            if ids is not None:
                return ids, None
        if isinstance(action, str):
            return self._encode(action), None
        if _is_mapping(action):
            action, logprobs = action["ids"], action.get("logprobs")
        ids = np.asarray(action)
        if ids.ndim != 1 or not (ids.size == 0 or ids.dtype.kind in "iu"):
            raise InvalidAction(
                "expected the generated ids as a 1-D int array, a list of ints or text, "
                f"got {type(action).__name__} of dtype {ids.dtype} and shape {ids.shape}"
            )
        if logprobs is not None:
            logprobs = np.asarray(logprobs, dtype=np.float32)
            if logprobs.shape != ids.shape:
                raise InvalidAction(f"expected one logprob per id ({ids.size}), got shape {logprobs.shape}")
        return ids, logprobs

    def _sampled_text(self, ids: np.ndarray, body: np.ndarray) -> str:
        """The text of ``body`` (``ids``, or ``ids`` without its stop token), after checking that
        every id of ``ids`` is a token id.

        The byte codec's decoding fails on any id it does not know, which are all ids outside the
        vocabulary: where it succeeds, the range check is implied (a stop token left out of
        ``body`` is a special id). Checking separately cost more than the decoding.
        """
        text = self._codec.decode_known(body) if self._ids_known_valid else None
        if text is None:
            ids, body = np.asarray(ids), np.asarray(body)
            if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
                raise InvalidAction(f"token ids must be in [0, {self.vocab_size}), got min {ids.min()} and max {ids.max()}")
            text = self._decode(body)
        return text

    # ----- the chat template -----

    def _render(self, messages: Sequence[Mapping[str, Any]], generation_prompt: bool) -> str:
        messages, tools = self._tool_prompt.apply([self._plain(m) for m in messages], self._tools)
        return self._renderer.render(messages, tools, generation_prompt)

    def _plain(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """``thaw(message)``, once per message: the messages never change, and every step renders them all."""
        hit = self._thawed.get(id(message))
        if hit is None or hit[0] is not message:
            hit = self._thawed[id(message)] = (message, thaw(message))
        return hit[1]

    def _one_render_bridge(self, previous: tuple, closing: str) -> str | None:
        """The text after the sampled turn, from one rendering of the conversation, or None.

        The rendering must be the previous one, the assistant's text verbatim, the closing and
        then the env's part: that one comparison is the prefix check of the three renderings in
        :meth:`_closing` and :meth:`_env_turn` (they were ~20 ms per Sudoku episode).
        A turn it does not fit (tool calls in the message, a template that trims or rewrites)
        goes the slow way, which checks each part and explains a failure. Where the template has
        the shape of :mod:`~textgym._chat_templates.tail`, both renderings are compared from the
        tail's start on: what comes before it is the same in both.
        """
        message = self._conversation[len(previous)]
        content = _get(message, "content")
        if _get(message, "tool_calls") or not isinstance(content, str):
            return None
        if self._view_size != len(previous):  # the slow path ran: rewrite the conversation anew
            self._view, self._view_tools = self._tool_prompt.apply([self._plain(m) for m in previous], self._tools)
            self._view_size, self._chat = len(previous), []  # (and no tail: the slow path set `_rendered`)
        # tool_prompt rewrites each message by itself (only the tools go into the first), so the
        # new messages' rewrite extends the one of the messages before them.
        new = [thaw(m) for m in self._conversation[len(previous) :]]  # new objects: nothing to look up
        if self._tool_prompt.inline_calls:  # (else apply() would hand these dicts back as they are)
            new, _ = self._tool_prompt.apply(new, None)
        view = self._view + new
        tail = self._tail or self._anchor()
        if tail is None:  # a template that only renders whole: no tail, `_head` is all
            after = self._renderer.render(view, self._view_tools, not self._done)
            head = self._rendered + content + closing
            if not after.startswith(head):
                return None
            self._rendered, self._view, self._view_size, self._chat = after, view, len(self._conversation), []
            return closing + after[len(head) :]
        # The same check on the part of the rendering that the step can change: the header and
        # the bodies of the messages before `first` (the earliest a new message can change) are
        # the same in both (_chat_templates/tail.py), so only the bodies from `first` on are rendered anew.
        start, parts = tail
        reach = self._renderer.reach(self._view_tools is not None)
        assert reach is not None  # the template has a tail, so its reach is known
        first = max(start, len(self._view) - reach)
        chat = self._chat + self._renderer.prepare(new)
        fresh = self._renderer.tail(chat, first, self._view_tools, not self._done)
        if fresh is None:  # a message holds the marker between bodies
            return None
        after = "".join(fresh)
        head = "".join(parts[first - start :]) + content + closing
        if not after.startswith(head):
            return None
        # `_head` stays: the whole rendering is joined only where a slower path needs it.
        self._view, self._view_size, self._chat = view, len(self._conversation), chat
        self._tail = (start, parts[: first - start] + fresh)
        return closing + after[len(head) :]

    @property
    def _rendered(self) -> str:
        """The template's rendering of the conversation so far."""
        return self._head if self._tail is None else self._head + "".join(self._tail[1])

    @_rendered.setter
    def _rendered(self, text: str) -> None:  # a whole rendering: the next tail step anchors anew
        self._head, self._tail = text, None

    def _anchor(self) -> tuple[int, list[str]] | None:
        """Set and return the tail ``(start, texts)``: the rendering of the conversation so far from
        the earliest message that a new one can change on (:meth:`TemplateRenderer.tail`), or None
        for a template that only renders whole (or a marker in a message: whole this time). The
        texts must end the whole rendering: else the template renders whole for good."""
        rendered = self._rendered
        self._rendered = rendered  # no tail, unless one is set below
        reach = self._renderer.reach(self._view_tools is not None)
        if reach is None:
            return None
        start = max(0, len(self._view) - reach)
        if len(self._chat) != len(self._view):
            self._chat = self._renderer.prepare(self._view)
        parts = self._renderer.tail(self._chat, start, self._view_tools, True)
        if parts is None:
            return None
        text = "".join(parts)
        if not rendered.endswith(text):
            self._renderer.drop_tail()
            return None
        self._head, self._tail = rendered[: len(rendered) - len(text)], (start, parts)
        return self._tail

    def _probe(self) -> None:
        """Fail at construction for a template that rewrites past turns (the per-step checks only
        see what an episode's messages trigger, e.g. a ``<think>`` block the policy has not yet
        written). Templates that cannot render this generic exchange are left to those checks."""
        from jinja2.exceptions import TemplateError as JinjaError

        talk = (
            {"role": "user", "content": "Hi."},
            {"role": "assistant", "content": "<think>Plan.</think>Hello."},
            {"role": "user", "content": "Go on."},
        )
        try:
            steps = [self._render(talk[:1], True), self._render(talk[:2], False), self._render(talk, True)]
        except JinjaError:
            return
        if not (steps[1].startswith(steps[0]) and steps[2].startswith(steps[1])):
            raise TemplateError(
                "the chat template is not prefix-preserving: a later message changes how an earlier turn "
                "renders (here an assistant turn with a <think> block followed by a user turn); " + _FIX
            )

    def _closing(self, previous: tuple) -> str:
        """The text that ends an assistant turn after its content (``<|im_end|>\n`` for ChatML).

        Measured with a placeholder for the content, since templates may trim or escape the real one.
        """
        prompt = self._rendered  # the rendering of ``previous`` with the generation prompt
        framed = self._render((*previous, {"role": "assistant", "content": _PLACEHOLDER}), generation_prompt=False)
        if not framed.startswith(prompt + _PLACEHOLDER):
            raise TemplateError(
                "the chat template does not render an assistant turn as its generation prompt followed by the "
                f"message text verbatim (the turn renders as {framed[len(prompt) - 40 :][:120]!r}); " + _FIX
            )
        self._closing_text = framed[len(prompt) + len(_PLACEHOLDER) :]
        return self._closing_text

    def _message_ids(self, previous: tuple, closing: str) -> np.ndarray:
        """Policy ids for an assistant message: its rendering between generation prompt and closing."""
        closed = self._render((*previous, self._conversation[len(previous)]), generation_prompt=False)
        if not (closed.startswith(self._rendered) and closed.endswith(closing)):
            raise TemplateError("the chat template does not frame this assistant message like others; " + _FIX)
        text = closed[len(self._rendered) : len(closed) - len(closing)]
        return self._encode(text)

    def _env_turn(self, previous: tuple, new: Sequence[Mapping]) -> str:
        """What rendering ``new`` (the assistant's message as the env recorded it, then the env's
        messages) appends after the assistant turn, with the next generation prompt unless the
        episode ended."""
        closed = self._render((*previous, new[0]), generation_prompt=False)
        after = self._render((*previous, *new), generation_prompt=not self._done)
        if not (closed.startswith(self._rendered) and after.startswith(closed)):
            raise TemplateError(
                "the chat template is not prefix-preserving: appending messages changed how earlier turns "
                "render (for example, reasoning dropped from past assistant turns); " + _FIX
            )
        self._rendered = after
        return after[len(closed) :]


def _int32s(action: list) -> array | None:
    """``action`` as an ``array("i")`` where every item is an int (or has ``__index__``) in int32's
    range and not every item is a bool, else None (``np.asarray`` then gives the same ids or
    refuses the action: a float, an all-bool list, an id past int32)."""
    try:
        ids = array("i", action)
    except (TypeError, OverflowError):
        return None
    if action and isinstance(action[0], (bool, np.bool_)) and all(isinstance(x, (bool, np.bool_)) for x in action):
        return None
    return ids


def _raw(ids: np.ndarray | array) -> bytes:
    """Ids (checked token ids) as the bytes of int32 ids."""
    return ids.tobytes() if type(ids) is array else ids.astype(np.int32, copy=False).tobytes()


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, answered first for the usual actions (an ABC check is slow)."""
    kind = type(value)
    return kind is not list and kind is not np.ndarray and kind is not str and isinstance(value, Mapping)


def _get(message: Mapping[str, Any], key: str) -> Any:
    """``message.get(key)``: for the envs' FrozenDicts the dict's own ``get`` (Mapping's is Python)."""
    return message._data.get(key) if type(message) is FrozenDict else message.get(key)


def _as_conversation(conversation: Any, known: tuple = ()) -> tuple:
    """``conversation`` as a tuple of messages; those that are ``known``'s (the same objects, at
    the same places) were checked before."""
    if isinstance(conversation, Sequence):
        conversation = tuple(conversation)
        # The known messages compared as one tuple (identity first, in C): a generator over the
        # whole conversation was ~10 us of a Workplace step after the env's.
        old = conversation[: len(known)]
        if (old == known or all(m is k or isinstance(m, Mapping) for m, k in zip(old, known))) and all(
            type(m) is FrozenDict or isinstance(m, Mapping) for m in conversation[len(known) :]
        ):
            return conversation
    raise TextGymError(
        f"TokenObservation needs an env whose observation is the conversation (a sequence of messages), got {type(conversation).__name__}"
    )
