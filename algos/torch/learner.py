"""The torch GRPO learner: gradient accumulation, AdamW, DDP or FSDP2, checkpoints as HF directories.

:meth:`Learner.train_step` (the shared skeleton of :class:`~textgym.algos.grpo.BaseLearner`) runs
``config.num_iterations`` optimiser steps over a packed :class:`~textgym.algos.grpo.Batch`.
The batch's loss weights already carry the global token and sequence counts, so the gradients of
the micro-batches (and of the DDP ranks) simply *add up* to the gradient of the whole batch:
accumulation and data parallelism never change the objective. Each micro-batch is cut at its rows'
prompts (:func:`~textgym.algos.grpo.prompts.split_prompts`), so a group's shared prompt runs once,
or, where that costs more (:func:`~textgym.algos.grpo.prompts.split_pays`: long multi-turn rows),
runs whole rows of like lengths (:func:`~textgym.algos.grpo.batch.length_groups`) under causal
attention without a mask.

Data parallelism: when ``torch.distributed`` is initialised (``torchrun``, or
``init_process_group("gloo")`` on CPU), every rank calls ``train_step`` with the same global
batch and trains on its own contiguous share of rows; the model is wrapped in
``DistributedDataParallel`` (or, with ``data_parallel="fsdp"``, a copy of it is sharded with
FSDP2: :mod:`textgym.algos.torch.fsdp`), whose gradient all-reduce (reduce-scatter) averages, so
each rank scales its loss by the world size to turn the average back into the sum.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file
from torch.nn.parallel import DistributedDataParallel

from textgym.algos.config.optimizer import OptimizerConfig
from textgym.algos.grpo import Batch, GRPOConfig, split_micro_batches
from textgym.algos.grpo.batch import by_length, length_groups, take_rows, trimmed
from textgym.algos.grpo.learner import MOMENTS, AdamState, BaseLearner, is_trainable
from textgym.algos.grpo.lora import load_adapter
from textgym.algos.grpo.prompts import split_pays, split_prompts
from textgym.algos.torch import fsdp, lora
from textgym.algos.torch.loss import grpo_loss
from textgym.algos.torch.model import TorchLanguageModel, attention_pair_cost, continuation_logprobs, row_logprobs
from textgym.error import CheckpointMismatch


def make_schedule(optimizer: OptimizerConfig) -> Callable[[int], float]:
    """The learning rate of each optimiser step: :meth:`OptimizerConfig.learning_rate`."""
    return optimizer.learning_rate


class Learner(BaseLearner):
    """GRPO updates of a :class:`~textgym.algos.torch.model.TorchLanguageModel`'s model, in place.

    Args:
        model: The language model to train; its sampler sees every update immediately.
        config: The GRPO configuration (loss, optimiser, micro-batch size, dtype).
        optimizer: The optimiser's settings; None: ``config.optimizer`` (the SFT warm start has its own).
        mesh: Only None: torch scales over ``torch.distributed`` ranks (``torchrun``) instead of
            a JAX device mesh.
        data_parallel: How several ranks split the learner: ``ddp`` (each holds every weight,
            gradient and moment) or ``fsdp`` (they are sharded over the ranks, while the language
            model keeps the whole weights it samples with). Ignored with one rank.

    Attributes:
        model: The language model trained (``learner.policy`` is its deprecated old name).
        network: The ``torch.nn.Module`` the optimiser steps: ``model.model``, or with
            :attr:`sharded` a sharded copy of it.
        step: Optimiser steps taken (restored by :meth:`restore`).
        rank: This process's rank (0 without ``torch.distributed``).
        world_size: Number of data-parallel ranks.
        sharded: Whether the trained weights are sharded over the ranks (FSDP2).
    """

    def __init__(
        self,
        model: TorchLanguageModel,
        config: GRPOConfig,
        *,
        mesh: Any = None,
        data_parallel: Literal["ddp", "fsdp"] = "ddp",
        optimizer: OptimizerConfig | None = None,
    ):
        if mesh is not None:
            raise ValueError("the torch backend takes no mesh: run data-parallel ranks with torchrun instead")
        if data_parallel not in ("ddp", "fsdp"):
            raise ValueError(f"data_parallel must be 'ddp' or 'fsdp', got {data_parallel!r}")
        self.model = model
        self.config = config
        self.lora_modules: list[str] = []
        if config.lora_rank:  # the sampler (model.model) then runs with the adapter applied
            model.model, self.lora_modules = lora.add_lora(model.model, config)
        model.model.train()
        if config.trainable_layers is not None:  # a tied head is the embedding's parameter, named once
            for name, param in model.model.named_parameters():
                param.requires_grad_(is_trainable(name, model.model.config.num_hidden_layers, config.trainable_layers))
        distributed = dist.is_available() and dist.is_initialized()
        self.world_size = dist.get_world_size() if distributed else 1
        self.rank = dist.get_rank() if distributed else 0
        self.is_writer = self.rank == 0
        # The frozen reference of the k3 KL: the weights training started from (with LoRA, the
        # base model: the adapter disabled, no copy).
        copied = config.kl_beta > 0 and not config.lora_rank
        self.reference = copy.deepcopy(model.model).eval().requires_grad_(False) if copied else None
        self.sharded = data_parallel == "fsdp" and self.world_size > 1
        self.network = fsdp.shard(copy.deepcopy(model.model)) if self.sharded else model.model
        ddp = self.world_size > 1 and not self.sharded
        self.module = DistributedDataParallel(self.network) if ddp else self.network
        # The optimiser holds only the trained parameters; their checkpoint names key its state.
        self.trained = {lora.checkpoint_name(name): p for name, p in self.network.named_parameters() if p.requires_grad}
        self.params = list(self.trained.values())
        self.optimizer_config = settings = optimizer or config.optimizer
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=settings.lr,
            betas=(settings.adam_beta1, settings.adam_beta2),
            eps=settings.adam_eps,
            weight_decay=settings.weight_decay,
        )
        self.schedule = make_schedule(settings)  # a pure function of the step: nothing to checkpoint
        self.step = 0
        self.pair_cost = attention_pair_cost(model.model)
        # Within train_step: each micro-batch's KL-reference logprobs, by its index. The reference
        # is frozen and the micro-batches are the same at every iteration, so the reference runs
        # once a batch, not num_iterations times. None outside train_step: computed every time.
        self._references: dict[int, torch.Tensor] | None = None

    def train_step(self, batch: Batch) -> dict[str, float]:
        self._references = {}
        try:
            return super().train_step(batch)
        finally:
            self._references = None

    # ----- training -----

    @property
    def row_multiple(self) -> int:
        return self.config.micro_batch_size * self.world_size

    def update(self, batch: Batch) -> dict[str, float]:
        """One optimiser step: accumulate every micro-batch's gradient, all-reduce, clip, AdamW
        (sharded: then gather the new weights into the language model's module)."""
        lr = self.schedule(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        micro_batches, whole_rows = self._my_micro_batches(batch)
        device = self.model.device
        totals: dict[str, torch.Tensor] = {}
        for k, micro in enumerate(micro_batches):
            last = k == len(micro_batches) - 1
            sync = self.module.no_sync() if isinstance(self.module, DistributedDataParallel) and not last else nullcontext()
            with sync:
                loss, metrics = self._loss(micro, device, whole_rows, k)
                (loss * self.world_size).backward()
            for name, value in metrics.items():
                totals[name] = totals.get(name, 0.0) + value.detach().float()
        max_norm = self.optimizer_config.max_grad_norm if self.optimizer_config.max_grad_norm > 0 else float("inf")
        grad_norm = fsdp.full(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.sharded:
            fsdp.gather_into(self.network, self.model.model)
        self.step += 1
        names = sorted(totals)
        out: dict[str, float] = {}
        if names:
            values = torch.stack([torch.as_tensor(totals[n], device=device) for n in names])
            if self.world_size > 1:
                dist.all_reduce(values)
            out = dict(zip(names, values.tolist()))
        return out | {"stats/grad_norm": float(grad_norm), "stats/lr": float(lr)}

    def _my_micro_batches(self, batch: Batch) -> tuple[list[Batch], bool]:
        """This rank's micro-batches (its contiguous share of the padded rows, split by rows), and
        whether they run as whole rows (sorted by length) rather than cut at their prompts."""
        size = batch.shape[0] // self.world_size
        share = take_rows(batch, slice(self.rank * size, (self.rank + 1) * size))
        whole_rows = not split_pays(share, self.config.micro_batch_size, self.pair_cost)
        if self.world_size > 1:  # every rank runs as many micro-batches (DDP syncs at the last)
            return split_micro_batches(by_length(share) if whole_rows else share, self.config.micro_batch_size), whole_rows
        if not whole_rows:
            micros = split_micro_batches(share, self.config.micro_batch_size)
            return [m for m in micros if m.loss_weights.any()] or micros[:1], whole_rows  # one at least, for the metrics
        # Rows that weigh nothing (padding) are left out: without DDP their passes are pure waste.
        weighed = np.flatnonzero(share.loss_weights.any(axis=1))
        if not len(weighed):
            return [take_rows(share, slice(0, self.config.micro_batch_size))], whole_rows
        lengths = share.attention_mask[weighed].sum(axis=1)
        groups = length_groups(lengths, self.config.micro_batch_size, self.pair_cost)
        return [take_rows(share, weighed[rows]) for rows in groups], whole_rows

    def _old_logprobs(self, batch: Batch) -> np.ndarray:
        """The base class's, but where whole rows cost less (:func:`split_pays`) they run in
        micro-batches of like lengths (:func:`length_groups`), each as wide as its longest row, without a mask."""
        size = self.config.micro_batch_size
        if split_pays(batch, size, self.pair_cost):
            return super()._old_logprobs(batch)
        out = np.zeros(batch.shape, np.float32)
        was_training = self.model.model.training
        self.model.model.eval()
        with torch.no_grad():
            for rows in length_groups(batch.attention_mask.sum(axis=1), size, self.pair_cost):
                score, micro = self._scorer(take_rows(batch, rows), self.model.device, whole_rows=True)
                out[rows, : micro.shape[1]] = score(self.model.model).cpu().numpy()
        self.model.model.train(was_training)
        return out

    def _scorer(self, micro: Batch, device: torch.device, whole_rows: bool) -> tuple[Callable[[torch.nn.Module], torch.Tensor], Batch]:
        """A model's logprobs of ``micro``'s trained tokens (the LM head skips every other
        position), and the rows they align with: ``micro`` trimmed, or its rests after the prompts."""
        if whole_rows:
            rows = trimmed(micro)
            ids = torch.as_tensor(rows.input_ids, dtype=torch.long, device=device)
            scored = torch.as_tensor(rows.loss_mask > 0, device=device)
            return partial(row_logprobs, ids=ids, temperature=self.config.temperature, scored=scored), rows
        split = split_prompts(micro, self.model.pad_id)
        return partial(continuation_logprobs, split=split, temperature=self.config.temperature, scored=split.rest.loss_mask), split.rest

    def _loss(
        self, micro: Batch, device: torch.device, whole_rows: bool, index: int | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        autocast = torch.autocast(device.type, dtype=torch.bfloat16) if self.config.compute_dtype == "bfloat16" else nullcontext()
        score, rows = self._scorer(micro, device, whole_rows)
        with autocast:
            logprobs = score(self.module)
            ref = self._reference_logprobs(score, index)
        return grpo_loss(logprobs.float(), rows, self.config, ref)

    @torch.no_grad()
    def _reference_logprobs(self, score: Callable[[torch.nn.Module], torch.Tensor], index: int | None) -> torch.Tensor | None:
        """The KL reference's logprobs of micro-batch ``index`` (None without a KL), kept for the
        step's later iterations (``index`` None: not kept)."""
        kept = self._references if index is not None else None
        if kept is not None and index in kept:
            return kept[index]
        if self.reference is not None:
            ref = score(self.reference)
        elif self.config.kl_beta > 0:  # LoRA: the reference is the base model
            with self.network.disable_adapter():
                ref = score(self.module)
        else:
            return None
        if kept is not None and index is not None:
            kept[index] = ref
        return ref

    # ----- checkpoints (the layout of textgym.algos.grpo.learner) -----

    def export(self, directory: str | os.PathLike) -> Path:
        """Write the current weights and tokenizer as a Hugging Face directory (rank 0 only).

        The directory loads with transformers ``AutoModelForCausalLM`` and with the JAX backend.
        """
        directory = Path(directory)
        if self.rank == 0:
            self.model.export(directory)  # a peft model writes its adapter (adapter_config.json, adapter_model.safetensors)
            if self.config.lora_merge:
                lora.export_merged(self.model.model, self.model.tokenizer, directory)
        self._barrier()
        return directory

    def _export_reference(self, directory: Path) -> None:
        self.reference.save_pretrained(str(directory))

    def _restore_weights(self, directory: Path, reference: Path | None) -> None:
        whole = self.model.model  # sharded: every rank loads the whole weights, then keeps its shards
        if self.config.lora_rank:
            lora.set_adapters(whole, load_adapter(directory, lora.get_adapters(whole, self.lora_modules)))
        else:
            load_weights(whole, _safetensors(directory))
        if reference is not None:
            load_weights(self.reference, _safetensors(reference))
        if self.sharded:
            fsdp.distribute_from(whole, self.network)

    def _adam_state(self) -> AdamState:
        # AdamW keeps `step`, `exp_avg` and `exp_avg_sq` per parameter once it has stepped; every
        # parameter steps together, so one step count stands for all of them. Sharded moments are
        # gathered one parameter at a time (every rank takes part), and only rank 0 keeps them.
        keep = self.is_writer or not self.sharded
        step, moments = 0, {}
        for name, p in self.trained.items():
            state = self.optimizer.state.get(p)
            whole = [fsdp.full(state[m]) for m in MOMENTS] if state else None
            if state:
                step = int(state["step"])
            if keep:
                moments[name] = (
                    tuple(w.detach().float().cpu().numpy() for w in whole) if whole else (np.zeros(tuple(p.shape), np.float32),) * 2
                )
        return step, moments

    def _adam_template(self) -> AdamState:
        # Names and whole shapes, without gathering anything (zero-strided views: no memory).
        return 0, {name: (np.broadcast_to(np.float32(0), tuple(p.shape)),) * 2 for name, p in self.trained.items()}

    def _load_adam_state(self, state: AdamState) -> None:
        step, moments = state
        saved = self.optimizer.state_dict()
        saved["state"] = (
            {
                i: {"step": torch.tensor(float(step))}
                | {m: fsdp.shard_like(p, torch.from_numpy(v)) for m, v in zip(MOMENTS, moments[name])}
                for i, (name, p) in enumerate(self.trained.items())
            }
            if step > 0
            else {}
        )
        self.optimizer.load_state_dict(saved)  # moves the moments to each parameter's device and dtype

    def _barrier(self) -> None:
        _barrier(self.world_size)


def load_weights(model: torch.nn.Module, files: list[Path]) -> None:
    """Copy safetensors weights into ``model``; every parameter must be covered, with its shape.

    Tied output embeddings are the only keys a checkpoint may omit (``save_pretrained`` drops them).

    Raises:
        CheckpointMismatch: Missing, unexpected or mis-shaped keys (never a silent partial load).
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
        raise CheckpointMismatch(f"checkpoint does not match the model: missing={missing}, unexpected={unexpected}, mis-shaped={shapes}")
    with torch.no_grad():
        for name, value in tensors.items():
            own[name].copy_(value)


def _safetensors(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {str(directory)!r}")
    return files


def _barrier(world_size: int) -> None:
    if world_size > 1:
        dist.barrier()
