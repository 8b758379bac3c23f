"""FSDP2 for the torch learner: the trained copy of the model sharded over the ranks.

With ``data_parallel="fsdp"`` and several ranks, the learner trains a copy of the language model's module
whose parameters, gradients and AdamW moments are split over the ranks: :func:`shard` applies
``fully_shard`` to each decoder layer, then to the root (FSDP2's recommended plan: a layer's
weights are gathered just before it runs and freed after). The root holds the token embedding
and the head, so a tied head stays one parameter with its embedding.

The language model keeps its whole module: each rank samples its own episodes, whose lengths differ, while
a sharded forward pass needs every rank to take part. After each update the learner gathers the
trained parameters into it (:func:`gather_into`), so sampling, the checkpoints rank 0 writes from
it and their layout are those of DDP; a restore loads the whole model and hands each rank its
shards (:func:`distribute_from`).
"""

from __future__ import annotations

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (or a peft model around one): the modules of
    the classes its ``_no_split_modules`` names.

    Raises:
        ValueError: The model names no such class, or has no module of them.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the transformers model
    classes = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in classes]
    if not layers:
        raise ValueError(f"cannot shard {type(base).__name__}: no decoder layers (its _no_split_modules: {sorted(classes)})")
    return layers


def shard(model: torch.nn.Module) -> torch.nn.Module:
    """``model``, in place, with each decoder layer and then the root sharded over the default process group."""
    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    return model


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole of a sharded tensor on every rank (a collective); any other tensor as it is."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def shard_like(like: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """This rank's shard of ``whole``, placed as the sharded tensor ``like`` is (every rank holds
    ``whole``, so nothing is sent); ``whole`` itself when ``like`` is not sharded."""
    if not isinstance(like, DTensor):
        return whole
    return distribute_tensor(whole.to(like.device), like.device_mesh, like.placements, src_data_rank=None)


@torch.no_grad()
def gather_into(sharded: torch.nn.Module, whole: torch.nn.Module) -> None:
    """Copy every trained parameter of ``sharded``, gathered, into ``whole``'s parameter of the same
    name (every rank takes part; frozen parameters never change, so they are not sent)."""
    targets = dict(whole.named_parameters())
    for name, param in sharded.named_parameters():
        if param.requires_grad:
            targets[name].copy_(full(param))


def distribute_from(whole: torch.nn.Module, sharded: torch.nn.Module) -> None:
    """Load ``whole``'s weights into ``sharded``: each rank keeps its own shards of them."""
    set_model_state_dict(sharded, whole.state_dict(), options=StateDictOptions(full_state_dict=True))
