"""Unbiased estimators of success over ``k`` attempts at a task, from ``n >= k`` attempts."""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` attempts with ``c`` successes: P(some of k attempts succeeds).

    The estimator of Chen et al. 2021 (Codex, eq. 1): ``1 - C(n-c, k) / C(n, k)``.
    """
    _check_nck(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k from ``n`` attempts with ``c`` successes: P(all of k attempts succeed).

    The reliability metric of tau-bench (Yao et al. 2024): ``C(c, k) / C(n, k)``.
    """
    _check_nck(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
