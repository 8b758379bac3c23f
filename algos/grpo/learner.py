"""The backend contract: what a language model and a learner provide, and the train step they share.

Both backends (``textgym.algos.jax`` and ``textgym.algos.torch``) implement :class:`LanguageModel` and
subclass :class:`BaseLearner`. The base class owns everything that is not framework maths, once:
old logprobs and the rollout correction before the first update, ``num_iterations`` updates,
the averaging of their metrics, row padding (a batch of any size trains), and the checkpoint
layout. A backend fills in one update and the tensors of its state, so switching ``backend``
changes nothing that the training loop or a checkpoint's reader can see.

Checkpoint layout (a directory; both backends write and read the same files, so a run saved by
one resumes on the other)::

    config.json, model.safetensors, tokenizer files   the current weights (a Hugging Face directory)
    optimizer/state.safetensors                         AdamW's state: "step" (int64, the updates taken)
                                                        and, per trained parameter by its Hugging Face
                                                        name and shape, "<name>.exp_avg" and
                                                        "<name>.exp_avg_sq" (float32); LoRA's
                                                        adapters by peft's tensor names
    trainer_state.json                                  {"step": ..., "config": GRPOConfig fields}
    reference/config.json, reference/model.safetensors  the frozen KL reference (when kl_beta > 0)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from textgym.algos.config.grpo import GRPOConfig
from textgym.algos.grpo.batch import Batch, pad_rows
from textgym.error import CheckpointMismatch

TRAINER_STATE = "trainer_state.json"
# Subdirectories: weight loaders read every top-level *.safetensors.
OPTIMIZER_STATE = "optimizer/state.safetensors"
REFERENCE_DIR = "reference"
OPTIMIZER_STEP = "step"
MOMENTS = ("exp_avg", "exp_avg_sq")  # AdamW's first and second moments, torch's names

AdamState = tuple[int, dict[str, tuple[np.ndarray, np.ndarray]]]
"""AdamW's state in the checkpoint's terms: the updates taken, and per trained parameter's Hugging
Face name its ``(exp_avg, exp_avg_sq)`` in that parameter's Hugging Face shape."""


