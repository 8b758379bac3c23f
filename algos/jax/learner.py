"""The GRPO learner: one jitted update that scans micro-batches, then AdamW.

``Learner.train_step(batch)`` (the shared skeleton of :class:`~textgym.algos.grpo.BaseLearner`)
runs ``config.num_iterations`` updates on one packed batch. Each update is a single jitted function: a ``lax.scan`` over the micro-batches sums their gradients
(the batch's ``loss_weights`` already hold the global normalisers, so the sum *is* the gradient
of the whole batch's loss), then ``optax.chain(clip_by_global_norm, adamw)`` applies it. Master
parameters and optimiser state stay float32; ``compute_dtype="bfloat16"`` casts a copy for the
forward pass. Each micro-batch is cut at its rows' prompts
(:func:`~textgym.algos.grpo.batch.split_prompts`), so a group's shared prompt runs once.

With LoRA (``lora_rank > 0``) the decoder is built with Flax NNX's ``nnx.LoRALinear`` on the
targets (:mod:`textgym.algos.jax.lora`): only its ``nnx.LoRAParam`` adapters are differentiated
and optimised, the base weights stay frozen, the KL reference is the graph without adapters,
and the language model scores and samples through the adapted graph.

Over several processes (``jax.distributed``), the mesh spans every process's devices and the
learner is data-parallel across them: each process passes the same global batch, its devices
run their rows, and XLA adds the gradients up. The parameters are replicated, so each process
reads its own copy (:func:`_local`) for its sampler and for the files that process 0 alone writes.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from textgym.algos.config.optimizer import OptimizerConfig
from textgym.algos.grpo import Batch, GRPOConfig, bucket_length, fine_bucket, split_micro_batches
from textgym.algos.grpo.learner import AdamState, BaseLearner
from textgym.algos.grpo.lora import MERGED, adapter_names, load_adapter, save_adapter
from textgym.algos.grpo.prompts import PromptSplit, split_prompts
from textgym.algos.jax.lora import adapter_module, add_lora, from_peft, merge_lora, to_peft
from textgym.algos.jax.loss import grpo_loss
from textgym.algos.jax.model import JaxLanguageModel
from textgym.algos.jax.params import copy_side_files, export_params, load_params, merge_trees, path_to_hf, split_trainable
from textgym.algos.jax.sharding import batch_sharding, shard_params
from textgym.algos.jax.transformer import empty_cache, picked_logprobs, positions_from_mask, scored_logprobs, scored_positions
from textgym.error import CheckpointMismatch

# A row's prompt (its tokens before the first trained one) hardly varies within an env: multiples
# of 16. Continuations do, and every one of their tokens attends to all columns: fine_bucket keeps
# the waste small (a 25-token answer in 32 columns, not 64) and the compilations few.
_PROMPT_MULTIPLE = 16
_UNBOUNDED = 1 << 30


def make_schedule(optimizer: OptimizerConfig) -> optax.Schedule:
    """:meth:`OptimizerConfig.learning_rate` for optax: a table of its values, indexed by the
    step (traced inside the jitted update), every later step at the last value."""
    rates = jnp.asarray(optimizer.learning_rates(), jnp.float32)
    return lambda count: rates[jnp.minimum(count, len(rates) - 1)]


def make_optimizer(optimizer: OptimizerConfig) -> optax.GradientTransformation:
    """``clip_by_global_norm`` (unless ``max_grad_norm == 0``) chained with AdamW."""
    adamw = optax.adamw(
        make_schedule(optimizer),
        b1=optimizer.adam_beta1,
        b2=optimizer.adam_beta2,
        eps=optimizer.adam_eps,
        weight_decay=optimizer.weight_decay,
    )
    return optax.chain(optax.clip_by_global_norm(optimizer.max_grad_norm), adamw) if optimizer.max_grad_norm > 0 else adamw


def _logprobs(graphdef: nnx.GraphDef, config: GRPOConfig, params, micro: PromptSplit, at: jax.Array | None = None) -> jax.Array:
    """Logprobs ``(B, C)`` of the rows' continuations (:class:`~textgym.algos.grpo.batch.PromptSplit`).

    Each distinct prompt runs once into a KV cache; its rows are copied for the continuations
    that attend to them (gradients flow back through the copy). With ``at`` (the trained tokens'
    positions, :func:`~textgym.algos.jax.transformer.scored_positions`) the LM head runs there
    alone and the other tokens are 0; column 0 is always scored, by its prompt's last logits.
    """
    dtype = jnp.dtype(config.compute_dtype)
    model = nnx.merge(graphdef, jax.tree.map(lambda p: p.astype(dtype), params))
    prompt_mask, rows, ids = micro.prompt_mask, micro.source, micro.rest.input_ids
    width = prompt_mask.shape[1]
    kv_mask = jnp.pad(prompt_mask, ((0, 0), (0, ids.shape[1])))
    cache = empty_cache(model, prompt_mask.shape[0], kv_mask.shape[1], dtype)
    last, cache = model(micro.prompt_ids, positions_from_mask(prompt_mask), kv_mask, cache, 0, last_only=True)
    pick = jax.nn.one_hot(rows, prompt_mask.shape[0], dtype=dtype)  # (B, U)
    cache = jax.tree.map(partial(_copy_rows, pick), cache)
    kv_mask = jnp.concatenate([prompt_mask[rows], micro.rest.attention_mask], axis=1)
    first = picked_logprobs(_copy_rows(pick, last)[:, 0], ids[:, 0], config.temperature)  # (B,)
    if at is None:
        logits, _ = model(ids, micro.rest.positions, kv_mask, cache, width)
        rest = picked_logprobs(logits[:, :-1], ids[:, 1:], config.temperature)
    else:
        hidden, _ = model.hidden(ids, micro.rest.positions, kv_mask, cache, width)
        rest = scored_logprobs(model, hidden, ids, at, config.temperature)[:, 1:]
    return jnp.concatenate([first[:, None], rest], axis=1)


def _copy_rows(pick: jax.Array, x: jax.Array) -> jax.Array:
    """``x[rows]`` as a product with the one-hot ``pick`` ``(B, U)``: exact (finite ``x``, full
    precision, so no TF32 on GPUs), and its gradient is a matmul too, where a gather's is a
    scatter-add that XLA runs slowly on CPUs."""
    return jnp.einsum("bu,u...->b...", pick, x, precision=jax.lax.Precision.HIGHEST)


@partial(jax.jit, static_argnames=("ref_graphdef", "config"))
def reference_logprobs(ref_graphdef: nnx.GraphDef, config: GRPOConfig, ref_params, micros: PromptSplit, scored: jax.Array) -> jax.Array:
    """The KL reference's logprobs of every micro-batch, ``(n_micro, B, C)``: its weights are
    frozen, so a step's ``num_iterations`` updates share one run of it."""
    return jax.lax.map(lambda xs: _logprobs(ref_graphdef, config, ref_params, *xs), (micros, scored))


