"""The commands ``textgym train`` and ``textgym sft``: flags generated from the configs
(:mod:`textgym.algos.config.flags`), one merge of the flags given and the preset into the resolved
config (:mod:`textgym.algos.config.presets`), then the run of that config, here or as ``--nproc``
processes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from textgym.algos.config import GRPOConfig, SFTConfig, TrainConfig, flags, presets
from textgym.algos.config.fields import to_json
from textgym.algos.distributed import launch, processes
from textgym.algos.models.files import check_model_dir
from textgym.algos.rollouts import ahead
from textgym.algos.train.loop import train
from textgym.algos.train.report import print_summary
from textgym.algos.train.run_dir import check_resume_world_size, claim_run_dir, resumable_checkpoint
from textgym.algos.train.trackers import check_installed
from textgym.arguments import check_env_ids


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym train``: every ``TrainConfig`` field, every ``GRPOConfig`` field but ``seed``,
    and ``--print-config``."""
    flags.add_fields(parser, TrainConfig, skip=("grpo",), repeat=("env", "env_url"))
    group = parser.add_argument_group("GRPO (textgym.algos.grpo.GRPOConfig; unset: the preset's value, else the default)")
    flags.add_fields(group, GRPOConfig, skip=("seed",))  # --seed seeds the whole run
    _add_print_config(parser)
    launch.add_arguments(parser)


def run_train(args: argparse.Namespace) -> int:
    """``textgym train``: build the config from ``args``, train, print the before/after summary
    (``--nproc N``: launch N processes that do so)."""
    config = train_config_from_args(args)
    if args.print_config:
        print(to_json(config), end="")
        return 0
    if launch.wants_launch(args):
        check_before_launch(config, args.nproc)
    return _run_in_processes(config, args, train, print_summary)


def _run_in_processes(config: TrainConfig | SFTConfig, args: argparse.Namespace, job: Callable, report: Callable) -> int:
    """Run ``job(config)`` here, or launch the ``--nproc`` processes that each run this command line;
    only the process that writes run files reports ``job``'s result."""
    check_installed(config.report_to)  # a missing tracker is one line before any process starts
    if launch.wants_launch(args):
        if config.backend == "jax":
            return launch.run_jax_processes(args.nproc, args.command_line)
        return launch.run_torchrun(args.nproc, args.command_line)
    try:
        processes.init(config.backend, **launch.process_flags(args))
        result = job(config)
        writer = processes.is_writer()
    finally:
        processes.destroy()
    if writer:
        report(result)
    return 0


def check_before_launch(config: TrainConfig, nproc: int) -> None:
    """What every one of ``nproc`` processes would refuse about the resolved ``config``, said once
    before they start."""
    if config.prompts_per_step % nproc:
        raise ValueError(
            f"prompts_per_step ({config.prompts_per_step}) must be a multiple of the number of processes "
            f"({nproc}): each process plays whole GRPO groups"
        )
    ahead.check_processes(config.grpo.max_off_policy_steps, nproc)
    check_env_ids(config.envs)
    out = Path(config.output_dir)
    claim_run_dir(out)  # a directory of the user's own files: refused, and left as it is
    if Path(config.model).is_dir():
        check_model_dir(config.model)
    checkpoint, _ = resumable_checkpoint(out) if config.resume else (None, 0)
    if checkpoint is not None:
        check_resume_world_size(checkpoint, nproc)


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The resolved ``TrainConfig`` of a command line (see :func:`textgym.algos.config.presets.train_config`)."""
    run = flags.given(args, TrainConfig, skip=("grpo",))
    return presets.train_config(run, flags.given(args, GRPOConfig, skip=("seed",)))


def add_sft_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym sft``: every ``SFTConfig`` field, and ``--print-config``."""
    flags.add_fields(parser, SFTConfig, repeat=("env",))
    _add_print_config(parser)
    launch.add_arguments(parser)


def run_sft(args: argparse.Namespace) -> int:
    """``textgym sft``: warm-start a model on oracle demonstrations; print where it was written."""
    from textgym.algos.train.sft import sft

    config = presets.sft_config(flags.given(args, SFTConfig))
    if args.print_config:
        print(to_json(config), end="")
        return 0
    return _run_in_processes(config, args, sft, lambda final: print(f"SFT model written to {final}"))


def _add_print_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--print-config", action="store_true", help="print the run's resolved configuration as JSON and exit without running it"
    )
    parser.epilog = f"presets (--preset NAME, alone or with other flags on top): {', '.join(presets.PRESETS)}"
