"""Data-parallel and fully-sharded (FSDP) placement on a ``jax.sharding`` mesh.

The mesh has two axes: ``data`` replicates parameters and splits the batch, ``fsdp`` splits both
(each parameter along its largest dimension that the axis size divides). XLA inserts the
all-gathers and reduce-scatters; the step function is the same one as on a single device, so the
same code runs on host CPUs, GPUs and TPUs.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXES = ("data", "fsdp")


def device_count() -> int:
    """The devices of every process of the run (``jax.device_count()``)."""
    return jax.device_count()


def make_mesh(data: int = 1, fsdp: int | None = None, devices=None) -> Mesh:
    """A ``(data, fsdp)`` mesh; ``fsdp=None`` gives every device not used by ``data`` to FSDP.

    Raises:
        ValueError: ``data * fsdp`` is not the number of devices.
    """
    devices = np.asarray(jax.devices() if devices is None else devices)
    fsdp = devices.size // data if fsdp is None else fsdp
    if data < 1 or fsdp < 1 or data * fsdp != devices.size:
        raise ValueError(f"expected data * fsdp == {devices.size} devices, got data={data}, fsdp={fsdp}")
    return Mesh(devices.reshape(data, fsdp), AXES)


def param_spec(shape: tuple[int, ...], fsdp: int) -> PartitionSpec:
    """Shard the largest dimension that ``fsdp`` divides; replicate small or indivisible arrays."""
    dims = sorted(range(len(shape)), key=lambda d: -shape[d])
    for d in dims:
        if fsdp > 1 and shape[d] % fsdp == 0:
            spec = [None] * len(shape)
            spec[d] = "fsdp"
            return PartitionSpec(*spec)
    return PartitionSpec()


def shard_params(tree, mesh: Mesh):
    """Place a parameter (or optimiser-state) tree on ``mesh`` with :func:`param_spec`."""
    fsdp = mesh.shape["fsdp"]
    return jax.tree.map(lambda x: jax.device_put(x, NamedSharding(mesh, param_spec(np.shape(x), fsdp))), tree)


def batch_sharding(mesh: Mesh, ndim: int, row_axis: int) -> NamedSharding:
    """Split axis ``row_axis`` (the sequences) of an ``ndim``-array over both mesh axes."""
    spec = [None] * ndim
    spec[row_axis] = AXES
    return NamedSharding(mesh, PartitionSpec(*spec))