@runtime_checkable
class LanguageModel(Protocol):
    """A causal LM that scores and samples token ids, numpy in and numpy out.

    Attributes:
        pad_id: Id written after a finished sequence.
        eos_ids: Ids that end a generated turn by default.
        path: The Hugging Face directory it was loaded from.
    """

    pad_id: int
    eos_ids: Sequence[int]

    def logprobs(self, ids: np.ndarray, mask: np.ndarray, *, temperature: float = 1.0, scored: np.ndarray | None = None) -> np.ndarray:
        """``(B, T)`` float32: ``log p(ids[b, t] | ids[b, :t])``, 0 at ``t = 0`` and on padding;
        with ``scored`` (``(B, T)``), 0 too at the tokens it leaves out (the head skips them)."""
        ...

    def generate(
        self,
        prompts: Sequence[np.ndarray],
        max_new_tokens: int,
        temperature: float = 1.0,
        seed: int = 0,
        *,
        top_p: float = 1.0,
        stop_ids: Sequence[int | Sequence[int]] = (),
        eos_ids: Sequence[int] | None = None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per prompt, the sampled int32 ids and their float32 logprobs (before top-p)."""
        ...

    def export(self, out_dir: str | os.PathLike) -> None:
        """Write the weights as a Hugging Face directory."""
        ...


@runtime_checkable
class Learner(Protocol):
    """Trains a :class:`LanguageModel` in place; ``Learner(model, config, *, mesh=None)`` in both backends."""

    model: Any
    config: GRPOConfig
    step: int

    def train_step(self, batch: Batch) -> dict[str, float]:
        """``config.num_iterations`` optimiser steps on ``batch``; the means of their metrics."""
        ...

    def save(self, directory: str | os.PathLike) -> None:
        """Write a resumable checkpoint (the layout above)."""
        ...

    def restore(self, directory: str | os.PathLike) -> None:
        """Load what :meth:`save` wrote, or raise :class:`~textgym.error.CheckpointMismatch`."""
        ...

    def export(self, directory: str | os.PathLike) -> None:
        """Write the current weights as a Hugging Face directory."""
        ...


def is_trainable(name: str, num_layers: int, trainable_layers: int | None) -> bool:
    """Whether a learner trains the parameter with Hugging Face name ``name`` (both backends ask this).

    With ``trainable_layers=k``, the top ``k`` decoder layers (``model.layers.{i}.`` with
    ``i >= num_layers - k``) train, and so does everything above them (the final norm, an untied
    ``lm_head``); the token embedding does not, nor does a head tied to it. The lowest layers are
    the ones frozen because the backward pass then stops where the trained weights begin.

    Example:
        >>> [is_trainable(n, 30, 2) for n in ("model.layers.27.mlp.up_proj.weight", "model.layers.28.mlp.up_proj.weight",
        ...                                    "model.norm.weight", "lm_head.weight", "model.embed_tokens.weight")]
        [False, True, True, True, False]

    Raises:
        ValueError: ``trainable_layers`` is larger than ``num_layers``.
    """
    if trainable_layers is None:
        return True
    if trainable_layers > num_layers:
        raise ValueError(f"trainable_layers must be at most the model's {num_layers} layers, got {trainable_layers}")
    if name.startswith("model.embed_tokens."):
        return False
    layer = re.match(r"model\.layers\.(\d+)\.", name)
    return layer is None or int(layer.group(1)) >= num_layers - trainable_layers


def stop_sequences(stop_ids: Sequence[int | Sequence[int]]) -> list[list[int]]:
    """:meth:`LanguageModel.generate`'s ``stop_ids`` as token lists: an int is a one-token stop, empties are dropped.

    Example:
        >>> stop_sequences([7, [1, 2], []])
        [[7], [1, 2]]
    """
    # np.ndim tells an int (numpy's too) from a sequence; pyright cannot narrow on it.
    stops = [[int(s)] if np.ndim(s) == 0 else [int(t) for t in s] for s in stop_ids]  # pyright: ignore[reportArgumentType, reportGeneralTypeIssues]
    return [s for s in stops if s]


def rollout_correction(sampler: np.ndarray, learner: np.ndarray, mask: np.ndarray, config: GRPOConfig) -> tuple[np.ndarray, float]:
    """Importance weights from the sampler's to the learner's logprobs, and their mismatch KL.

    Args:
        sampler: ``(B, T)`` logprobs the sampler reported.
        learner: ``(B, T)`` the learner's logprobs of the same tokens with the same weights.
        mask: ``(B, T)`` policy tokens.
        config: ``rollout_correction`` (``tis`` truncates ``w = p_learner / p_sampler`` at the
            cap, ``mis`` zeroes tokens above it) and ``rollout_correction_cap``.

    Returns:
        ``(weights, kl)``: float32 ``(B, T)`` weights (0 off the mask) and the k3 estimate of
        ``KL(sampler || learner)`` per policy token (``stats/sampler_mismatch_kl``).
    """
    on = np.asarray(mask) > 0
    log_w = np.where(on, np.asarray(learner, np.float64) - np.asarray(sampler, np.float64), 0.0)
    w = np.exp(log_w)
    kl = float((on * (w - 1.0 - log_w)).sum() / max(1, int(on.sum())))
    cap = config.rollout_correction_cap
    weights = np.minimum(w, cap) if config.rollout_correction == "tis" else np.where(w <= cap, w, 0.0)
    return (weights * on).astype(np.float32), kl


class BaseLearner(ABC):
    """The framework-free half of a GRPO learner; a backend subclasses it and fills in the rest.

    Subclasses set ``model`` (the :class:`LanguageModel` trained), ``config`` and ``step`` and implement :meth:`update` (one optimiser
    step on a padded batch) and the state hooks :meth:`export`, :meth:`_export_reference`,
    :meth:`_restore_weights`, :meth:`_adam_state` and :meth:`_load_adam_state`.
    """

    model: Any
    config: GRPOConfig
    step: int
    is_writer: bool = True  # whether this process writes checkpoints (torch: rank 0 only)

    @property
    def policy(self) -> Any:
        """The old name of :attr:`model`, kept for existing code; "policy" now names what acts in an env
        (:mod:`textgym.policies`), never the trained weights."""
        warnings.warn("Learner.policy is renamed Learner.model", DeprecationWarning, stacklevel=2)
        return self.model

    # ----- training -----

    def train_step(self, batch: Batch) -> dict[str, float]:
        """``config.num_iterations`` optimiser steps on ``batch``; returns the means of their metrics.

        Before the first: with ``rollout_correction``, the learner recomputes ``old_logprobs`` and
        weighs tokens by :func:`rollout_correction`; else, with ``num_iterations > 1`` and no
        sampler logprobs, the logprobs before the first update are the old ones for all of them.

        Returns:
            The loss metrics of :func:`textgym.algos.grpo.grpo_loss` (summed over micro-batches),
            ``stats/grad_norm`` (before clipping), ``stats/lr``, ``stats/tokens``,
            ``stats/reward_mean`` (0 for a batch without sequences) and, with a rollout
            correction, ``stats/sampler_mismatch_kl``.
        """
        config = self.config
        extra: dict[str, float] = {}
        if config.rollout_correction != "none":
            if batch.old_logprobs is None:
                raise ValueError("rollout_correction needs the sampler's logprobs in the batch")
            learner = self._old_logprobs(batch)
            weights, extra["stats/sampler_mismatch_kl"] = rollout_correction(batch.old_logprobs, learner, batch.loss_mask, config)
            batch = batch.replace(old_logprobs=learner, is_weights=weights)
        elif batch.old_logprobs is None and config.num_iterations > 1:
            batch = batch.replace(old_logprobs=self._old_logprobs(batch))
        padded = pad_rows(batch, self.row_multiple)
        runs = [self.update(padded) for _ in range(config.num_iterations)]
        metrics = {name: float(np.mean([r[name] for r in runs])) for name in runs[0]}
        rewards = batch.rewards[: batch.num_sequences]
        return (
            metrics
            | extra
            | {"stats/tokens": float(batch.token_count), "stats/reward_mean": float(rewards.mean()) if rewards.size else 0.0}
        )

    @property
    def row_multiple(self) -> int:
        """Rows of a batch are padded to a multiple of this (the micro-batch size; DDP: times the ranks)."""
        return self.config.micro_batch_size

    def _old_logprobs(self, batch: Batch) -> np.ndarray:
        # Only the trained tokens' old logprobs are read (the ratio, the rollout correction).
        return self.model.logprobs(batch.input_ids, batch.attention_mask, temperature=self.config.temperature, scored=batch.loss_mask)

    @abstractmethod
    def update(self, batch: Batch) -> dict[str, float]:
        """One optimiser step on ``batch`` (rows a multiple of :attr:`row_multiple`); increments ``step``.

        Returns:
            The loss metrics summed over micro-batches, ``stats/grad_norm`` and ``stats/lr``.
        """

    # ----- checkpoints -----

    @abstractmethod
    def export(self, directory: str | os.PathLike) -> None:
        """Write the current weights (and the tokenizer) as a Hugging Face directory."""

    @abstractmethod
    def _export_reference(self, directory: Path) -> None:
        """Write the KL reference's weights as a Hugging Face directory."""

    @abstractmethod
    def _restore_weights(self, directory: Path, reference: Path | None) -> None:
        """Load the weights (and the reference's) or raise :class:`CheckpointMismatch`."""

    @abstractmethod
    def _adam_state(self) -> AdamState:
        """AdamW's state (zero moments before the first update), keyed and shaped as the checkpoint is."""

    def _adam_template(self) -> AdamState:
        """What a checkpoint's optimiser state must match (only names and shapes count): by default
        the live state; a learner that must gather its state to read it gives the shapes directly."""
        return self._adam_state()

    @abstractmethod
    def _load_adam_state(self, state: AdamState) -> None:
        """Install what :meth:`_adam_state` returned (names and shapes already checked)."""

    def _barrier(self) -> None:  # noqa: B027 - a hook that only torch DDP fills in
        """Wait for every process (torch DDP); one process has nothing to wait for."""

    def save(self, directory: str | os.PathLike) -> None:
        """A resumable checkpoint: weights, optimiser, step and config, and the KL reference."""
        from safetensors.numpy import save_file

        directory = Path(directory)
        self.export(directory)
        adam = self._adam_state()  # on every process: a sharded learner gathers its moments collectively
        if self.is_writer:
            (directory / OPTIMIZER_STATE).parent.mkdir(exist_ok=True)
            save_file(adam_tensors(adam), str(directory / OPTIMIZER_STATE))
            state = {"step": self.step, "config": dataclasses.asdict(self.config)}
            (directory / TRAINER_STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
            if self.config.kl_beta > 0 and not self.config.lora_rank:  # LoRA's reference is the base model
                self._export_reference(directory / REFERENCE_DIR)
        self._barrier()

    def restore(self, directory: str | os.PathLike) -> None:
        """Load weights, optimiser state, step and the KL reference written by :meth:`save`.

        Raises:
            FileNotFoundError: ``directory`` holds no trainer state.
            CheckpointMismatch: The weights, optimiser state or reference do not fit this learner.
        """
        from safetensors.numpy import load_file

        directory = Path(directory)
        if not (directory / TRAINER_STATE).is_file():
            raise FileNotFoundError(f"no {TRAINER_STATE} in {str(directory)!r}; was it written by Learner.save?")
        reference = None
        if self.config.kl_beta > 0 and not self.config.lora_rank:
            reference = directory / REFERENCE_DIR
            if not (reference / "model.safetensors").is_file():
                raise CheckpointMismatch(f"kl_beta > 0 but {str(directory)!r} holds no KL reference ({REFERENCE_DIR}/)")
        self._restore_weights(directory, reference)
        self._load_adam_state(read_adam_tensors(load_file(str(directory / OPTIMIZER_STATE)), self._adam_template()))
        state = json.loads((directory / TRAINER_STATE).read_text(encoding="utf-8"))
        self.step = int(state["step"])


def check_state(saved: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]], where: str) -> None:
    """Raise :class:`CheckpointMismatch` unless ``saved`` has exactly ``expected``'s names and shapes."""
    missing, unexpected = sorted(expected.keys() - saved.keys()), sorted(saved.keys() - expected.keys())
    shapes = sorted(k for k in saved.keys() & expected.keys() if tuple(saved[k].shape) != tuple(expected[k]))
    if missing or unexpected or shapes:
        raise CheckpointMismatch(
            f"{where} does not match this learner: missing={missing[:5]}, unexpected={unexpected[:5]}, mis-shaped={shapes[:5]}"
        )


