"""Linear layers whose weights are packed once per sampler call for oneDNN (CPU only).

A decode step multiplies a few rows (one per sampled sequence) by every weight matrix. MKL's GEMM,
which ``nn.Linear`` calls on a CPU, re-packs the weight into its blocked layout on every call; at
8 rows that costs more than the product itself. Measured on this project's loaded 2-core Xeon (one
thread, CPU time): 30 products of 8 x 576 by 576 x 1536 took 26-35 ms through ``F.linear`` and
15 ms with the weight packed once by ``torch.ops.mkldnn._reorder_linear_weight`` (the kernels
torch.compile's CPU freezing uses); a SmolLM2-135M decode step at 8 rows went from 223 to 178 ms,
its prefill of 8 x 450 tokens from 10.6 to 9.3 s, and packing its 211 linears costs 0.47 s.

The packed product sums in another order than MKL's, so float32 logits move by ~1e-7 relative
(9e-5 absolute on SmolLM2's logits): a seed's tokens can differ from the unpacked sampler's where
two tokens' cumulative probabilities straddle the uniform draw. See docs/benchmarks.md.

A multi-turn episode calls the sampler once a turn with the same weights: :class:`PackedWeights`
keeps the packed copies from one call to the next until a weight changes, so a turn that prefills
a few new tokens and decodes a few dozen does not pay the 0.47 s again. It costs a second copy of
the linear weights while the model is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


class PackedLinear(nn.Module):
    """``linear(x)`` with ``linear.weight`` packed for oneDNN; the weights stay shared, not trained."""

    def __init__(self, linear: nn.Linear, rows: int):
        super().__init__()
        self.linear = linear
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), rows)

    @property
    def weight(self) -> torch.Tensor:
        """The original weight (peft's LoRA layers read their sub-layers' ``weight``)."""
        return self.linear.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.linear.bias, "none", [], "")


def native_bf16() -> bool:
    """Whether oneDNN multiplies bfloat16 natively on this CPU (AVX512-BF16 or AMX); without it a
    bfloat16 product falls back to a generic kernel, slower than float32's."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def can_pack(model: nn.Module) -> bool:
    """oneDNN is built in, the weights are on the CPU, in float32 (or bf16 with native bf16 support)."""
    weight = next(model.parameters())
    if weight.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if weight.dtype == torch.bfloat16:
        return native_bf16()
    return weight.dtype == torch.float32


@contextmanager
def packed_linears(model: nn.Module, rows: int, packed: dict[str, PackedLinear] | None = None) -> Iterator[nn.Module]:
    """Within the block, every ``nn.Linear`` of ``model`` runs on a packed copy of its weight.

    The weights are packed on entry (so they are always the current ones: a learner step between
    two calls needs no invalidation), or taken from ``packed`` (name -> module) where it has them
    (filled with the ones packed here), and the original modules are put back on exit, whatever
    happened. ``rows`` is oneDNN's hint of the rows per product. Where :func:`can_pack` says no,
    the model runs as it is.
    """
    linears = [(name, m) for name, m in model.named_modules() if type(m) is nn.Linear] if can_pack(model) else []
    packed = {} if packed is None else packed
    try:
        for name, linear in linears:
            if name not in packed:
                packed[name] = PackedLinear(linear, rows)
            model.set_submodule(name, packed[name])
        yield model
    finally:
        for name, linear in linears:
            model.set_submodule(name, linear)


class PackedWeights:
    """Packed linears kept across sampler calls while the weights and the row hint stay the same."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._packed: dict[str, PackedLinear] = {}

    def get(self, model: nn.Module, rows: int, weights: tuple) -> dict[str, PackedLinear]:
        """The ``packed`` argument of :func:`packed_linears`: the last call's modules if ``(model, rows,
        weights)`` is the same (``weights``: a stamp of the parameters that moves whenever one changes)."""
        key = (id(model), rows, weights)
        if key != self._key:
            self._key, self._packed = key, {}
        return self._packed
