"""Counter-based random draws: the number that picks a token is a pure function of where it is.

A batched sampler that draws from one generator per call gives a row the numbers of its place in
the batch, so the same episode samples differently with another vector env width, another set of
live slots, another split of groups across processes or another backend. Here the uniform number
that picks token ``t`` of policy turn ``k`` of an episode is ``uniform(seed, key, k, t)``: a hash
of four integers (the run's seed, the episode's key, the turn, the token), computed in numpy with
wrapping ``uint64`` arithmetic, so both backends receive the same numbers whatever the batch.

The hash chains splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014), a bijection of ``uint64`` that passes BigCrush; a uniform keeps the top
24 bits, which float32 represents exactly, in ``[0, 1)``.

Example:
    >>> u = token_uniforms(3, keys=[7, 7], turns=[0, 1], n=4)
    >>> u.shape, u.dtype.name, bool(((0 <= u) & (u < 1)).all())
    ((2, 4), 'float32', True)
    >>> bool((token_uniforms(3, keys=[7], turns=[1], n=4) == u[1:]).all())  # a row is its own
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a ``uint64`` array."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _words(values: int | Sequence[int] | np.ndarray) -> np.ndarray:
    """Integers (any sign, any size) as ``uint64`` words, modulo ``2**64``.

    Python ints go one by one: ``numpy.asarray`` turns a list mixing ints past ``2**63`` with
    smaller ones into float64, which would round keys.
    """
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return values.astype(np.int64).view(np.uint64) if values.dtype.kind == "i" else values.astype(np.uint64)
    if isinstance(values, (int, np.integer)):
        return np.array(int(values) & _MASK, dtype=np.uint64)
    return np.array([int(v) & _MASK for v in values], dtype=np.uint64)


def combine(*values: int | Sequence[int] | np.ndarray) -> np.ndarray:
    """One ``uint64`` hash of several integers (or broadcast arrays of them), in order."""
    state = np.zeros((), np.uint64)
    with np.errstate(over="ignore"):
        for value in values:
            state = _mix(state + _GOLDEN + _words(value))
    return state


def episode_key(*path: int) -> int:
    """An episode's key: the hash of the integers that place it (e.g. task seed and index in its group)."""
    return int(combine(*path))


def token_uniforms(seed: int, keys: Sequence[int] | np.ndarray, turns: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """``(B, n)`` float32 uniforms in ``[0, 1)``: row ``b``, column ``t`` is ``uniform(seed, keys[b], turns[b], t)``."""
    rows = combine(seed, _words(keys)[:, None], _words(turns)[:, None])  # (B, 1)
    with np.errstate(over="ignore"):  # the last link of combine(seed, key, turn, t), for every t at once
        bits = _mix(rows + _GOLDEN + np.arange(int(n), dtype=np.uint64)[None, :]) >> np.uint64(40)
    return (bits.astype(np.float32) * np.float32(2.0**-24)).astype(np.float32)


def call_uniforms(seed: int, keys: Sequence[tuple[int, int]] | None, batch: int, n: int) -> np.ndarray:
    """A sampler call's ``(batch, n)`` uniforms: row ``b`` draws with ``keys[b] = (episode key, turn)``,
    or, without keys, with ``(b, 0)`` (rows of one call differ, and ``seed`` alone fixes them)."""
    if keys is None:
        return token_uniforms(seed, np.arange(batch), np.zeros(batch, np.int64), n)
    if len(keys) != batch:
        raise ValueError(f"expected one (episode key, turn) per prompt ({batch}), got {len(keys)}")
    return token_uniforms(seed, [k for k, _ in keys], [t for _, t in keys], n)
