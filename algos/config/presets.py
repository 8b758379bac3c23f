"""Named presets: settings under which a model learns an env on a laptop CPU (the ``tiny`` model, SmolLM2-135M).

A preset is a whole :class:`~textgym.algos.config.TrainConfig`, its env, model and GRPO settings
included, so it is checked like any config when this module is imported; ``textgym sft`` runs its
warm start (:meth:`~textgym.algos.config.TrainConfig.sft_config`). To add a preset, write one more
``TrainConfig(preset="name", ...)`` and list it in :data:`PRESETS`.

This module is also the one path from a command line to its config. :func:`train_config` and
:func:`sft_config` merge, in one place, three layers: the dataclasses' defaults, under the preset
the command line names with ``--preset`` (else the one made for its env and model, if there is
one), under the flags it was given (only those: :func:`textgym.algos.config.flags.given`). Then
they resolve the result once (:meth:`~textgym.algos.config.TrainConfig.resolved`: ``output_dir``,
``sft_lr``, ``grpo.seed``, ``grpo.total_steps``). ``--lr 1e-4`` thus goes from argparse to
``flags.given`` to :func:`train_config`, and the config it returns is the one the run reads, the
one ``--print-config`` prints and the one ``config.json`` records; ``train()`` and ``sft()``
resolve only a config built in Python, and a resolved config resolves to itself.

The numbers come from the runs recorded in docs/benchmarks.md ("Sudoku 4x4 with the tiny model
(the README run)", "Code-v0 with two attempts: code-tiny", "Workplace-v0 in two turns: workplace-tiny") and
docs/models.md ("Learning on SmolLM2").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.grpo import GRPOConfig
from textgym.algos.models import SMOLLM2
from textgym.algos.models.tiny import NAME as TINY

SUDOKU_TINY = TrainConfig(
    preset="sudoku-tiny",
    env="textgym/Sudoku-v0",
    model=TINY,
    # 4x4 with one blank, answered in one turn with the grid: prompts of ~130 tokens. The
    # demonstrations answer in the compact form (digits only, one row per line: ~23 tokens
    # instead of ~100 for the drawn board), which gets the tiny model past copying the givens.
    # They come from a noisy demonstrator (each blank a random digit: right a quarter of the
    # time), so the warm start learns the format but not the rule (16-39% held-out once SFT
    # has converged) and GRPO learns the rule from the verifier; a clean oracle leaves it
    # nothing (80-96%).
    env_kwargs={"size": 4, "blanks": 1, "max_turns": 1},
    sft_oracle_kwargs={"compact": True, "noise": 1.0},
    steps=200,
    prompts_per_step=16,
    # 1600 steps: the warm start must copy the givens reliably and guess the blank at chance.
    # At 400 steps the copy phase had ended in some seeds and not in others (SFT loss 0.07-0.16
    # against a floor of ~0.055 nats per token, the guessed blank's), so at temperature 1
    # between 11% and 64% of the answers altered a given and GRPO spent its steps, or failed,
    # on copying. At 800 the runs whose SFT had not reached the floor started higher and
    # gained least (JAX seed 2: +18 points); at 1600 every seed's gain is +25 or more
    # (docs/benchmarks.md).
    sft_steps=1600,
    sft_demos=2000,
    sft_lr=3e-3,
    threads=1,
    grpo=GRPOConfig(
        group_size=8,
        lr=3e-4,  # 5e-4 and 1e-3 were unstable (docs/benchmarks.md)
        # Cosine decay to 0 over the run (total_steps = steps x num_iterations) after a short
        # warm-up: at a constant 3e-4 a run fell below its warm start at step 190 of 200 and
        # its training reward collapsed for five steps; the decay leaves the last steps little
        # room to undo what the first ones learned.
        lr_schedule="cosine",
        warmup_steps=10,
        num_iterations=2,  # two updates per batch learned faster per second than one
        max_new_tokens=64,
        max_length=512,
        micro_batch_size=32,
        temperature=1.0,
        max_grad_norm=1.0,
        advantage_scaling="group",
        loss_aggregation="token-mean",
    ),
)

# SmolLM2-135M-Instruct on the same task, sized for a two-core CPU: see docs/models.md ("Learning on
# SmolLM2") for the runs behind these numbers and what did not work.
SUDOKU_SMOLLM2 = TrainConfig(
    preset="sudoku-smollm2",
    env="textgym/Sudoku-v0",
    model=SMOLLM2,
    # The compact ChatML template (no system turn, no tool list): prompts of 79 tokens instead of
    # 706 with the rules and the place tool, so the model learns the task from demonstrations.
    env_kwargs={"size": 4, "blanks": 1, "max_turns": 1},
    chat_template="compact",
    # noise=1.0 (the blank a uniform guess): the warm start learns the format, not the rule
    # (25.8% greedy); with noise=0.5 SmolLM2 learns the rule from the demonstrations (78.1%).
    sft_oracle_kwargs={"compact": True, "noise": 1.0},
    # 30 GRPO steps, not 60: a whole run (SFT, GRPO, four evaluations) then fits the 45-minute
    # budget on one core; at 60 steps torch seed 0 had gained +14.8 points by step 30.
    steps=30,
    prompts_per_step=8,
    # 96 steps at 1e-3, not 24 at 5e-4: the warm start must copy the givens when it samples at
    # temperature 1 (after 24 steps no sampled answer of 32 solved a puzzle: rows of the wrong
    # length, altered givens); at 96 the loss reaches the guessed blank's floor.
    sft_steps=96,
    sft_demos=1536,
    sft_lr=1e-3,
    threads=2,
    grpo=GRPOConfig(
        group_size=8,
        # The top 8 of 30 layers and the final norm: the backward pass stops at layer 22
        # of 30 and the tied 28M-parameter embedding stays as it is.
        trainable_layers=8,
        lr=1e-4,
        lr_schedule="cosine",
        warmup_steps=3,
        filter_zero_std_groups=True,  # all-equal groups carry no gradient; dropping them saves update time
        max_new_tokens=40,
        max_length=160,
        micro_batch_size=16,
        temperature=1.0,
        max_grad_norm=1.0,
        advantage_scaling="group",
        loss_aggregation="token-mean",
    ),
)

# Sudoku by moves: one `place` call a turn, the board fed back after each, three blanks and up to
# eight turns. See docs/benchmarks.md ("Turn-level credit on sudoku-moves-tiny") for the runs behind
# these numbers and what did not work.
SUDOKU_MOVES_TINY = TrainConfig(
    preset="sudoku-moves-tiny",
    env="textgym/Sudoku-v0",
    model=TINY,
    # Four layers, not two: two layers learned the call's format but put most moves on given
    # cells; four find the first blank of the last board.
    tiny_layers=4,
    # The BPE vocabulary trained on the envs' text: a move is fewer tokens than in bytes.
    tiny_vocab="bpe",
    # The compact board (digits and dots). Eight turns, five of them spare: a rejected digit
    # comes back with the reason and the episode goes on. With four turns (one spare) the warm
    # start solved 5.5% and GRPO's groups were almost all failures.
    env_kwargs={"size": 4, "blanks": 3, "max_turns": 8, "board": "compact"},
    # Demonstrations of four turns at most from a demonstrator that guesses 10% of its digits,
    # trained only on the moves the env paid for (the dense reward marks them): the rejections stay
    # as context, so the model sees a recovery without learning to guess. It reads the board
    # (P(right digit) 0.56, 0.49 and 0.42, seeds 0-2); the earlier demonstrator, guessing half its
    # digits on every trained turn, taught a guess (0.25) and a warm start of 18.8% (this: 45.3%).
    sft_env_kwargs={"size": 4, "blanks": 3, "max_turns": 4, "board": "compact", "reward": "dense"},
    sft_oracle_kwargs={"place": 1, "noise": 0.1},
    sft_turns="rewarded",
    sft_steps=500,
    sft_demos=4000,
    sft_lr=1.5e-3,  # 3e-3 diverged after ~150 steps with four layers
    sft_batch_size=16,
    steps=50,
    prompts_per_step=8,
    eval_every=10,
    # Scored as sampled: at temperature 0.6, the training temperature. Greedy play repeats a
    # rejected digit, and GRPO made it worse at that (25% -> 2-3% in ten steps) while the
    # sampled policy held.
    eval_temperature=0.6,
    threads=1,
    grpo=GRPOConfig(
        group_size=8,
        # At temperature 1 the warm start broke the call's JSON in 42% of its turns.
        temperature=0.6,
        # Without the KL term, held-out success fell by 6 to 24 points at the rates tried (eight
        # turns, docs/benchmarks.md): most retry turns are in failed episodes, so they mostly get negative advantages.
        # With it, held-out success rose by 10.2, 10.1 and 0.8 points on seeds 0, 1 and 2 in the 50
        # steps; turn-level credit (`advantage="turn"`) did no better (docs/benchmarks.md).
        lr=5e-5,
        kl_beta=0.1,
        lr_schedule="cosine",
        warmup_steps=5,
        filter_zero_std_groups=True,
        # Each episode weighs the same, however many turns it took: by token, the long failed
        # episodes outweighed the short solved ones.
        loss_aggregation="seq-mean-token-mean",
        max_new_tokens=80,  # a move is 30 BPE tokens (67 in bytes) with its end-of-turn token
        max_length=1536,  # failed eight-turn episodes (~2,000 tokens) are cut; solved ones fit
        micro_batch_size=16,
        max_grad_norm=1.0,
        advantage_scaling="group",
    ),
)

# Code-v0 with two attempts and the failing-test feedback in between, on the four generated families
# whose statement names one number and whose reference is one line. Held-out success 69.5% -> 93.0%,
# 50.0% -> 56.2% and 74.2% -> 94.5% on seeds 0-2 (episode advantages: +10.2, +3.9, +14.8), about
# 19 minutes a run; the runs and why are in docs/benchmarks.md ("Code-v0 with two attempts: code-tiny").
CODE_TINY = TrainConfig(
    preset="code-tiny",
    env="textgym/Code-v0",
    model=TINY,
    tiny_layers=4,  # copying the statement's number into the code; 2 layers could not find a Sudoku blank
    # The BPE vocabulary: an episode is ~2.5x fewer tokens than in bytes (an oracle one: 182, not
    # 462), so the warm start takes a quarter of the time and solves more (69.5% held-out, seed 0,
    # against 43.8% in bytes), and a GRPO step takes a third.
    tiny_vocab="bpe",
    env_kwargs={"families": ["count_above", "digit_power_sum", "long_word_lengths", "sum_multiples"], "max_attempts": 2},
    # The warm start also sees clamp_list (two numbers) and chunk_sums (one number written twice),
    # more statements to copy a number from; GRPO and the evaluation leave them out: after the
    # warm start they solved 0 of 28 held-out tasks (no group with a success to learn from),
    # where the four above solved 42 of 100.
    sft_env_kwargs={
        "families": ["chunk_sums", "clamp_list", "count_above", "digit_power_sum", "long_word_lengths", "sum_multiples"],
        "max_attempts": 2,
    },
    # The noisy demonstrator: half the tasks get a near miss (a number of the statement miscopied)
    # first and the reference after the feedback, so the warm start uses its second attempt.
    sft_oracle_kwargs={"noise": 0.5},
    # 90 steps of 8 x 8 (~10 s each) beside a 200-step warm start of ~4 min: 30 steps, the most
    # that fitted in bytes, gained 7.8 points on seed 0 where 90 gained 10.2.
    steps=90,
    prompts_per_step=8,
    sft_steps=200,
    sft_demos=2000,
    sft_lr=3e-3,
    eval_every=30,
    threads=1,
    # sudoku-tiny's GRPO (a cosine decay, two updates per batch) at 5e-4 with a KL of 0.1 to the
    # warm start. Without the KL the second attempts broke: a failed episode has two of them, so
    # the negative advantages fell mostly on second-attempt tokens, and by step 10 those were no
    # longer Python (21.9% held-out at 3e-4, from 43.8%); with it they stayed intact. At 3e-4 with
    # the KL, 20 steps ended at 43.0%; at 1e-3 without it held-out success was 0% by step 8.
    grpo=dataclasses.replace(
        SUDOKU_TINY.grpo,
        lr=5e-4,
        kl_beta=0.1,
        # Turn-level credit split over each attempt's tokens: an attempt is compared with the
        # group's attempts at the same task and feedback, and each token gets the change it made to
        # their mean return, so a miscopied number is pushed down where it differs from the right
        # one and the code around it is not: it gained more than episode advantages on each seed.
        advantage="turn",
        turn_token_credit="prefix",
        warmup_steps=2,
        max_new_tokens=128,  # the longest reference in a fence is ~90 tokens
        max_length=1024,
        micro_batch_size=16,
    ),
)

# Workplace-v0 requests that take two tool-calling turns, the second using what the first returned:
# search a task by the name the request quotes, then change or delete it by its id; look a
# colleague's address up in the directory, then email them. Short of its +15-point goal; the runs
# and why are in docs/benchmarks.md ("Workplace-v0 in two turns: workplace-tiny"). The best recipe
# found so far.
WORKPLACE_TINY = TrainConfig(
    preset="workplace-tiny",
    env="textgym/Workplace-v0",
    model=TINY,
    tiny_layers=4,  # two layers learned the calls but copied other tasks' names and ids
    # The BPE vocabulary: an episode is ~2.4x fewer tokens than in bytes (an oracle one: 494, not
    # 1,169); the warm start takes 8 min instead of 26 and solves 71.1% held-out (seed 0), not 42.2%.
    tiny_vocab="bpe",
    # The easy templates whose episodes are one lookup and one change (550-730 byte tokens): a
    # task's id from its search for delete, move and re-date; an address for an email. Truncation
    # after the second turn ends the episode; the final state is what is scored.
    env_kwargs={"templates": ["change_due", "delete_task", "move_task", "send_email"], "max_turns": 2},
    sft_oracle_kwargs={"lookup": True},
    steps=16,
    prompts_per_step=8,
    # 800 steps, not 200: copying the quoted name into the search and the returned id into the
    # change is what the warm start must learn, and at 200 steps (loss 0.10 a token) it copied
    # other tasks' names and solved none; at 800 (loss 0.018) it solved 42.2% (both in bytes).
    sft_steps=800,
    sft_demos=4000,
    sft_lr=2e-3,
    eval_every=8,
    threads=1,
    # Sampled at 0.3: the byte warm start's copies were right greedily (42.2%) but at temperature 1
    # only 12.5% of its episodes succeeded, and GRPO from there broke the copying (0% sampled within
    # three steps at 5e-4); at 0.6 and 1e-4 held-out success fell to 23.4% in eight steps. From the
    # BPE warm start, 60 steps at 0.6 or at 2e-4 gained 0-2.3 points, as these settings did.
    grpo=dataclasses.replace(
        CODE_TINY.grpo,
        # Episode advantages: prefix credit did no better here (docs/benchmarks.md), where almost
        # every group's episodes all succeed or all fail.
        advantage="episode",
        turn_token_credit="turn",
        temperature=0.3,
        lr=5e-5,
        loss_aggregation="seq-mean-token-mean",
        filter_zero_std_groups=True,
        max_new_tokens=256,  # the longest demonstrated turn is 211 tokens (an email)
    ),
)

# The three multi-turn recipes in one run: each env keeps its own preset's tasks and demonstrator,
# the warm start shares its demonstrations among the three, and every step plays four prompts of
# each. The per-env settings are the three presets' own; the shared ones (steps, learning rates,
# lengths) are the most demanding of the three.
_MIXED = (SUDOKU_MOVES_TINY, CODE_TINY, WORKPLACE_TINY)
MIXTURE_TINY = TrainConfig(
    preset="mixture-tiny",
    env=tuple(p.env for p in _MIXED),
    model=TINY,
    tiny_layers=4,
    # The BPE vocabulary, as each env's own preset: with bytes the shared warm start solved no
    # Sudoku or Workplace task and half the Code ones (56 min a run); with it, 15.6%, 0% and 71.9%.
    tiny_vocab="bpe",
    env_kwargs={p.env: p.env_kwargs for p in _MIXED},
    # Sudoku's demonstrations: every turn of a demonstrator that guesses 10% of its digits (the
    # mixture trains every demonstrated turn, so not only the rewarded ones as sudoku-moves-tiny).
    sft_env_kwargs={p.env: p.sft_kwargs for p in _MIXED}
    | {SUDOKU_MOVES_TINY.env: {"size": 4, "blanks": 3, "max_turns": 4, "board": "compact"}},
    sft_oracle_kwargs={p.env: p.sft_oracle_kwargs for p in _MIXED} | {SUDOKU_MOVES_TINY.env: {"place": 1, "noise": 0.1}},
    sft_steps=600,
    sft_demos=6000,
    sft_lr=1.5e-3,  # sudoku-moves-tiny's: 3e-3 diverged there
    sft_batch_size=16,
    steps=40,
    prompts_per_step=12,
    eval_episodes=64,  # per env
    eval_every=10,
    eval_temperature=SUDOKU_MOVES_TINY.eval_temperature,  # its GRPO settings' sampling temperature
    threads=1,
    grpo=dataclasses.replace(
        SUDOKU_MOVES_TINY.grpo,
        max_new_tokens=max(p.grpo.max_new_tokens for p in _MIXED),
        max_length=max(p.grpo.max_length for p in _MIXED),
    ),
)

PRESETS: dict[str, TrainConfig] = {
    p.preset: p
    for p in (SUDOKU_TINY, SUDOKU_SMOLLM2, SUDOKU_MOVES_TINY, CODE_TINY, WORKPLACE_TINY, MIXTURE_TINY)
    if p.preset is not None  # every one is named; the test narrows the type
}
"""Every preset by name."""


def named(name: str) -> TrainConfig:
    """The preset called ``name``.

    Raises:
        ValueError: No preset has that name (the message lists them).
    """
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(sorted(PRESETS))}, got {name!r}")
    return PRESETS[name]


def preset_for(env: str | tuple[str, ...], model: str) -> TrainConfig | None:
    """The (first listed) preset made for ``env`` and ``model``; for a mixture without its own, its first env's; else None."""
    envs = (env,) if isinstance(env, str) else tuple(env)
    first = envs[0]
    for want in dict.fromkeys((envs if len(envs) > 1 else first, first)):
        found = next((p for p in PRESETS.values() if p.env == want and p.model == str(model)), None)
        if found is not None:
            return found
    return None


