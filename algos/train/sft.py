"""Supervised warm start on an env's oracle demonstrations, with either backend's learner.

Demonstrations are ordinary token rollouts of :class:`~textgym.policies.oracle.OraclePolicy`
through :class:`~textgym.wrappers.TokenObservation`, so they hold exactly the tokens a policy
would see and produce. SFT needs no separate trainer: a GRPO step on a batch whose advantages
are all 1 and whose old logprobs are the current policy's (ratio 1, no clipping) has the gradient
``-sum_t w_t * grad log p(token_t)``, which with token-mean weights is the gradient of the mean
token negative log-likelihood. Both backends' ``Learner.train_step`` therefore do SFT unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from textgym.algos import models
from textgym.algos.backends import load_backend, make_learner
from textgym.algos.config import SFTConfig
from textgym.algos.config.fields import to_json
from textgym.algos.distributed import processes
from textgym.algos.grpo import Batch, GRPOConfig, SeedTree, policy_prefix, sft_batch
from textgym.algos.grpo.lora import MERGED
from textgym.algos.grpo.turns import accepted_turns
from textgym.algos.rollouts.token_envs import chat_template, keep_chat_template, token_venv
from textgym.algos.train.report import MetricsLog, progress_bar
from textgym.algos.train.trackers import check_installed, open_reporter
from textgym.arguments import check_env_ids
from textgym.error import TextGymError
from textgym.rollout import Rollout


class _Oracle:
    """:class:`~textgym.policies.oracle.OraclePolicy` with keyword arguments for ``oracle_action``
    (Sudoku's ``place=k`` demonstrates tool calls instead of the answer grid)."""

    def __init__(self, venv: Any, kwargs: dict[str, Any]):
        self.venv, self.kwargs = venv, kwargs

    def act(self, observations: Sequence[Any], infos: Any = None) -> Any:
        from textgym.policies.base import PolicyOutput

        return PolicyOutput(list(self.venv.call("oracle_action", **self.kwargs)))


def demonstrations(
    env: str,
    env_kwargs: dict[str, Any],
    tokenizer: Any,
    template: str | None,
    seeds: Sequence[int],
    num_envs: int,
    oracle_kwargs: dict[str, Any] | None = None,
    on_template_break: str = "raise",
    turns: str = "all",
) -> list[Rollout]:
    """Oracle episodes as token rollouts, with each turn's closing end-of-turn token trained too.

    The oracle acts in text, which the token wrapper tokenizes as the policy's turn; the chat
    template then closes the turn with its end-of-turn token (``<|im_end|>``). A model must learn
    to emit that token to stop, so it is added to the loss mask. Every episode is kept, solved
    or not: a correct oracle solves them all, and a noisy demonstrator (Sudoku's
    ``oracle_kwargs={"noise": p}``) is imitated as it is, mistakes included, unless
    ``turns="rewarded"`` keeps only the turns whose env step paid a positive reward in the loss.
    """
    from textgym.policies.oracle import OraclePolicy
    from textgym.rollout import collect

    venv = token_venv(env, env_kwargs, tokenizer, template, min(num_envs, len(seeds)), on_template_break=on_template_break)
    try:
        oracle = _Oracle(venv, oracle_kwargs) if oracle_kwargs else OraclePolicy(venv)
        rollouts = collect(venv, oracle, seeds=list(seeds), group_size=1, env_id=env)
    finally:
        venv.close()
    eos = {tokenizer.convert_tokens_to_ids(tokenizer.eos_token)}
    for r in rollouts:
        for _, end in r.turn_spans or ():
            if end < len(r.token_ids) and int(r.token_ids[end]) in eos:
                r.loss_mask[end] = 1
    if turns == "rewarded":
        rollouts = [accepted_turns(r, discount=0.0) for r in rollouts]
    return [policy_prefix(r) for r in rollouts]


class WarmStartError(TextGymError, RuntimeError):
    """A warm start that cannot learn anything: its demonstrator solved none of its tasks (a
    ``RuntimeError``, as it was before it named the settings to change)."""


def warm_start_demonstrations(config: SFTConfig, tokenizer: Any, template: str | None, seeds: Sequence[int]) -> list[Rollout]:
    """:func:`demonstrations` of each of the run's envs, which share ``seeds`` equally (a mixture).

    Raises:
        WarmStartError: An env's oracle solved none of its tasks (wrong ``oracle_kwargs`` or tasks).
    """
    demos: list[Rollout] = []
    for i, env in enumerate(config.envs):
        share = seeds[i :: len(config.envs)]
        mine = demonstrations(
            env,
            config.kwargs_of(env),
            tokenizer,
            template,
            share,
            config.num_envs,
            config.oracle_kwargs_of(env),
            config.on_template_break,
            config.turns,
        )
        if not any(r.success for r in mine):
            raise WarmStartError(
                f"the oracle of {env} solved none of {len(share)} demonstration tasks with oracle_kwargs "
                f"{config.oracle_kwargs_of(env)} and env_kwargs {config.kwargs_of(env)}: give it a demonstrator that solves "
                "some (textgym train --sft-oracle-kwargs, textgym sft --oracle-kwargs: a noise below 1) or easier tasks "
                "(--env-kwargs), or train without a warm start (--sft-steps 0)"
            )
        demos += mine
    return demos


def nll(model: Any, batch: Batch) -> float:
    """Mean negative log-likelihood per trained token (what SFT minimises)."""
    lp = model.logprobs(batch.input_ids, batch.attention_mask, scored=batch.loss_mask)
    return float(-(lp * batch.loss_mask).sum() / max(1.0, batch.loss_mask.sum()))


def sft(config: SFTConfig) -> Path:
    """Run the warm start; return the HF directory of the result (``output_dir/final``; with LoRA,
    ``final/`` holds the adapter and the merged model in ``final/merged``, which is returned).

    A run whose ``final/`` already exists is not repeated (so a resumed ``textgym train`` skips it).
    A config built in Python is resolved here; one from the command line or from
    :meth:`~textgym.algos.config.TrainConfig.sft_config` comes resolved.
    """
    config = config.resolved()
    check_env_ids(config.envs)
    check_installed(config.report_to)
    processes.init(config.backend)  # under torchrun: every rank trains its share of each batch's rows
    writer = processes.is_writer()
    if not writer:
        config = dataclasses.replace(config, progress=False)
    models.quiet_transformers()
    out = Path(config.output_dir)
    final = out / "final"
    result = final / MERGED if config.lora_rank else final  # what a warm start continues from
    if (result / "config.json").is_file():
        return result
    processes.barrier()  # every rank has looked before rank 0 writes anything
    if writer:
        out.mkdir(parents=True, exist_ok=True)
    model_dir = processes.writer_first(
        lambda: models.resolve(
            config.model, out, seed=config.seed, progress=config.progress, tiny_layers=config.tiny_layers, tiny_vocab=config.tiny_vocab
        )
    )
    template = chat_template(config.chat_template, config.model)
    backend = load_backend(config.backend, config.threads)
    model = backend.load_model(model_dir)
    tokenizer = models.load_tokenizer(model_dir)
    tree = SeedTree(config.seed)
    demos = warm_start_demonstrations(config, tokenizer, template, tree.demo_seeds(config.demos))
    solved = float(np.mean([r.success for r in demos]))
    # The learner's loss and packing: every demonstration a group of one, advantages all 1 (see above).
    grpo = GRPOConfig(
        group_size=1,
        max_length=config.max_length,
        micro_batch_size=min(config.micro_batch_size, config.batch_size),
        advantage_scaling="none",
        trainable_layers=config.trainable_layers,
        seed=config.seed,
        lora_rank=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_targets=config.lora_targets,
        lora_merge=bool(config.lora_rank),
    )
    learner = make_learner(backend, model, grpo, data_parallel=config.data_parallel, optimizer=config.optimizer)
    order = tree.rng("sft_order").permutation(len(demos))
    # A warm start never resumes (a finished one is skipped): its tracker run starts fresh.
    with open_reporter(config.report_to, out, json.loads(to_json(config)), fresh=True, writer=writer) as reporter:
        log = MetricsLog(out / "sft_metrics.jsonl", writer=writer, reporter=reporter)
        with progress_bar("SFT", total=config.steps, enabled=config.progress) as bar:
            for step in range(config.steps):
                picks = [demos[order[(step * config.batch_size + i) % len(demos)]] for i in range(config.batch_size)]
                batch = sft_batch(picks, grpo, model.pad_id)
                record = {"step": step + 1} | ({"sft/demo_success": solved} if step == 0 else {})
                if step % 10 == 0 or step == config.steps - 1:
                    record["sft/nll"] = nll(model, batch)
                    bar.update(info=f"nll {record['sft/nll']:.3f}")
                metrics = learner.train_step(batch)
                log.write(record | {k: v for k, v in metrics.items() if k.startswith("stats/")})
                bar.update(advance=1)
    learner.export(final)  # every rank calls it; rank 0 writes
    if writer:
        keep_chat_template(final, template)
        (out / "sft_config.json").write_text(to_json(config), encoding="utf-8")
    return result
