"""Any OpenAI-compatible chat endpoint as a policy: vLLM, SGLang or a hosted API.

Used for evaluation and reward profiling of real models. The conversation is sent as it is,
tools go natively as ``tools=`` (from the schemas the env declared at reset), and a reply's
``tool_calls`` come back as an OpenAI assistant-message dict, which every env accepts as an
action; a reply cut by ``max_tokens`` (``finish_reason == "length"``) is flagged in
``PolicyOutput.cut``, so an episode it ends is recorded as ``length``. Requests of a batch run
concurrently in threads; timeouts and retries (with backoff on timeouts, connection errors, 429
and 5xx) are the ``openai`` client's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from textgym.error import EndpointError, require
from textgym.messages import thaw
from textgym.policies.base import PolicyOutput, SlotTools


class OpenAIPolicy:
    """Chat completions from an OpenAI-compatible server, one request per env, concurrently.

    Args:
        base_url: The server's API root, e.g. ``http://localhost:8000/v1`` for ``vllm serve``.
        model: Model name as the server knows it.
        api_key: Defaults to ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers ignore it).
        concurrency: Most requests in flight at once.
        timeout: Seconds before one request attempt is abandoned.
        max_retries: Retries per request after a timeout, connection error, 429 or 5xx.
        temperature: Sampling temperature.
        max_tokens: Most tokens per reply (None: the server's default).
        logprobs: Ask for the sampled tokens' logprobs (returned whenever the server gives them).
        seed: Sent as the request ``seed`` where the server honours it.
        extra_body: Extra JSON fields for the server (e.g. vLLM's ``chat_template_kwargs``).

    Example:
        >>> policy = OpenAIPolicy("http://localhost:8000/v1", "Qwen/Qwen3-0.6B")  # doctest: +SKIP
        >>> out = policy.act(observations, infos)  # doctest: +SKIP
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 2,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        logprobs: bool = False,
        seed: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ):
        if int(concurrency) < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if int(max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        openai = require("openai", "openai")
        self.base_url = base_url
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        self.request: dict[str, Any] = {"model": model, "temperature": float(temperature)}
        if max_tokens is not None:
            self.request["max_tokens"] = int(max_tokens)
        if logprobs:
            self.request["logprobs"] = True
        if seed is not None:
            self.request["seed"] = int(seed)
        if extra_body:
            self.request["extra_body"] = dict(extra_body)
        self.tools = SlotTools()
        self._pool = ThreadPoolExecutor(max_workers=int(concurrency), thread_name_prefix="textgym-openai")

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        self.tools.update(infos)
        for obs in observations:
            if not isinstance(obs, (tuple, list)):
                raise TypeError(
                    f"OpenAIPolicy needs chat observations (a sequence of messages), got {type(obs).__name__}; "
                    "use it on text envs, not TokenObservation envs"
                )
        replies = list(self._pool.map(self._complete, observations, [self.tools[i] for i in range(len(observations))]))
        actions = [a for a, _, _ in replies]
        logprobs = [lp for _, lp, _ in replies]
        cut = [c for _, _, c in replies]
        return PolicyOutput(actions, logprobs if any(lp is not None for lp in logprobs) else None, cut)

    def close(self) -> None:
        """Stop the request threads and the HTTP connection pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def _complete(self, conversation: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]]):
        import openai

        kwargs = dict(self.request, messages=thaw(conversation))
        if tools:
            kwargs["tools"] = tools
        try:
            response = self.client.chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            raise EndpointError(f"{self.base_url}: no reply within {self.timeout:g} s after {self.max_retries} retries") from None
        except openai.APIStatusError as exc:
            raise EndpointError(
                f"{self.base_url}: HTTP {exc.status_code} after {self.max_retries} retries: {_short(exc.message)}"
            ) from None
        except openai.APIConnectionError as exc:
            raise EndpointError(f"{self.base_url}: cannot connect ({exc})") from None
        if not response.choices:
            raise EndpointError(f"{self.base_url}: the reply has no choices")
        choice = response.choices[0]
        return (*action_from_choice(choice), choice.finish_reason == "length")  # max_tokens cut the reply


def action_from_choice(choice: Any) -> tuple[str | dict[str, Any], np.ndarray | None]:
    """The env action (text, or an assistant dict with ``tool_calls``) and logprobs of one choice."""
    message = choice.message
    content = message.content or ""
    action: str | dict[str, Any] = content
    if message.tool_calls:
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
            }
            for call in message.tool_calls
        ]
        action = {"role": "assistant", "content": content, "tool_calls": calls}
    logprobs = None
    tokens = getattr(getattr(choice, "logprobs", None), "content", None)
    if tokens:
        logprobs = np.asarray([t.logprob for t in tokens], dtype=np.float32)
    return action, logprobs


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
