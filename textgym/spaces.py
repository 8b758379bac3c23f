"""Gymnasium spaces for conversations, assistant turns and token sequences.

These are "object" spaces: their values are Python objects (tuples of messages, strings,
variable-length arrays) that Gymnasium batches as tuples. Gymnasium's async vector env puts
observations into shared memory by default and raises for unknown spaces, so we register
shared-memory hooks for :class:`ObjectSpace` that hand each value over through a
``multiprocessing`` manager instead; ``shared_memory=False`` and sync mode use plain pickling.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from textgym.messages import ROLES, freeze

_PRINTABLE = np.array(list(string.ascii_letters + string.digits + string.punctuation + " \n"))


class ObjectSpace(spaces.Space):
    """Base class: a non-numeric space whose values are compared by ``contains`` only."""

    def __init__(self, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__.get("_key") == other.__dict__.get("_key")

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.__dict__.get("_key")))

    def _random_text(self, max_len: int = 32) -> str:
        n = int(self.np_random.integers(0, max_len + 1))
        return "".join(self.np_random.choice(_PRINTABLE, size=n))


class Conversation(ObjectSpace):
    """A tuple of chat messages (mappings with ``role`` and str ``content``)."""

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, tuple)
            and len(x) > 0
            and all(isinstance(m, Mapping) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in x)
        )

    def sample(self, mask: Any = None, probability: Any = None) -> tuple:
        return (freeze({"role": "user", "content": self._random_text()}),)

    def __repr__(self) -> str:
        return "Conversation()"


class AssistantTurn(ObjectSpace):
    """An assistant turn: raw text, or an OpenAI-style assistant message mapping."""

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return True
        return isinstance(x, Mapping) and x.get("role", "assistant") == "assistant"

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return self._random_text()

    def __repr__(self) -> str:
        return "AssistantTurn()"


class TokenSequence(ObjectSpace):
    """A 1-D ``int32`` array of token ids of any length below ``vocab_size``."""

    def __init__(self, vocab_size: int, max_length: int = 1 << 20, seed: Any = None):
        self.vocab_size = int(vocab_size)
        self.max_length = int(max_length)
        self._key = (self.vocab_size, self.max_length)
        super().__init__(seed=seed)

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, np.ndarray)
            and x.ndim == 1
            and x.dtype == np.int32
            and x.size <= self.max_length
            and (x.size == 0 or (x.min() >= 0 and x.max() < self.vocab_size))
        )

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        n = int(self.np_random.integers(1, 17))
        return self.np_random.integers(0, self.vocab_size, size=n).astype(np.int32)

    def __repr__(self) -> str:
        return f"TokenSequence(vocab_size={self.vocab_size})"


# --- async vector env hooks: values travel through a manager list, one slot per sub-env ---


@create_shared_memory.register(ObjectSpace)
def _create(space: ObjectSpace, n: int = 1, ctx: Any = None):
    import multiprocessing as mp

    manager = (ctx or mp).Manager()
    slots = manager.list([None] * n)
    slots._manager_ref = manager  # keep the manager process alive as long as the slots
    return slots


class SharedSlots(Sequence):
    """A live view of the slots: AsyncVectorEnv reads shared memory once and keeps the view."""

    def __init__(self, slots: Any, n: int):
        self._slots, self._n = slots, n

    def __getitem__(self, index):
        return self._snapshot()[index]

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return iter(self._snapshot())

    def _snapshot(self) -> tuple:
        return tuple(self._slots[: self._n])

    def __deepcopy__(self, memo: dict) -> tuple:
        # Values are immutable messages or fresh arrays unpickled from the manager: no copy needed.
        return self._snapshot()

    def __repr__(self) -> str:
        return repr(self._snapshot())


@read_from_shared_memory.register(ObjectSpace)
def _read(space: ObjectSpace, shared_memory: Any, n: int = 1) -> SharedSlots:
    return SharedSlots(shared_memory, n)


@write_to_shared_memory.register(ObjectSpace)
def _write(space: ObjectSpace, index: int, value: Any, shared_memory: Any) -> None:
    shared_memory[index] = value