def train_config(run: Mapping[str, Any], grpo: Mapping[str, Any] | None = None) -> TrainConfig:
    """The resolved config of a command line: the dataclasses' defaults, under its preset, under the
    ``TrainConfig`` fields of ``run`` and the ``GRPOConfig`` fields of ``grpo``, resolved once.

    The preset is the one ``run["preset"]`` names, else :func:`preset_for` the run's env and model,
    else none (the dataclasses' defaults). A mixture started from one env's preset gives each env
    the ``env_kwargs`` and ``sft_oracle_kwargs`` of its own preset, unless ``run`` sets them.

    Raises:
        ValueError: Neither an env nor a preset is given, or a value is invalid.
    """
    run = _one_or_many(run)
    start = _start(run, TrainConfig)
    config = start.replace(**run) if start is not None else TrainConfig(**run)
    if len(config.envs) > 1 and (start is None or start.env != config.env):
        own = {env: preset_for(env, config.model) for env in config.envs}  # each env's own preset, if any
        if "env_kwargs" not in run:
            config = config.replace(env_kwargs={env: dict(p.env_kwargs) if p else {} for env, p in own.items()})
        if "sft_oracle_kwargs" not in run:
            config = config.replace(sft_oracle_kwargs={env: p.sft_oracle_kwargs if p else None for env, p in own.items()})
    if grpo:
        config = config.replace(grpo=dataclasses.replace(config.grpo, **_lora_in_place_of_freezing(grpo)))
    return config.resolved()


