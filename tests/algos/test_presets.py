"""One typed source of run configuration: presets are TrainConfigs applied in one place, flags and help
come from the fields' docs, and the command line resolves today's presets to the values they always had."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from textgym.algos.config import SFTConfig, TrainConfig, flags, presets
from textgym.algos.config.fields import field_docs
from textgym.algos.config.fields import plain as plain_text
from textgym.algos.grpo import GRPOConfig
from textgym.algos.train import command
from textgym.cli import main

SUDOKU = "textgym/Sudoku-v0"
# The resolved configs of these command lines, recorded before presets became TrainConfigs (the
# `preset` label aside, which now names the preset a run started from). One deliberate change: a
# standalone `textgym sft` that picks a preset now runs exactly the preset's warm start, whose
# max_length and micro_batch_size come from the preset's GRPO settings (as in `textgym train`).
PINNED = json.loads((Path(__file__).parent / "resolved_presets.json").read_text(encoding="utf-8"))


def train_args(*argv: str) -> TrainConfig:
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    return command.train_config_from_args(parser.parse_args(list(argv)))


def sft_args(*argv: str) -> SFTConfig:
    parser = argparse.ArgumentParser()
    command.add_sft_arguments(parser)
    return presets.sft_config(flags.given(parser.parse_args(list(argv)), SFTConfig))


def plain(config) -> dict:
    values = json.loads(json.dumps(dataclasses.asdict(config)))
    values.pop("preset")
    return values


@pytest.mark.parametrize(
    ("case", "config", "preset"),
    [
        ("tiny", lambda: train_args("--env", SUDOKU), "sudoku-tiny"),
        ("smollm2", lambda: train_args("--env", SUDOKU, "--model", "smollm2-135m"), "sudoku-smollm2"),
        ("tiny_warm", lambda: train_args("--env", SUDOKU).sft_config(), "sudoku-tiny"),
        ("smollm2_warm", lambda: train_args("--env", SUDOKU, "--model", "smollm2-135m").sft_config(), "sudoku-smollm2"),
        ("sft_tiny", lambda: sft_args("--env", SUDOKU), "sudoku-tiny"),
        # An env and model without a preset: the dataclasses' defaults.
        ("generic", lambda: train_args("--env", "textgym/Workplace-v0", "--model", "smollm2-135m", "--backend", "jax"), None),
        ("sft_generic", lambda: sft_args("--env", "textgym/Workplace-v0", "--model", "smollm2-135m"), None),
    ],
)
def test_todays_command_lines_resolve_to_the_values_they_always_had(case, config, preset):
    resolved = config()
    assert plain(resolved) == PINNED[case]
    assert resolved.preset == preset


def test_a_preset_alone_names_its_env_and_model_and_equals_the_implicit_choice():
    assert train_args("--preset", "sudoku-smollm2") == train_args("--env", SUDOKU, "--model", "smollm2-135m")
    assert train_args("--preset", "sudoku-tiny") == train_args("--env", SUDOKU)
    assert sft_args("--preset", "sudoku-tiny") == sft_args("--env", SUDOKU)
    # Flags go on top of the preset; the GRPO ones on top of its GRPO settings.
    cfg = train_args("--preset", "sudoku-tiny", "--backend", "jax", "--lr", "0.5", "--steps", "7")
    assert (cfg.backend, cfg.steps, cfg.output_dir, cfg.grpo.lr, cfg.grpo.num_iterations) == ("jax", 7, "runs/sudoku-v0-jax", 0.5, 2)
    assert cfg.grpo.total_steps == 14 and cfg.sft_lr == presets.SUDOKU_TINY.sft_lr


def test_a_flag_the_preset_also_sets_reaches_the_resolved_config_of_both_commands(capsys):
    preset = presets.SUDOKU_TINY
    assert (preset.grpo.lr, preset.sft_lr, preset.sft_steps) == (3e-4, 3e-3, 1600)  # what the flags below override
    cfg = train_args("--preset", "sudoku-tiny", "--lr", "1e-5", "--sft-lr", "2e-4", "--seed", "5")
    assert (cfg.grpo.lr, cfg.sft_lr, cfg.grpo.seed) == (1e-5, 2e-4, 5)
    assert cfg.sft_config().lr == 2e-4  # the warm start of `textgym train`
    warm = sft_args("--preset", "sudoku-tiny", "--lr", "1e-5", "--steps", "7")
    assert (warm.lr, warm.steps, warm.optimizer.total_steps) == (1e-5, 7, 7)
    # What --print-config prints is that config, for both commands.
    assert main(["train", "--preset", "sudoku-tiny", "--lr", "1e-5", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["grpo"]["lr"], printed["sft_lr"]) == (1e-5, preset.sft_lr)
    assert main(["sft", "--preset", "sudoku-tiny", "--lr", "1e-5", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["lr"] == 1e-5


def test_resolving_is_done_once_and_a_resolved_config_resolves_to_itself():
    from textgym.algos.train.loop import join_run

    for preset in presets.PRESETS.values():
        once = preset.resolved()
        assert once != preset and once.resolved() is once
        warm = once.sft_config()
        assert warm.resolved() is warm and preset.sft_config() == warm
    for config in (train_args("--preset", "sudoku-tiny", "--lr", "1e-5"), sft_args("--env", SUDOKU, "--lr", "1e-5")):
        assert config.resolved() is config
    # train() runs the command line's config as it is, and resolves a config built in Python.
    cfg = train_args("--env", SUDOKU, "--steps", "3")
    assert join_run(cfg) is cfg
    built = TrainConfig(env=SUDOKU, steps=3)
    assert join_run(built) == built.resolved() and built.resolved().grpo.total_steps == 3


def test_lora_on_the_command_line_replaces_a_presets_layer_freezing(capsys):
    # sudoku-smollm2 freezes all but the top 8 layers; --lora-rank trains adapters instead, in both commands.
    for config in (
        train_args("--preset", "sudoku-smollm2", "--lora-rank", "16").grpo,
        sft_args("--preset", "sudoku-smollm2", "--lora-rank", "16"),
    ):
        assert (config.lora_rank, config.trainable_layers) == (16, None)
    assert train_args("--preset", "sudoku-smollm2").grpo.trainable_layers == 8
    # Both named at once still exclude each other: one error line.
    assert main(["train", "--preset", "sudoku-smollm2", "--lora-rank", "16", "--trainable-layers", "8", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "exclude each other" in err and len(err.strip().splitlines()) == 1


def test_presets_are_valid_configs_that_name_themselves():
    for name, preset in presets.PRESETS.items():
        assert isinstance(preset, TrainConfig) and preset.preset == name
        first = next(p for p in presets.PRESETS.values() if (p.env, p.model) == (preset.env, preset.model))
        assert presets.preset_for(preset.env, preset.model) is first  # an env and model's first preset is its default
        assert presets.named(name).resolved().sft_config().preset == name
    with pytest.raises(ValueError, match="sudoku-tiny"):
        presets.named("nope")


def test_print_config_prints_the_resolved_run_and_runs_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--preset", "sudoku-tiny", "--steps", "3", "--output-dir", str(out), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["env"] == SUDOKU and printed["model"] == "tiny" and printed["steps"] == 3
    assert printed["grpo"]["total_steps"] == 6 and printed["grpo"]["lr"] == presets.SUDOKU_TINY.grpo.lr
    assert not out.exists()
    assert main(["sft", "--preset", "sudoku-smollm2", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output_dir"] == "runs/sudoku-v0-sft-torch" and printed["trainable_layers"] == 8


def test_a_run_without_env_or_preset_is_a_one_line_error(capsys):
    assert main(["train", "--steps", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textgym train: error:") and "--preset" in err and len(err.strip().splitlines()) == 1
    assert main(["train", "--preset", "nope"]) == 2
    assert "sudoku-tiny" in capsys.readouterr().err


def test_help_and_docstrings_come_from_the_field_docs():
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    for cls, skip in ((TrainConfig, {"grpo"}), (GRPOConfig, {"seed"})):
        for name, doc in field_docs(cls).items():
            assert doc, f"{cls.__name__}.{name} has no doc"
            if name not in skip:
                assert actions[name].help.startswith(plain_text(doc)), name
            assert f"    {name}: " in cls.__doc__, name  # the Attributes section is generated from the same docs
    text = subprocess.run([sys.executable, "-m", "textgym.cli", "train", "--help"], capture_output=True, text=True).stdout
    assert "--print-config" in text and "sudoku-smollm2" in text and "--kl-beta" in text


def test_tuple_flags_parse_their_element_type():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Knobs:
        layers: tuple[int, ...] = (1, 2)
        names: tuple[str, ...] | None = None

    parser = argparse.ArgumentParser()
    flags.add_fields(parser, Knobs)
    args = parser.parse_args(["--layers", "3,4", "--names", "a,b"])
    assert args.layers == (3, 4) and args.names == ("a", "b")
    assert train_args("--env", "a/X-v0", "--env", "a/Y-v0", "--env-weights", "1,3").env_weights == (1.0, 3.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["--layers", "1.5"])


def test_choice_fields_are_validated_once_on_the_config():
    with pytest.raises(ValueError, match="backend must be one of 'jax', 'torch'"):
        TrainConfig(env=SUDOKU, backend="tf")
    with pytest.raises(ValueError, match="chat_template"):
        SFTConfig(env=SUDOKU, chat_template="nope")


def test_the_docs_field_tables_are_generated_from_the_field_docs():
    from textgym.algos.config.fields import render_tables
    from textgym.algos.config.tables import config_classes

    page = Path(__file__).parents[2] / "docs" / "trainers.md"
    text = page.read_text(encoding="utf-8")
    assert text.count("<!-- fields: ") == 3
    assert render_tables(text, config_classes()) == text, "run: python -m textgym.algos.config.tables docs/trainers.md"


@pytest.mark.parametrize("weights", ["nan,1", "inf,1", "1,-1", "0,0"])
def test_env_weights_must_be_finite_non_negative_and_sum_above_zero(weights, capsys):
    from textgym.cli import main

    code = main(["train", "--env", "textgym/Sudoku-v0", "--env", "textgym/Code-v0", "--env-weights", weights, "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "finite env weights" in err and err.count("\n") == 1, err


def test_tiny_layers_deepens_the_tiny_model_and_only_it(tmp_path):
    from textgym.algos import models

    path = models.resolve("tiny", tmp_path, seed=0, tiny_layers=4)
    assert json.loads((path / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"] == 4
    assert train_args("--env", SUDOKU, "--tiny-layers", "4").sft_config().tiny_layers == 4
    with pytest.raises(ValueError, match="tiny_layers is for model='tiny'"):
        TrainConfig(env=SUDOKU, model="smollm2-135m", tiny_layers=4)
    with pytest.raises(ValueError, match="tiny_layers must be >= 1"):
        SFTConfig(env=SUDOKU, tiny_layers=0)


def test_fsdp_is_a_torch_choice_that_a_warm_start_inherits(capsys):
    assert train_args("--env", SUDOKU, "--data-parallel", "fsdp").sft_config().data_parallel == "fsdp"
    assert sft_args("--env", SUDOKU, "--data-parallel", "fsdp").data_parallel == "fsdp"
    for config in (TrainConfig, SFTConfig):
        with pytest.raises(ValueError, match="data_parallel='fsdp' is for the torch backend.*--mesh"):
            config(env=SUDOKU, backend="jax", data_parallel="fsdp")
    code = main(["train", "--env", SUDOKU, "--backend", "jax", "--data-parallel", "fsdp", "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--mesh" in err, err
