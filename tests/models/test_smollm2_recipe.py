"""The ``sudoku-smollm2`` preset: what ``textgym train --model smollm2-135m --env textgym/Sudoku-v0``
resolves to, and (slow) that its layer freezing holds on the real model in both backends."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest

from textgym.algos.config import SFTConfig, presets

ENV = "textgym/Sudoku-v0"
PRESET = presets.PRESETS["sudoku-smollm2"]


def test_the_preset_is_picked_by_env_and_model_and_reaches_the_warm_start():
    cfg = presets.train_config({"env": ENV, "model": "smollm2-135m"})
    assert cfg.env_kwargs == {"size": 4, "blanks": 1, "max_turns": 1}
    assert cfg.chat_template == "compact"  # "auto" takes the preset's template
    layers = PRESET.grpo.trainable_layers
    assert cfg.grpo.trainable_layers == layers and 0 < layers < 30  # SmolLM2-135M has 30
    assert cfg.steps == PRESET.steps and cfg.sft_steps == PRESET.sft_steps and cfg.threads == 2
    assert cfg.grpo.total_steps == cfg.steps * cfg.grpo.num_iterations
    warm = cfg.sft_config()
    assert warm.trainable_layers == layers and warm.chat_template == "compact" and warm.lr == PRESET.sft_lr
    assert warm.oracle_kwargs == PRESET.sft_oracle_kwargs and warm.env_kwargs == cfg.env_kwargs
    # A bare `textgym sft` with the model gets the same warm start.
    alone = presets.sft_config({"env": ENV, "model": "smollm2-135m"})
    assert (alone.trainable_layers, alone.chat_template, alone.steps) == (layers, "compact", PRESET.sft_steps)


def test_explicit_settings_win_over_the_preset():
    from textgym.algos.train import command

    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    args = parser.parse_args(["--env", ENV, "--model", "smollm2-135m", "--trainable-layers", "3", "--chat-template", "model"])
    cfg = command.train_config_from_args(args)
    assert cfg.grpo.trainable_layers == 3 and cfg.chat_template == "model" and cfg.grpo.lr == PRESET.grpo.lr
    assert cfg.sft_config().trainable_layers == 3
    # The tiny model keeps its own preset (no freezing, its compact template by "auto").
    tiny = presets.train_config({"env": ENV, "model": "tiny"})
    assert tiny.grpo.trainable_layers is None and tiny.chat_template == "auto"


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.filterwarnings("ignore:the chat template")
def test_a_frozen_warm_start_of_smollm2_moves_only_the_top_layers_alike_in_both_backends(smollm2_cache, tmp_path):
    """Two SFT steps (the first is warm-up, at lr 0) of the top 2 of 30 layers: the embedding and
    layers 0-27 come back bit-identical, and both backends move the trained weights alike."""
    from safetensors.numpy import load_file

    from textgym.algos import models
    from textgym.algos.train.sft import sft

    base = SFTConfig(
        env=ENV,
        model=models.SMOLLM2,
        steps=2,
        demos=2,
        batch_size=2,
        micro_batch_size=2,
        trainable_layers=2,
        num_envs=2,
        threads=1,
        progress=False,
    )
    finals = {b: sft(dataclasses.replace(base, backend=b, output_dir=str(tmp_path / b))) for b in ("torch", "jax")}
    start = load_file(str(models.resolve(models.SMOLLM2, progress=False) / "model.safetensors"))
    after = {b: load_file(str(d / "model.safetensors")) for b, d in finals.items()}
    trained = {n for n in start if n.startswith(("model.layers.28.", "model.layers.29.")) or n == "model.norm.weight"}
    for name, before in start.items():
        dt, dj = (after["torch"][name] - before).ravel(), (after["jax"][name] - before).ravel()
        if name not in trained:
            assert not dt.any() and not dj.any(), name
        elif name.endswith("proj.weight"):
            assert float(dt @ dj / (np.linalg.norm(dt) * np.linalg.norm(dj))) > 0.9, name
