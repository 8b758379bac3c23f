"""The torch GRPO learner: gradient accumulation, AdamW, DDP, checkpoints as HF directories.

One :meth:`Learner.train_step` is one optimiser step over a packed :class:`~textgym.algos.grpo.Batch`.
The batch's loss weights already carry the global token and sequence counts, so the gradients of
the micro-batches (and of the DDP ranks) simply *add up* to the gradient of the whole batch:
accumulation and data parallelism never change the objective. Each micro-batch is cut at its rows'
prompts (:func:`~textgym.algos.grpo.batch.split_prompts`), so a group's shared prompt runs once.

Data parallelism: when ``torch.distributed`` is initialised (``torchrun``, or
``init_process_group("gloo")`` on CPU), every rank calls ``train_step`` with the same global
batch and trains on its own contiguous share of rows; the model is wrapped in
``DistributedDataParallel``, whose gradient all-reduce averages, so each rank scales its loss by
the world size to turn the average back into the sum.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel

from textgym.algos.grpo import Batch, GRPOConfig, split_micro_batches
from textgym.algos.grpo.batch import split_prompts
from textgym.algos.torch.loss import grpo_loss
from textgym.algos.torch.policy import Policy, continuation_logprobs

STATE_FILE = "trainer_state.pt"
REFERENCE_DIR = "reference"  # a subdirectory: HF loaders read every top-level *.safetensors


def make_schedule(config: GRPOConfig) -> Callable[[int], float]:
    """Learning rate at each optimiser step: linear warm-up from 0 to ``config.lr``, then constant
    or a linear/cosine decay to 0 at ``total_steps`` (the JAX backend's optax schedule, step for step)."""

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return config.lr * step / config.warmup_steps
        if config.lr_schedule == "constant":
            return config.lr
        progress = min(1.0, (step - config.warmup_steps) / max(1, config.total_steps - config.warmup_steps))
        if config.lr_schedule == "linear":
            return config.lr * (1.0 - progress)
        return config.lr * 0.5 * (1.0 + math.cos(math.pi * progress))

    return schedule


class Learner:
    """GRPO updates of a :class:`~textgym.algos.torch.policy.Policy`'s model, in place.

    Args:
        policy: The policy to train; its sampler sees every update immediately.
        config: The GRPO configuration (loss, optimiser, micro-batch size, dtype).

    Attributes:
        step: Optimiser steps taken (restored by :meth:`restore`).
        rank: This process's rank (0 without ``torch.distributed``).
        world_size: Number of data-parallel ranks.
    """

    def __init__(self, policy: Policy, config: GRPOConfig):
        self.policy = policy
        self.config = config
        self.model = policy.model
        self.model.train()
        distributed = dist.is_available() and dist.is_initialized()
        self.world_size = dist.get_world_size() if distributed else 1
        self.rank = dist.get_rank() if distributed else 0
        self.module = DistributedDataParallel(self.model) if self.world_size > 1 else self.model
        # The frozen reference of the k3 KL: the weights training started from.
        self.reference = copy.deepcopy(self.model).eval().requires_grad_(False) if config.kl_beta > 0 else None
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=config.lr,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.schedule = make_schedule(config)
        # LambdaLR multiplies the optimiser's lr; a zero lr would zero every factor.
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: self.schedule(s) / config.lr if config.lr else 0.0)
        self.step = 0

    # ----- training -----

    def train_step(self, batch: Batch) -> dict[str, float]:
        """``config.num_iterations`` optimiser steps on ``batch``; returns the batch's metrics.

        With ``num_iterations > 1`` and a batch without sampler logprobs, the logprobs before the
        first update serve as ``old_logprobs`` for all of them (GRPO's mu).

        Returns:
            Means over the iterations of the loss metrics of
            :func:`textgym.algos.grpo.grpo_loss` (summed over micro-batches and ranks), plus
            ``stats/grad_norm`` (before clipping), ``stats/lr`` (the rate used),
            ``stats/tokens`` (policy tokens in the batch) and ``stats/reward_mean``.
        """
        if batch.old_logprobs is None and self.config.num_iterations > 1:
            batch = batch.replace(old_logprobs=self.policy.logprobs(batch.input_ids, batch.attention_mask, temperature=self.config.temperature))
        runs = [self._update(batch) for _ in range(self.config.num_iterations)]
        metrics = {name: float(np.mean([r[name] for r in runs])) for name in runs[0]}
        rewards = batch.rewards[: batch.num_sequences]
        return metrics | {"stats/tokens": float(batch.token_count), "stats/reward_mean": float(rewards.mean()) if rewards.size else 0.0}

    def _update(self, batch: Batch) -> dict[str, float]:
        """One optimiser step: accumulate every micro-batch's gradient, all-reduce, clip, AdamW."""
        config = self.config
        lr = self.scheduler.get_last_lr()[0]
        micro_batches = list(self._my_micro_batches(batch))
        device = self.policy.device
        totals: dict[str, torch.Tensor] = {}
        for k, micro in enumerate(micro_batches):
            last = k == len(micro_batches) - 1
            sync = nullcontext() if last or self.world_size == 1 else self.module.no_sync()
            with sync:
                loss, metrics = self._loss(micro, device)
                (loss * self.world_size).backward()
            for name, value in metrics.items():
                totals[name] = totals.get(name, 0.0) + value.detach().float()
        params = [p for p in self.model.parameters() if p.requires_grad]
        max_norm = config.max_grad_norm if config.max_grad_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        names = sorted(totals)
        out: dict[str, float] = {}
        if names:
            values = torch.stack([torch.as_tensor(totals[n], device=device) for n in names])
            if self.world_size > 1:
                dist.all_reduce(values)
            out = dict(zip(names, values.tolist()))
        return out | {"stats/grad_norm": float(grad_norm), "stats/lr": float(lr)}

    def _my_micro_batches(self, batch: Batch) -> Iterator[Batch]:
        """This rank's micro-batches: the batch padded to equal shares, then split by rows."""
        mb = self.config.micro_batch_size
        batch = _pad_rows(batch, mb * self.world_size)
        share = batch.shape[0] // self.world_size
        mine = _rows(batch, slice(self.rank * share, (self.rank + 1) * share))
        for micro in split_micro_batches(mine, mb):
            # Padding rows weigh nothing; without DDP their forward pass is pure waste.
            if self.world_size == 1 and not micro.loss_weights.any():
                continue
            yield micro

    def _loss(self, micro: Batch, device: torch.device) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        split = split_prompts(micro, self.policy.pad_id)
        autocast = (
            torch.autocast(device.type, dtype=torch.bfloat16) if self.config.compute_dtype == "bfloat16" else nullcontext()
        )
        with autocast:
            logprobs = continuation_logprobs(self.module, split, self.config.temperature)
            ref = None
            if self.reference is not None:
                with torch.no_grad():
                    ref = continuation_logprobs(self.reference, split, self.config.temperature)
        return grpo_loss(logprobs.float(), split.rest, self.config, ref)

    # ----- checkpoints -----

    def export(self, directory: str | os.PathLike) -> Path:
        """Write the current weights and tokenizer as a Hugging Face directory (rank 0 only).

        The directory loads with transformers ``AutoModelForCausalLM`` and with the JAX backend.
        """
        directory = Path(directory)
        if self.rank == 0:
            self.policy.export(directory)
        _barrier(self.world_size)
        return directory

    def save(self, directory: str | os.PathLike) -> Path:
        """Everything needed to resume: the HF export plus optimiser, schedule and step."""
        directory = self.export(directory)
        if self.rank == 0:
            state = {
                "step": self.step,
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
            }
            tmp = directory / (STATE_FILE + ".tmp")
            torch.save(state, tmp)
            os.replace(tmp, directory / STATE_FILE)
            if self.reference is not None:
                (directory / REFERENCE_DIR).mkdir(exist_ok=True)
                save_file(_state(self.reference), str(directory / REFERENCE_DIR / "model.safetensors"))
        _barrier(self.world_size)
        return directory

    def restore(self, directory: str | os.PathLike) -> None:
        """Load weights, optimiser state, schedule and step written by :meth:`save`.

        Raises:
            FileNotFoundError: ``directory`` holds no trainer state.
            KeyError: The checkpoint's weights do not match the model's parameters exactly.
        """
        directory = Path(directory)
        if not (directory / STATE_FILE).is_file():
            raise FileNotFoundError(f"no {STATE_FILE} in {str(directory)!r}; was it written by Learner.save?")
        load_weights(self.model, _safetensors(directory))
        if self.reference is not None:
            load_weights(self.reference, [directory / REFERENCE_DIR / "model.safetensors"])
        state = torch.load(directory / STATE_FILE, map_location=self.policy.device, weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])


