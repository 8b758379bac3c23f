"""Keys and values kept from one sampler call to the next, so an episode's turn prefills only its new tokens.

A multi-turn episode calls the sampler once per turn, and each turn's context extends the one
before (the last prompt, the sampled ids, the env's reply: what
:class:`~textgym.wrappers.TokenObservation` guarantees). After a call the sampler stores each row's
keys and values under the row's tokens; the next call looks up, for every prompt, the stored
context that shares the longest prefix with it and prefills only what follows (at least the last
token, whose logits sample the first new one). Entries are found by content, not by episode: a
prompt that continues nothing stored simply misses, so no row can ever read another context's keys.

Memory stays bounded: a stored context that a prompt extends whole is dropped once the longer one
is stored (one entry per live episode), :meth:`ContextCache.release` frees an ended episode's
entry, and the least recently used entries go when the total passes ``max_bytes``. Entries hold
one set of weights' keys: :meth:`ContextCache.sync` empties the cache when the weights change.

Both backends use this store; what an entry's ``kv`` is (a numpy array, a tensor) is theirs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CONTEXT_CACHE_MB = 1024  # the samplers' default cap: ~22k tokens of SmolLM2-135M's float32 keys and values
BLOCK = 16  # tokens per hashed block of the index: a lookup hashes a prompt once, block by block


@dataclass(eq=False)
class Entry:
    """One stored context: its tokens and the keys and values of every one of them."""

    tokens: np.ndarray  # (L,) int32
    kv: Any  # the backend's keys and values of the L tokens, e.g. (layers, 2, K, L, D)
    nbytes: int
    keys: list[tuple[int, int]] = field(default_factory=list)  # its blocks' index keys


@dataclass(frozen=True)
class Hit:
    """What a prompt can reuse: ``length`` tokens of ``entry`` (0 and None: nothing)."""

    entry: Entry | None
    length: int
    extends: bool  # the prompt continues the whole entry (the entry is superseded after the call)


MISS = Hit(None, 0, False)


def _block_keys(tokens: np.ndarray):
    """``(blocks, chained hash)`` of every whole block of ``tokens``, in order (a generator)."""
    h = 0
    data = memoryview(np.ascontiguousarray(tokens, dtype=np.int32)).cast("B")
    step = BLOCK * 4
    for k in range(1, len(tokens) // BLOCK + 1):
        h = hash((h, bytes(data[(k - 1) * step : k * step])))
        yield k, h


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    same = a[:n] == b[:n]
    return n if same.all() else int(np.argmin(same))


class ContextCache:
    """Sampled contexts' keys and values, by content, least recently used first out.

    Args:
        max_bytes: The most bytes of keys and values held; past it the least recently used
            entries are dropped (an entry larger than it is never stored).

    Attributes:
        reused_tokens, prefilled_tokens: Prompt tokens read from the cache and run through the
            model since the cache was made (the samplers count them; benchmarks read them).
    """

    def __init__(self, max_bytes: int):
        if int(max_bytes) < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.reused_tokens = 0
        self.prefilled_tokens = 0
        self._lru: OrderedDict[int, Entry] = OrderedDict()  # id(entry) -> entry, oldest first
        self._index: dict[tuple[int, int], dict[int, Entry]] = {}  # block key -> entries holding it
        self._weights: Hashable = None

    def __len__(self) -> int:
        return len(self._lru)

    def sync(self, weights: Hashable) -> None:
        """Empty the cache if ``weights`` (a version stamp of the model's weights) changed."""
        if weights != self._weights:
            self.clear()
            self._weights = weights

    def clear(self) -> None:
        self._lru.clear()
        self._index.clear()
        self.nbytes = 0

    def lookup(self, prompt: np.ndarray) -> Hit:
        """The stored context sharing the longest prefix with ``prompt`` (at most all but its last token)."""
        candidates: dict[int, Entry] = {}
        for key in _block_keys(prompt):
            found = self._index.get(key)
            if not found:
                break
            candidates = found
        best, shared = None, 0
        for entry in candidates.values():
            n = common_prefix(entry.tokens, prompt)
            if n > shared:
                best, shared = entry, n
        if best is None:
            return MISS
        self._lru.move_to_end(id(best))
        return Hit(best, min(shared, len(prompt) - 1), shared == len(best.tokens))

    def add(self, tokens: np.ndarray, kv: Any, nbytes: int) -> None:
        """Store ``kv``, the keys and values of ``tokens``, then evict down to ``max_bytes``."""
        tokens = np.asarray(tokens, dtype=np.int32)
        if nbytes > self.max_bytes or len(tokens) < BLOCK:
            return
        same = self.lookup(tokens)
        if same.extends and len(same.entry.tokens) == len(tokens):
            return  # the very same context is stored already (two rows sampled the same ids)
        entry = Entry(tokens, kv, int(nbytes))
        for key in _block_keys(tokens):
            entry.keys.append(key)
            self._index.setdefault(key, {})[id(entry)] = entry
        self._lru[id(entry)] = entry
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes:
            self.drop(next(iter(self._lru.values())))

    def drop(self, entry: Entry) -> None:
        """Forget ``entry`` (no-op if it is gone already)."""
        if self._lru.pop(id(entry), None) is None:
            return
        self.nbytes -= entry.nbytes
        for key in entry.keys:
            holders = self._index[key]
            del holders[id(entry)]
            if not holders:
                del self._index[key]

    def release(self, context: np.ndarray) -> None:
        """Free the entry of an episode that ended with ``context`` (the stored context it extends whole)."""
        hit = self.lookup(np.asarray(context, dtype=np.int32))
        if hit.extends:
            self.drop(hit.entry)