@partial(jax.jit, static_argnames=("graphdef", "config", "optimizer"), donate_argnames=("params", "opt_state"))
def update(
    graphdef: nnx.GraphDef,
    config: GRPOConfig,
    optimizer: OptimizerConfig,
    params,
    opt_state,
    micros: PromptSplit,
    scored: jax.Array,
    refs: jax.Array | None,
):
    """One optimiser step on micro-batches stacked as ``(n_micro, micro_batch_size, ...)``.

    ``scored`` ``(n_micro, K)``: each micro-batch's trained positions (see :func:`_logprobs`), the
    only ones the LM head runs at. ``refs``: :func:`reference_logprobs` of the micro-batches (None
    without a KL term).

    Static on the graph and the configs, so learners of one architecture share the compilation.

    Returns:
        ``(params, opt_state, metrics)``; metrics are sums over the micro-batches (each is
        additive, see :func:`textgym.algos.grpo.grpo_loss`) plus ``stats/grad_norm``.
    """

    trained, frozen = _split(params, config)  # only `trained` is differentiated

    def loss_fn(p, micro, at, ref):
        return grpo_loss(_logprobs(graphdef, config, merge_trees(p, frozen), micro, at), micro.rest, config, ref)

    def accumulate(grads, xs):
        (_, metrics), g = jax.value_and_grad(loss_fn, has_aux=True)(trained, *xs)
        return jax.tree.map(jnp.add, grads, g), metrics

    grads, metrics = jax.lax.scan(accumulate, jax.tree.map(jnp.zeros_like, trained), (micros, scored, refs))
    metrics = jax.tree.map(jnp.sum, metrics)
    metrics["stats/grad_norm"] = optax.tree.norm(grads)
    updates, opt_state = make_optimizer(optimizer).update(grads, opt_state, trained)
    trained = optax.apply_updates(trained, updates)
    return ({"base": frozen, "lora": trained} if config.lora_rank else merge_trees(trained, frozen)), opt_state, metrics