def load_weights(model: torch.nn.Module, files: list[Path]) -> None:
    """Copy safetensors weights into ``model``; every parameter must be covered, with its shape.

    Tied output embeddings are the only keys a checkpoint may omit (``save_pretrained`` drops them).

    Raises:
        KeyError: Missing, unexpected or mis-shaped keys (never a silent partial load).
    """
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors |= load_file(str(f))
    own = model.state_dict()
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    missing = sorted(set(own) - set(tensors) - tied)
    unexpected = sorted(set(tensors) - set(own))
    shapes = sorted(k for k in tensors.keys() & own.keys() if tuple(tensors[k].shape) != tuple(own[k].shape))
    if missing or unexpected or shapes:
        raise KeyError(f"checkpoint does not match the model: missing={missing}, unexpected={unexpected}, mis-shaped={shapes}")
    with torch.no_grad():
        for name, value in tensors.items():
            own[name].copy_(value)


def _safetensors(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {str(directory)!r}")
    return files


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A state dict safetensors can write: tied tensors stored once, all contiguous."""
    seen, out = set(), {}
    for name, value in model.state_dict().items():
        if value.data_ptr() in seen:
            continue
        seen.add(value.data_ptr())
        out[name] = value.detach().contiguous().cpu()
    return out


def _rows(batch: Batch, rows: slice) -> Batch:
    return batch.replace(**{k: v[rows] for k, v in vars(batch).items() if isinstance(v, np.ndarray)})


def _pad_rows(batch: Batch, multiple: int) -> Batch:
    """Append all-zero rows (no attention, no loss weight) up to a multiple of ``multiple`` rows."""
    rows = batch.shape[0]
    extra = -rows % multiple
    if extra == 0:
        return batch
    return batch.replace(
        **{k: np.concatenate([v, np.zeros((extra, *v.shape[1:]), v.dtype)]) for k, v in vars(batch).items() if isinstance(v, np.ndarray)}
    )


def _barrier(world_size: int) -> None:
    if world_size > 1:
        dist.barrier()
