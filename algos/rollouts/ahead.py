"""Asynchronous GRPO: the next steps' rollouts are sampled in a background thread while the
learner updates (``GRPOConfig.max_off_policy_steps = K > 0``).

Step ``s`` is always sampled by the weights of version ``max(s - K, start)`` (version ``v``: the
weights after ``v`` GRPO steps; ``start``: the step the run, or its resumption, began at), never
fresher and never older. With one learner step of lag per K, sampling step ``s + K`` overlaps
updating on step ``s``, and because the version of every step is fixed, not raced, a run with
K > 0 is as deterministic as a synchronous one: same config, same rollouts, same weights.

The learner publishes a copy of its model after every update (:meth:`BackgroundCollector.publish`);
the thread samples with that copy, so the weights it reads never change under it. Each step's
record gets ``async/staleness_mean`` and ``async/staleness_max`` (updates between the sampler's
weights and the learner's, over the step's episodes), ``async/wait_s`` (how long the learner
waited for the rollouts) and ``async/policy_version``, and the collection's own ``time/*`` metrics
as the thread measured them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from textgym.algos.distributed import processes


class BackgroundCollector:
    """Samples steps ``start .. stop-1`` in a thread, step ``s`` with the weights of version
    ``max(s - k, start)``; :meth:`take` hands them over in order.

    Args:
        collect: ``collect(model, step) -> (rollouts, metrics)`` (every group of the step, and
            the ``time/*`` of collecting them).
        model: The learner's model at version ``start``.
        start: The first step to sample.
        stop: One past the last.
        k: ``max_off_policy_steps``.
    """

    def __init__(self, collect: Callable[[Any, int], tuple[list[Any], dict[str, float]]], model: Any, start: int, stop: int, k: int):
        self.collect, self.start, self.stop, self.k = collect, start, stop, k
        self.versions = {start: model.snapshot()}
        self.ready: dict[int, tuple[list[Any], dict[str, float], int]] = {}
        self.error: BaseException | None = None
        self.closed = False
        self.lock = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="textgym-background-collector", daemon=True)
        self.thread.start()

    def version_for(self, step: int) -> int:
        """The weights' version that samples ``step``."""
        return max(step - self.k, self.start)

    def _run(self) -> None:
        try:
            for step in range(self.start, self.stop):
                version = self.version_for(step)
                with self.lock:
                    self.lock.wait_for(lambda v=version: v in self.versions or self.closed)
                    if self.closed:
                        return
                    model = self.versions[version]
                    for old in [v for v in self.versions if v < version]:
                        del self.versions[old]  # no later step samples from them
                t0 = time.perf_counter()
                rollouts, metrics = self.collect(model, step)
                with self.lock:
                    self.ready[step] = (rollouts, metrics | {"time/rollout_s": time.perf_counter() - t0}, version)
                    self.lock.notify_all()
        except BaseException as exc:  # handed to the learner's thread by take()
            with self.lock:
                self.error = exc
                self.lock.notify_all()

    def take(self, step: int) -> tuple[list[Any], dict[str, float]]:
        """Step ``step``'s rollouts (waiting for them) and the step's ``async/*`` and collection's ``time/*`` metrics."""
        t0 = time.perf_counter()
        with self.lock:
            self.lock.wait_for(lambda: step in self.ready or self.error is not None)
            if step not in self.ready:
                raise RuntimeError(f"the background collector failed at step {step + 1}: {self.error}") from self.error
            rollouts, metrics, version = self.ready.pop(step)
        staleness = step - version
        return rollouts, metrics | {
            "async/wait_s": time.perf_counter() - t0,
            "async/staleness_mean": float(staleness),
            "async/staleness_max": float(staleness),
            "async/policy_version": float(version),
        }

    def publish(self, version: int, model: Any) -> None:
        """The learner's weights after ``version`` steps, for the steps that sample from them."""
        if version + self.k < self.stop:  # step version + k samples from it
            twin = model.snapshot()
            with self.lock:
                self.versions[version] = twin
                self.lock.notify_all()

    def close(self) -> None:
        """Stop sampling: the thread ends at its next wait (it is a daemon: a step it is sampling
        when training stops early is abandoned)."""
        with self.lock:
            self.closed = True
            self.lock.notify_all()


def start(
    k: int, collect: Callable[[Any, int], tuple[list[Any], dict[str, float]]], model: Any, first: int, stop: int
) -> BackgroundCollector | None:
    """An :class:`BackgroundCollector` of steps ``first .. stop-1`` for ``k > 0``; None for the synchronous loop.

    Raises:
        ValueError: ``k > 0`` across several processes (their sampler collectives would race the learner's).
    """
    if k == 0 or first >= stop:
        return None
    if processes.world_size() > 1:
        raise ValueError("max_off_policy_steps > 0 runs in one process; use 0 with several processes")
    return BackgroundCollector(collect, model, first, stop, k)
