"""Put on PYTHONPATH for an ``inspect eval`` subprocess on a machine without network: Inspect's
mock model counts tokens with tiktoken's o200k_base encoding, a download on first use; here it
counts a token per 4 characters instead. Nothing else of Inspect changes."""

from inspect_ai.model._providers.mockllm import MockLLM


async def _count_text_tokens(self, text: str) -> int:
    return max(1, len(text) // 4)


MockLLM.count_text_tokens = _count_text_tokens