def _split(params, config: GRPOConfig):
    """``(trained, frozen)``: LoRA's adapters (the ``nnx.LoRAParam`` variables) and base, or the
    weights cut by ``trainable_layers``; :func:`merge_trees` makes the whole tree again."""
    return (params["lora"], params["base"]) if config.lora_rank else split_trainable(params, config.trainable_layers)


def scored_slots(trained: int, positions: int) -> int:
    """``K``, the positions a micro-batch's LM head runs at, for at most ``trained`` trained tokens
    among ``positions``: the least of an eighth, a quarter, a half or all of them that holds them.

    Every ``K`` is a shape the update compiles for (about 6 CPU-s on the tiny model). In
    ``fine_bucket`` steps of the count, most steps of a run compiled again: replaying 16 steps of
    a ``code-tiny`` run took 30 compilations, against 20 in these four shares. The head runs at
    most twice the positions it needs, a few percent of a small model's step.
    """
    for share in (8, 4, 2):
        if trained <= positions // share:
            return max(1, positions // share)
    return positions


def _pad_right(a: np.ndarray | None, columns: int) -> np.ndarray | None:
    """A right-padded ``(B, C)`` array widened with zeros to ``columns`` (``(B,)`` arrays and None as they are)."""
    return a if a is None or a.ndim == 1 else np.pad(a, ((0, 0), (0, columns - a.shape[1])))


def _pad_prompts(a: np.ndarray, rows: int, columns: int, fill: int) -> np.ndarray:
    """Left-padded prompts widened on the left to ``columns`` and given unused all-``fill`` rows up to ``rows``."""
    return np.pad(a, ((0, rows - a.shape[0]), (columns - a.shape[1], 0)), constant_values=fill)


class Learner(BaseLearner):
    """Trains a :class:`~textgym.algos.jax.model.JaxLanguageModel` with GRPO, updating its weights in place.

    Args:
        model: The language model to train (its ``params`` are replaced after every update).
        config: The GRPO configuration.
        mesh: A ``(data, fsdp)`` mesh from :func:`~textgym.algos.jax.sharding.make_mesh`, or None
            for one device. ``micro_batch_size`` must be a multiple of the mesh size.
        optimizer: The optimiser's settings; None: ``config.optimizer`` (the SFT warm start has its own).
    """

    def __init__(
        self,
        model: JaxLanguageModel,
        config: GRPOConfig,
        *,
        mesh: jax.sharding.Mesh | None = None,
        optimizer: OptimizerConfig | None = None,
    ):
        if mesh is not None and config.micro_batch_size % mesh.size:
            raise ValueError(f"micro_batch_size must be a multiple of the mesh size {mesh.size}, got {config.micro_batch_size}")
        if jax.process_count() > 1 and (mesh is None or mesh.shape["fsdp"] > 1):
            raise ValueError("over several JAX processes the learner is data-parallel: give it a mesh data=<all devices>")
        self.model, self.config, self.mesh = model, config, mesh
        self.is_writer = jax.process_index() == 0
        self.optimizer_config = optimizer or config.optimizer
        self.optimizer = make_optimizer(self.optimizer_config)
        self.schedule = make_schedule(self.optimizer_config)
        self.step = 0
        params = jax.tree.map(lambda a: jnp.array(a, jnp.float32, copy=True), model.params)
        self.graphdef = self.ref_graphdef = model.graphdef
        if config.lora_rank:  # the seeded adapters both backends start from; the base stays frozen
            self.graphdef, lora = add_lora(model.config, params, config)
            params = {"base": params, "lora": jax.tree.map(jnp.asarray, lora)}
        self.params = self._place(params)
        # The reference is the starting weights, frozen (LoRA: the base, see `_reference`); without a
        # KL term it is never needed.
        self.ref_params = jax.tree.map(jnp.copy, self.params) if config.kl_beta > 0 and not config.lora_rank else None
        self.opt_state = self._place(self.optimizer.init(_split(self.params, config)[0]))
        # The last batch's micro-batches, trained positions and reference logprobs, reused across its iterations.
        self._prepared: tuple[Batch, tuple[PromptSplit, np.ndarray, jax.Array | None]] | None = None
        if config.lora_rank:
            self._publish()  # from now on the model scores and samples through the adapted graph

    def _place(self, tree):
        if self.mesh is None:
            return tree
        # Host copies: a device array of one process cannot be placed on another's devices.
        return shard_params(jax.tree.map(np.asarray, tree) if jax.process_count() > 1 else tree, self.mesh)

    def _micro_batches(self, batch: Batch) -> tuple[PromptSplit, np.ndarray]:
        """Split every micro-batch at its prompts and stack them as ``(n_micro, rows, ...)`` for the
        scan, with each one's trained positions ``(n_micro, K)`` (``K``: :func:`scored_slots`)."""
        pad = self.model.pad_id
        splits = [split_prompts(m, pad, _PROMPT_MULTIPLE) for m in split_micro_batches(batch, self.config.micro_batch_size)]
        prompts = bucket_length(max(len(s.prompt_ids) for s in splits), _UNBOUNDED, min_bucket=1)
        width = max(s.prompt_ids.shape[1] for s in splits)
        columns = fine_bucket(max(s.rest.shape[1] for s in splits))
        arrays = ("input_ids", "attention_mask", "positions", "loss_mask", "loss_weights", "advantages", "old_logprobs", "is_weights")
        padded = [
            PromptSplit(
                _pad_prompts(s.prompt_ids, prompts, width, pad),
                _pad_prompts(s.prompt_mask, prompts, width, 0),
                s.source,
                s.rest.replace(
                    **{name: _pad_right(getattr(s.rest, name), columns) for name in arrays},
                    num_sequences=np.int32(batch.num_sequences),
                    env_errors=np.int32(batch.env_errors),
                    token_count=np.float32(batch.token_count),
                ),
            )
            for s in splits
        ]
        stacked = jax.tree.map(lambda *xs: np.stack(xs), *padded)
        trained = stacked.rest.loss_mask > 0  # (n_micro, B, C)
        slots = scored_slots(int(trained[:, :, 1:].sum(axis=(1, 2)).max()), trained[0].size)
        scored = np.stack([scored_positions(mask, slots) for mask in trained])
        if self.mesh is not None:
            replicated = NamedSharding(self.mesh, PartitionSpec())  # prompts are few and any row may read any of them
            rows = lambda x: jax.device_put(x, batch_sharding(self.mesh, x.ndim, 1) if x.ndim >= 2 else replicated)
            stacked = PromptSplit(
                jax.device_put(stacked.prompt_ids, replicated),
                jax.device_put(stacked.prompt_mask, replicated),
                rows(stacked.source),
                jax.tree.map(rows, stacked.rest),
            )
            scored = jax.device_put(scored, replicated)  # flat indices over all of a micro-batch's rows
        return stacked, scored

    def _reference(self, micros: PromptSplit, scored: np.ndarray) -> jax.Array | None:
        """:func:`reference_logprobs` of the micro-batches (None without a KL term)."""
        if self.config.kl_beta <= 0:
            return None
        ref_params = self.params["base"] if self.config.lora_rank else self.ref_params  # LoRA: the base model
        return reference_logprobs(self.ref_graphdef, self.config, ref_params, micros, scored)

    def _prepare(self, batch: Batch) -> tuple[PromptSplit, np.ndarray, jax.Array | None]:
        """``batch``'s micro-batches, trained positions and reference logprobs, made once for all
        the step's iterations (each calls :meth:`update` with the same batch)."""
        if self._prepared is None or self._prepared[0] is not batch:
            micros, scored = self._micro_batches(batch)
            self._prepared = (batch, (micros, scored, self._reference(micros, scored)))
        return self._prepared[1]

    def update(self, batch: Batch) -> dict[str, float]:
        """One jitted optimiser step over ``batch``'s micro-batches; see :meth:`BaseLearner.update`."""
        lr = float(self.schedule(self.step))
        micros, scored, refs = self._prepare(batch)
        self.params, self.opt_state, metrics = update(
            self.graphdef, self.config, self.optimizer_config, self.params, self.opt_state, micros, scored, refs
        )
        self.step += 1
        self._publish()
        return {k: float(_local(v)) for k, v in metrics.items()} | {"stats/lr": lr}

    def _publish(self) -> None:
        """Give the language model (the sampler) the new weights, in its own dtype (this process's copy),
        and the graph they fill (with LoRA, the adapted one: it samples with the adapters applied)."""
        dtype = jax.tree.leaves(self.model.params)[0].dtype
        weights = merge_trees(self.params["lora"], self.params["base"]) if self.config.lora_rank else self.params
        self.model.graphdef = self.graphdef
        self.model.params = jax.tree.map(lambda p: _local(p).astype(dtype), weights)

    def adapters(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The LoRA adapters' ``(A, B)`` by module, in peft's layout (float32 numpy copies)."""
        return to_peft(jax.tree.map(lambda x: np.array(_local(x)), self.params["lora"]))

    # ----- checkpoints (the layout of textgym.algos.grpo.learner) -----

    def export(self, directory: str | os.PathLike) -> None:
        """Write the current weights as a Hugging Face directory (float32) with the source's
        tokenizer files (process 0 only); with LoRA, the adapter in peft's format (and ``merged/``
        with ``lora_merge``)."""
        if self.is_writer and not self.config.lora_rank:
            export_params(jax.tree.map(_local, self.params), self.model.config, directory, source_dir=self.model.path)
        elif self.is_writer:
            save_adapter(directory, self.adapters(), self.config, self.model.path)
            copy_side_files(self.model.path, directory)
            if self.config.lora_merge:
                base, lora = (jax.tree.map(_local, self.params[k]) for k in ("base", "lora"))
                merged = merge_lora(base, lora, self.config.lora_scale)
                export_params(merged, self.model.config, Path(directory) / MERGED, source_dir=self.model.path)
        self._barrier()

    def _export_reference(self, directory: Path) -> None:
        export_params(jax.tree.map(_local, self.ref_params), self.model.config, directory)

    def _barrier(self) -> None:
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("textgym learner")

    def _restore_weights(self, directory: Path, reference: Path | None) -> None:
        if self.config.lora_rank:
            lora = from_peft(load_adapter(directory, self.adapters()), self.params["lora"])
            self.params = self._place({"base": self.params["base"], "lora": jax.tree.map(jnp.asarray, lora)})
            self._publish()
            return
        try:
            params = load_params(directory, self.model.config)
            ref = None if reference is None else load_params(reference, self.model.config)
        except ValueError as exc:
            raise CheckpointMismatch(f"checkpoint {str(directory)!r} does not match the model: {exc}") from exc
        self.params = self._place(jax.tree.map(jnp.asarray, params))
        if ref is not None:
            self.ref_params = self._place(jax.tree.map(jnp.asarray, ref))
        self._publish()

    def _adam_state(self) -> AdamState:
        # optax keeps AdamW's moments as `mu` and `nu` trees shaped like the trained parameters, and
        # update counts (Adam's, the schedule's) that all equal the number of updates taken.
        step, moments = 0, {}
        for path, leaf in jax.tree_util.tree_flatten_with_path(self.opt_state)[0]:
            field, param = _adam_leaf(path)
            value = np.asarray(_local(leaf))
            if field == "count":
                step = int(value)
                continue
            name, transpose = self._state_name(param)
            pair = moments.setdefault(name, [None, None])
            pair[_MOMENTS.index(field)] = value.T if transpose else value
        return step, {name: tuple(pair) for name, pair in moments.items()}

    def _load_adam_state(self, state: AdamState) -> None:
        step, moments = state
        paths, treedef = jax.tree_util.tree_flatten_with_path(self.opt_state)
        leaves = []
        for path, leaf in paths:
            field, param = _adam_leaf(path)
            if field == "count":
                value = np.asarray(step)
            else:
                name, transpose = self._state_name(param)
                value = moments[name][_MOMENTS.index(field)]
                value = value.T if transpose else value
            leaves.append(jnp.asarray(value, dtype=leaf.dtype))
        self.opt_state = self._place(jax.tree_util.tree_unflatten(treedef, leaves))

    def _state_name(self, param: tuple) -> tuple[str, bool]:
        """The checkpoint name of a trained parameter's path, and whether it is stored transposed:
        a LoRA adapter's ``lora_a`` or ``lora_b`` is peft's name of its ``A`` or ``B`` (transposed
        into torch's layout), a weight's path its Hugging Face name."""
        if self.config.lora_rank:
            module, factor = adapter_module(param)
            return adapter_names(module)[factor], True
        return path_to_hf(param)


def _local(x: jax.Array) -> jax.Array:
    """This process's copy of a replicated array (the array itself when one process holds it all)."""
    return x if x.is_fully_addressable else x.addressable_data(0)


_MOMENTS = ("mu", "nu")  # optax's names of MOMENTS, in the same order


def _adam_leaf(path: tuple) -> tuple[str, tuple]:
    """``("mu" | "nu", the parameter's path)`` or ``("count", ())`` for a leaf of the optax state.

    Raises:
        CheckpointMismatch: A leaf of another kind (an optimiser this layout does not describe).
    """
    for i, key in enumerate(path):
        name = getattr(key, "name", None)
        if name in _MOMENTS:
            return name, tuple(getattr(k, "key", getattr(k, "idx", None)) for k in path[i + 1 :])  # dict keys, tuple places
        if name == "count":
            return name, ()
    raise CheckpointMismatch(f"optimizer state leaf {jax.tree_util.keystr(path)} has no place in the checkpoint layout")