def adam_tensors(state: AdamState) -> dict[str, np.ndarray]:
    """``state`` as the flat named tensors of ``optimizer/state.safetensors``."""
    step, moments = state
    tensors = {OPTIMIZER_STEP: np.asarray(step, dtype=np.int64)}
    for name, pair in moments.items():
        tensors |= {f"{name}.{moment}": np.ascontiguousarray(value, dtype=np.float32) for moment, value in zip(MOMENTS, pair)}
    return tensors


def read_adam_tensors(tensors: dict[str, np.ndarray], like: AdamState) -> AdamState:
    """The :data:`AdamState` in a checkpoint's tensors, which must hold exactly ``like``'s names and shapes.

    Raises:
        CheckpointMismatch: A missing, unexpected or mis-shaped tensor (another model, another
            ``trainable_layers``, a checkpoint of another layout).
    """
    expected = {OPTIMIZER_STEP: ()} | {
        f"{name}.{moment}": tuple(np.shape(value)) for name, pair in like[1].items() for moment, value in zip(MOMENTS, pair)
    }
    check_state(tensors, expected, "optimizer state")
    first, second = MOMENTS
    moments = {
        name: (np.asarray(tensors[f"{name}.{first}"], np.float32), np.asarray(tensors[f"{name}.{second}"], np.float32)) for name in like[1]
    }
    return int(tensors[OPTIMIZER_STEP]), moments