def sft_config(run: Mapping[str, Any]) -> SFTConfig:
    """The resolved config of ``textgym sft``: the dataclass's defaults, under its preset's warm start
    (see :func:`train_config`), under the ``SFTConfig`` fields of ``run``, resolved once."""
    run = _one_or_many(run)
    start = _start(run, SFTConfig)
    if start is None:
        config = SFTConfig(**run)
    else:  # output_dir unset: a standalone warm start writes to its own default, not under the preset's GRPO run
        config = dataclasses.replace(start.sft_config(), **({"output_dir": None} | _lora_in_place_of_freezing(run)))
    return config.resolved()


def _lora_in_place_of_freezing(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with ``trainable_layers`` unset when they ask for LoRA without naming it: the
    adapters replace the preset's layer freezing (the two exclude each other)."""
    fields = dict(fields)
    if fields.get("lora_rank") and "trainable_layers" not in fields:
        fields["trainable_layers"] = None
    return fields


def _one_or_many(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` with a repeated ``--env``'s list as one id, or a tuple of several."""
    run = dict(run)
    if isinstance(run.get("env"), list):
        run["env"] = run["env"][0] if len(run["env"]) == 1 else tuple(run["env"])
    return run


def _start(run: Mapping[str, Any], cls: type) -> TrainConfig | None:
    """The preset a command line starts from (``cls``: the config it builds, for its default model)."""
    if run.get("preset") is not None:
        return named(run["preset"])
    if "env" not in run:
        raise ValueError("give --env, or --preset NAME (a preset names its env and model)")
    model = run.get("model", cls.__dataclass_fields__["model"].default)
    return preset_for(run["env"], model)
