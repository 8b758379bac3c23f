"""What ``TrainConfig`` and ``SFTConfig`` share, written once for both: the metadata that ties an SFT field
to the ``TrainConfig`` field a warm start takes it from, and the checks and look-ups of their common fields."""

from __future__ import annotations

from typing import Any


def warm_start(source: str) -> dict[str, str]:
    """Field metadata: a warm start of ``textgym train`` takes this SFT field from ``source``, a
    ``TrainConfig`` attribute (``grpo.<name>`` for one of its GRPO settings)."""
    return {"warm_start": source}


def distinct_ids(envs: Any) -> tuple[str, ...]:
    envs = tuple(envs)
    if not envs or len(set(envs)) != len(envs):
        raise ValueError(f"expected one or more distinct env ids, got {list(envs)}")
    return envs


def trackers(value: Any) -> tuple[str, ...]:
    """``report_to`` as a tuple without repeats; a string is read as the command line's comma-separated list
    (TRL's ``report_to="tensorboard,wandb"``; ``"none"``: none)."""
    if isinstance(value, str):
        value = [] if value.strip() == "none" else [v.strip() for v in value.split(",") if v.strip()]
    return tuple(dict.fromkeys(value))


def env_entry(value: dict[str, Any] | None, envs: tuple[str, ...], env: str) -> dict[str, Any] | None:
    """``value`` for ``env``: its entry when ``value`` is keyed by the env ids of a mixture, else ``value``."""
    if value is not None and len(envs) > 1 and value and set(value) <= set(envs):
        value = value.get(env)
    return None if value is None else dict(value)


def attribute(config: Any, path: str) -> Any:
    """``config``'s attribute at a dotted ``path``; a numeric part indexes a tuple."""
    for part in path.split("."):
        config = config[int(part)] if part.isdigit() else getattr(config, part)
    return config


def check_positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def check_tiny_layers(config: Any) -> None:
    if config.tiny_layers is not None and str(config.model) != "tiny":
        raise ValueError(f"tiny_layers is for model='tiny', got model={str(config.model)!r}")
    if config.tiny_vocab != "bytes" and str(config.model) != "tiny":
        raise ValueError(f"tiny_vocab is for model='tiny', got model={str(config.model)!r}")


def check_data_parallel(config: Any) -> None:
    if config.data_parallel == "fsdp" and config.backend != "torch":
        raise ValueError(
            f"data_parallel='fsdp' is for the torch backend, got backend={config.backend!r} (JAX shards with --mesh, e.g. 'data=1,fsdp=N')"
        )


def default_output_dir(env: str | tuple[str, ...], suffix: str) -> str:
    """``runs/<env name>-<suffix>`` (a mixture joins its env names with ``+``).

    Example:
        >>> default_output_dir(("textgym/Sudoku-v0", "textgym/Code-v0"), "jax")
        'runs/sudoku-v0+code-v0-jax'
    """
    envs = (env,) if isinstance(env, str) else env
    return "runs/" + "+".join(e.split("/")[-1].lower() for e in envs) + f"-{suffix}"
