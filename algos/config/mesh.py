"""The JAX device mesh a run's ``mesh`` setting names (``--mesh data=2,fsdp=4``), checked when the
config is made and built by the JAX backend (:func:`textgym.algos.backends.make_learner`)."""

from __future__ import annotations


def parse_mesh(spec: str) -> dict[str, int]:
    """``"data=N,fsdp=M"`` (either axis may be left out: 1 for data, the rest of the devices for fsdp).

    Example:
        >>> parse_mesh("data=2,fsdp=4")
        {'data': 2, 'fsdp': 4}

    Raises:
        ValueError: Another axis, a repeated one, or a size that is not a positive integer.
    """
    axes: dict[str, int] = {}
    for part in spec.split(","):
        name, _, size = part.strip().partition("=")
        if name not in ("data", "fsdp") or name in axes or not size.isdigit() or int(size) < 1:
            raise ValueError(f"expected a mesh like 'data=2,fsdp=4', got {spec!r}")
        axes[name] = int(size)
    return axes
