"""textgym train / sft: the loop learns, writes its outputs, and resumes exactly after a stop or a kill."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from textgym import messages as M
from textgym.algos.config import SFTConfig, TrainConfig, presets
from textgym.algos.grpo import GRPOConfig
from textgym.algos.models import tiny
from textgym.algos.train.report import read_metrics
from textgym.env import Outcome, TextEnv
from textgym.error import TextGymError
from textgym.rollout import EpisodeSlot, rollout_schema
from textgym.tasks import Task

pytest.importorskip("torch")
pytest.importorskip("transformers")

from textgym.algos import train as train_module
from textgym.algos.train import command, episodes, loop, run_dir
from textgym.algos.train.sft import sft

ENV_ID = "textgym-test/AsciiFirst-v0"
SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


class AsciiFirstEnv(TextEnv):
    """One turn; reward 1 when the reply starts with an ASCII letter (a random byte model: ~20%)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_turns", 1)
        super().__init__(**kwargs)

    def generate_task(self, rng):
        n = int(rng.integers(0, 100))
        return Task(f"ascii-{n}", {"n": n}, "x")

    def task_from_dict(self, d):
        data = d["data"] if Task.is_record(d) else d  # a saved state's task record, or a pinned task's data
        return Task(f"ascii-{data['n']}", {"n": int(data["n"])}, "x")

    def begin(self, task):
        return [M.user(f"Task {task.data['n']}: reply with a letter.")]

    def respond(self, turn):
        ok = turn.text[:1].isascii() and turn.text[:1].isalpha()
        return Outcome([M.user("ok" if ok else "no")], float(ok), True, ok, {"first": turn.text[:1]})

    def oracle_action(self):
        return "x"


class TwoTurnEnv(AsciiFirstEnv):
    """Two turns: the first reply always gets "again", the second is scored like AsciiFirst's."""

    def __init__(self, **kwargs):
        super().__init__(max_turns=2, **kwargs)

    def respond(self, turn):
        if self.turn < 2:
            return Outcome([M.user("again")], 0.0, False, False, {})
        return super().respond(turn)


class SecondTurnEnv(AsciiFirstEnv):
    """Two turns: the first reply always gets "again", the second is scored like AsciiFirst's."""

    def __init__(self, **kwargs):
        super().__init__(max_turns=2, **kwargs)

    def respond(self, turn):
        if self.turn == 0:
            return Outcome([M.user("again")], 0.0, False, False, {})
        return super().respond(turn)


TWO_TURN_ID = "textgym-test/TwoTurn-v0"
SECOND_TURN_ID = "textgym-test/SecondTurn-v0"
if SECOND_TURN_ID not in gym.registry:
    gym.register(SECOND_TURN_ID, entry_point=SecondTurnEnv)
if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=AsciiFirstEnv)
if TWO_TURN_ID not in gym.registry:
    gym.register(TWO_TURN_ID, entry_point=TwoTurnEnv)
BACKENDS = ["torch", "jax"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def config(model_dir: Path, out: Path, **changes) -> TrainConfig:
    """A few-second run; ``backend`` and anything else may be changed."""
    base = TrainConfig(
        env=ENV_ID,
        env_kwargs={},
        backend="torch",
        model=str(model_dir),
        chat_template="compact",
        output_dir=str(out),
        steps=3,
        prompts_per_step=2,
        num_envs=8,
        eval_episodes=4,
        eval_every=2,
        save_every=1,
        sft_steps=0,
        progress=False,
        plot=False,
        grpo=GRPOConfig(group_size=4, lr=3e-3, max_new_tokens=3, max_length=64, micro_batch_size=4, seed=0),
    )
    return base.replace(**changes)


def weights(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path / "model.safetensors"))


def comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


STEP_TIMES = ("time/sampling", "time/env", "time/wrapper", "time/pack", "time/update")


def assert_step_times(records: list[dict]) -> None:
    """Every GRPO step says where its time went: five finite, non-negative seconds, the sampler's
    above zero, and the learner's above zero exactly on the steps that updated (one at least)."""
    steps = records[1:]
    for r in steps:
        assert all(math.isfinite(r[k]) and r[k] >= 0 for k in STEP_TIMES), {k: r.get(k) for k in STEP_TIMES}
        assert r["time/sampling"] > 0
        assert (r["time/update"] > 0) == (not r["train/skipped_update"])
        # the tokens the step ran: a prompt at least, no more decode steps than sampled ids, packed ones when it updated
        assert r["tokens/prefilled"] > 0 and 0 <= r["tokens/decoded"] < r["train/generated_tokens"]
        assert (r["tokens/packed"] > 0) == (not r["train/skipped_update"])
    assert any(not r["train/skipped_update"] for r in steps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_changes_every_parameter_and_writes_its_outputs(model_dir, tmp_path, backend):
    summary = train_module.train(config(model_dir, tmp_path / "run", steps=2, plot=True, log_rollouts_every=1, backend=backend))
    start, final = weights(model_dir), weights(tmp_path / "run" / "final")
    assert set(start) == set(final)
    unchanged = [k for k in start if np.array_equal(start[k], final[k])]
    assert not unchanged
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    assert "eval/success" in records[0] and "eval/success" in records[-1]
    assert_step_times(records)
    assert 0.0 < np.mean([r["train/reward"] for r in records[1:]]) < 1.0  # the groups have signal
    assert summary["steps"] == 2 and summary["before"]["step"] == 0 and summary["after"]["step"] == 2
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    assert (tmp_path / "run" / "curve.png").stat().st_size > 0
    from textgym.algos.models import load_tokenizer

    # every model directory the run wrote renders turns as it trained on them (not the start model's template)
    assert load_tokenizer(model_dir).chat_template != tiny.compact_chat_template()
    for written in ("final", "best", "checkpoints/step_000002"):
        assert load_tokenizer(tmp_path / "run" / written).chat_template == tiny.compact_chat_template(), written
    for r in records[1:]:  # why episodes ended: fractions of every reason, summing to one
        ends = {k: v for k, v in r.items() if k.startswith("train/end/")}
        assert set(ends) == {f"train/end/{x}" for x in ("success", "failure", "max_turns", "length", "env_error")}
        assert sum(ends.values()) == pytest.approx(1.0) and ends["train/end/success"] == r["train/success"]
        assert r["train/env_errors"] == 0
    # 3 new tokens rarely hold a stop token: unsolved episodes were cut by max_new_tokens
    assert np.mean([r["train/end/length"] for r in records[1:]]) > 0
    logged = sorted(p.name for p in (tmp_path / "run" / "rollouts").iterdir())
    assert logged == ["step_000001.jsonl", "step_000002.jsonl"]  # log_rollouts_every=1
    lines = [json.loads(line) for line in (tmp_path / "run" / "rollouts" / "step_000002.jsonl").open()]
    assert len(lines) == 8 and {r["step"] for r in lines} == {2} and all("advantage" in r and r["end_reason"] for r in lines)
    schema = pytest.importorskip("jsonschema").Draft202012Validator(rollout_schema())
    assert not [e.message for r in lines for e in schema.iter_errors(r)]  # train's records match the schema
    for g in {r["group"] for r in lines}:  # group-relative: each group's advantages sum to zero
        assert sum(r["advantage"] for r in lines if r["group"] == g) == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_and_resume_continue_exactly_with_a_kl_term(model_dir, tmp_path, backend):
    grpo = GRPOConfig(group_size=4, lr=3e-3, kl_beta=0.5, max_new_tokens=3, max_length=64, micro_batch_size=4)
    train_module.train(config(model_dir, tmp_path / "straight", backend=backend, grpo=grpo))
    first = train_module.train(config(model_dir, tmp_path / "split", stop_after=1, backend=backend, grpo=grpo))
    assert first["steps"] == 1 and "final" not in first
    train_module.train(config(model_dir, tmp_path / "split", backend=backend, grpo=grpo))
    straight = read_metrics(tmp_path / "straight" / "metrics.jsonl")
    split = read_metrics(tmp_path / "split" / "metrics.jsonl")
    assert straight[-1]["loss/kl"] > 0  # the KL to the run's start counts, before and after the resume
    assert comparable(split) == comparable(straight)
    a, b = weights(tmp_path / "straight" / "final"), weights(tmp_path / "split" / "final")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow  # four short runs per backend: ~45 s (torch) on 2 shared cores
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_run_loses_nothing(model_dir, tmp_path, monkeypatch, backend):
    grpo = GRPOConfig(group_size=4, lr=3e-3, kl_beta=0.2, max_new_tokens=3, max_length=64, micro_batch_size=4)
    run = lambda out, **k: config(model_dir, out, backend=backend, grpo=grpo, **k)
    train_module.train(run(tmp_path / "straight"))

    # Ctrl-C during step 3: the checkpoint of step 2 is written on the way out.
    real_step = loop.grpo_step

    def interrupted(cfg, policy, learner, venv, step, *collected):
        if step == 2:
            raise KeyboardInterrupt
        return real_step(cfg, policy, learner, venv, step, *collected)

    monkeypatch.setattr(loop, "grpo_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_module.train(run(tmp_path / "killed", save_every=100))
    assert run_dir.latest_checkpoint(tmp_path / "killed").name == "step_000002"
    monkeypatch.setattr(loop, "grpo_step", real_step)

    # A hard kill after step 3 but before its checkpoint: the metrics of step 3 are already written.
    train_module.train(run(tmp_path / "killed", save_every=100))
    shutil.rmtree(tmp_path / "killed" / "checkpoints" / "step_000003")
    shutil.rmtree(tmp_path / "killed" / "final")
    train_module.train(run(tmp_path / "killed", save_every=100))

    straight = read_metrics(tmp_path / "straight" / "metrics.jsonl")
    killed = read_metrics(tmp_path / "killed" / "metrics.jsonl")
    assert comparable(killed) == comparable(straight)  # every step once, with the same numbers
    a, b = weights(tmp_path / "straight" / "final"), weights(tmp_path / "killed" / "final")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sft_learns_the_oracle_and_train_starts_from_it(model_dir, tmp_path, backend):
    cfg = SFTConfig(
        env=ENV_ID,
        env_kwargs={},
        backend=backend,
        model=str(model_dir),
        chat_template="compact",
        output_dir=str(tmp_path / "sft"),
        steps=12,
        demos=8,
        batch_size=4,
        lr=1e-2,
        progress=False,
    )
    final = sft(cfg)
    records = read_metrics(tmp_path / "sft" / "sft_metrics.jsonl")
    nll = [r["sft/nll"] for r in records if "sft/nll" in r]
    assert nll[-1] < 0.5 * nll[0]
    assert records[0]["sft/demo_success"] == 1.0
    assert sft(cfg) == final  # done once; a resumed run reuses it
    from textgym.algos.backends import load_backend
    from textgym.algos.models import load_tokenizer
    from textgym.algos.rollouts.seeded import evaluate
    from textgym.algos.rollouts.token_envs import token_venv

    policy = load_backend(backend).load_model(final)

    tokenizer = load_tokenizer(final)
    assert tokenizer.chat_template == tiny.compact_chat_template()  # the template it was trained with
    venv = token_venv(ENV_ID, {}, tokenizer, None, 4)  # None: the directory's own template
    result = evaluate(policy, venv, range(4), max_new_tokens=3, temperature=0.0, seed=0)
    assert result["eval/success"] == 1.0  # greedy now answers like the oracle


def test_noisy_demonstrations_are_imitated_mistakes_included(model_dir):
    from textgym.algos.models import load_tokenizer
    from textgym.algos.train.sft import demonstrations

    tokenizer = load_tokenizer(model_dir)
    demos = demonstrations(
        "textgym/Sudoku-v0",
        {"size": 4, "blanks": 1, "max_turns": 1},
        tokenizer,
        tiny.compact_chat_template(),
        range(40),
        8,
        {"compact": True, "noise": 1.0},
    )
    assert len(demos) == 40  # none dropped
    assert 0 < sum(d.success for d in demos) < 40


def test_rewarded_turns_train_only_the_moves_the_env_paid_for(model_dir):
    """``turns="rewarded"``: a noisy demonstrator's rejected moves stay as context, out of the loss."""
    from textgym.algos.models import load_tokenizer
    from textgym.algos.train.sft import demonstrations

    tokenizer = load_tokenizer(model_dir)
    kwargs = {"size": 4, "blanks": 3, "max_turns": 4, "board": "compact", "reward": "dense"}
    args = (tokenizer, tiny.compact_chat_template(), range(12), 4, {"place": 1, "noise": 0.5})
    every = demonstrations("textgym/Sudoku-v0", kwargs, *args)
    rewarded = demonstrations("textgym/Sudoku-v0", kwargs, *args, turns="rewarded")
    rejected = 0
    for a, b in zip(every, rewarded, strict=True):
        # The same episodes, cut after their last trained token: only the loss mask differs.
        assert np.array_equal(a.token_ids[: len(b.token_ids)], b.token_ids)
        for (start, end), reward in zip(a.turn_spans, a.turn_rewards, strict=True):
            turn = slice(start, end + 1)
            assert a.loss_mask[turn].sum() > 0
            if reward > 0:
                assert np.array_equal(b.loss_mask[turn], a.loss_mask[turn])
            else:
                rejected += 1
                assert b.loss_mask[turn].sum() == 0
    assert rejected > 0  # the demonstrator did guess wrong


def test_cli_arguments_build_the_config():
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    args = parser.parse_args(
        [
            "--env",
            "textgym/Sudoku-v0",
            "--backend",
            "jax",
            "--lr",
            "0.01",
            "--group-size",
            "4",
            "--loss-aggregation",
            "constant",
            "--mask-truncated",
            "--steps",
            "7",
            "--env-kwargs",
            '{"size": 4}',
        ]
    )
    cfg = command.train_config_from_args(args)
    assert cfg.backend == "jax" and cfg.steps == 7 and cfg.env_kwargs == {"size": 4}
    assert cfg.grpo.lr == 0.01 and cfg.grpo.group_size == 4 and cfg.grpo.loss_aggregation == "constant"
    assert cfg.grpo.mask_truncated is True
    assert cfg.output_dir == "runs/sudoku-v0-jax"
    # Unset GRPO fields come from the tiny recipe for this env.
    assert cfg.grpo.max_new_tokens == 64 and cfg.grpo.num_iterations == 2
    sft_parser = argparse.ArgumentParser()
    command.add_sft_arguments(sft_parser)
    sft_args = sft_parser.parse_args(["--env", "textgym/Sudoku-v0", "--steps", "5"])
    from textgym.algos.config import flags

    sft_cfg = SFTConfig(**flags.given(sft_args, SFTConfig))  # unset flags: the dataclass's defaults
    assert sft_cfg.steps == 5 and sft_cfg.backend == "torch" and sft_cfg.model == "tiny"
    assert presets.sft_config(flags.given(sft_args, SFTConfig)).steps == 5  # the preset's 1600 is overridden


def test_the_warm_start_can_demonstrate_other_tasks_than_grpo_trains_on():
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    args = parser.parse_args(["--env", ENV_ID, "--env-kwargs", '{"size": 4, "blanks": 4}', "--sft-env-kwargs", '{"size": 4, "blanks": 1}'])
    cfg = command.train_config_from_args(args)
    assert cfg.env_kwargs == {"size": 4, "blanks": 4}
    assert cfg.sft_config().env_kwargs == {"size": 4, "blanks": 1}
    same = TrainConfig(env=ENV_ID, model="some/dir", env_kwargs={"size": 6})
    assert same.sft_config().env_kwargs == {"size": 6}  # default: the env GRPO trains on


def test_no_two_episode_turns_share_their_draws_and_top_p_reaches_the_sampler(model_dir, tmp_path, monkeypatch):
    from textgym.algos import backends

    calls = []
    real = backends.load_backend

    class Spy:
        def __init__(self, wrapped):
            self.wrapped = wrapped

        def __getattr__(self, name):
            return getattr(self.wrapped, name)

        def generate(self, prompts, max_new_tokens, temperature=1.0, seed=0, **kwargs):
            calls.append((kwargs["keys"], kwargs.get("top_p", 1.0), temperature))
            return self.wrapped.generate(prompts, max_new_tokens, temperature, seed, **kwargs)

    class Backend:
        def __init__(self, module):
            self.module = module

        def __getattr__(self, name):
            return getattr(self.module, name)

        def load_model(self, path, **kwargs):
            return Spy(self.module.load_model(path, **kwargs))

    monkeypatch.setattr(backends, "load_backend", lambda name, threads=None: Backend(real(name, threads)))
    grpo = GRPOConfig(group_size=4, lr=3e-3, max_new_tokens=3, max_length=64, micro_batch_size=4, top_p=0.9)
    # 3 steps of 2 prompts x 4 on 4 envs: two waves of two turns per step, evaluation sampled too.
    train_module.train(config(model_dir, tmp_path / "run", env=TWO_TURN_ID, num_envs=4, grpo=grpo, eval_temperature=1.0))
    draws = [key for keys, _, _ in calls for key in keys]  # (episode key, turn) of every row sampled
    assert len(calls) >= 3 * 2 * 2 + 2 * 2 and len(set(draws)) == len(draws)
    assert all(top_p == 0.9 for _, top_p, _ in calls)


def test_the_seed_moves_training_tasks_and_sampling_but_not_held_out_tasks(model_dir, tmp_path, monkeypatch):
    import textgym.rollout

    seen: dict[int, list] = {}
    real = textgym.rollout.collect

    def spy(venv, policy, **kwargs):
        seen.setdefault(run, []).append((tuple(kwargs["seeds"]), policy.episode_key(EpisodeSlot(seed=0, group=0, member=0, turn=0))))
        return real(venv, policy, **kwargs)

    monkeypatch.setattr(textgym.rollout, "collect", spy)
    for run in (0, 1):
        train_module.train(config(model_dir, tmp_path / f"seed{run}", seed=run, steps=2, eval_every=2))
    # Per run: eval (step 0), train step 1, train step 2, eval (step 2).
    (e0, t1, t2, e2), (f0, u1, u2, f2) = seen[0], seen[1]
    assert e0[0] == e2[0] == f0[0] == f2[0]  # held-out tasks: fixed across seeds on purpose
    assert t1[0] != u1[0] and t2[0] != u2[0] and t1[0] != t2[0]
    assert t1[1] != u1[1] and e0[1] != f0[1]


def test_total_steps_is_derived_from_the_run():
    derived = TrainConfig(env=ENV_ID, model="some/dir", steps=7, grpo=GRPOConfig(num_iterations=2)).resolved()
    assert derived.grpo.total_steps == 14 and derived.resolved() == derived
    kept = TrainConfig(env=ENV_ID, model="some/dir", steps=7, grpo=GRPOConfig(total_steps=50)).resolved()
    assert kept.grpo.total_steps == 50
    assert TrainConfig(env=ENV_ID, model="some/dir", seed=3).resolved().grpo.seed == 3


def test_importing_the_training_loop_imports_no_framework():
    code = (
        "import sys, textgym.algos.train, textgym.algos.train.sft; print(sorted(m for m in ('torch', 'jax', 'flax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_documents_every_flag_from_the_config_field_docs():
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    import dataclasses as dc

    wanted = (
        {f.name for f in dc.fields(TrainConfig)} - {"grpo"}
        | {f.name for f in dc.fields(GRPOConfig)} - {"seed"}
        | {"print_config", "nproc", "coordinator", "num_processes", "process_id"}
    )
    assert set(actions) == wanted
    for name, action in actions.items():
        assert action.help and "See " not in action.help, name  # a real description, never a pointer
    assert "(default: 64)" in actions["num_envs"].help and "(default: 0.0)" in actions["kl_beta"].help
    # Today's flag names.
    for flag in ("--kl-beta", "--steps", "--stop-after", "--output-dir", "--no-plot", "--no-resume", "--top-p", "--mesh", "--env-weights"):
        assert flag in parser._option_string_actions, flag


def test_presets_are_named_and_bad_flags_are_one_line_errors(capsys):
    from textgym.cli import main

    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    args = parser.parse_args(["--env", ENV_ID, "--preset", "sudoku-tiny", "--model", "some/dir", "--lr", "0.5"])
    cfg = command.train_config_from_args(args)
    assert cfg.steps == presets.PRESETS["sudoku-tiny"].steps and cfg.grpo.lr == 0.5 and cfg.grpo.num_iterations == 2
    assert main(["train", "--env", ENV_ID, "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textgym train: error:") and "sudoku-tiny" in err and len(err.strip().splitlines()) == 1
    assert main(["train", "--env", ENV_ID, "--backend", "torch", "--mesh", "data=2"]) == 2


def test_a_mixture_of_envs_trains_and_reports_each_env(model_dir, tmp_path):
    cfg = config(model_dir, tmp_path / "mix", env=(ENV_ID, TWO_TURN_ID), env_weights=(0.5, 0.5), steps=2, plot=True)
    summary = train_module.train(cfg)
    records = read_metrics(tmp_path / "mix" / "metrics.jsonl")
    for name in ("AsciiFirst-v0", "TwoTurn-v0"):
        assert f"train/{name}/reward" in records[1] and f"eval/{name}/success" in records[0]
        assert summary["envs"][name]["before"]["step"] == 0 and summary["envs"][name]["after"]["step"] == 2
    assert records[1]["train/turns"] > 1.0  # the two-turn env played its share
    assert_step_times(records)  # summed over the envs' collections
    assert summary["best"]["step"] in (0, 2) and (tmp_path / "mix" / "best" / "model.safetensors").is_file()
    parser = argparse.ArgumentParser()
    command.add_train_arguments(parser)
    args = parser.parse_args(["--env", ENV_ID, "--env", TWO_TURN_ID, "--env-weights", "0.25,0.75"])
    assert command.train_config_from_args(args).env == (ENV_ID, TWO_TURN_ID)
    assert episodes.prompt_shares(command.train_config_from_args(args).replace(prompts_per_step=4)) == [1, 3]


def test_logged_steps_keep_the_groups_the_zero_std_filter_drops(model_dir, tmp_path):
    grpo = GRPOConfig(group_size=4, lr=3e-3, max_new_tokens=3, max_length=64, micro_batch_size=4, seed=0, filter_zero_std_groups=True)
    train_module.train(config(model_dir, tmp_path / "run", steps=1, prompts_per_step=4, eval_every=10, grpo=grpo))
    lines = [json.loads(line) for line in (tmp_path / "run" / "rollouts" / "step_000001.jsonl").open()]
    assert len(lines) == 16  # every episode, whether its group trained or not
    for g in {r["group"] for r in lines}:
        rewards = {r["reward"] for r in lines if r["group"] == g}
        if len(rewards) == 1:  # a dropped group: no advantage
            assert all(r["advantage"] == 0.0 for r in lines if r["group"] == g)


def test_turn_level_advantages_train_and_are_logged_per_turn(model_dir, tmp_path):
    """SecondTurn's first reply always gets "again": with turn_discount 0 its turns from the start
    pay nothing whatever comes later (advantage 0), and the second turns carry the episode's signal."""
    jsonschema = pytest.importorskip("jsonschema")
    grpo = GRPOConfig(
        group_size=4, lr=3e-3, max_new_tokens=3, max_length=128, micro_batch_size=4, seed=0, advantage="turn", turn_discount=0.0
    )
    # Seed 1: a step whose groups disagree at the second turn (at seed 0 every group's episodes agree).
    train_module.train(
        config(model_dir, tmp_path / "run", env=SECOND_TURN_ID, steps=1, prompts_per_step=4, eval_every=10, grpo=grpo, seed=1)
    )
    lines = [json.loads(line) for line in (tmp_path / "run" / "rollouts" / "step_000001.jsonl").open()]
    check = jsonschema.Draft202012Validator(rollout_schema())
    assert all(not list(check.iter_errors(r)) for r in lines)
    for r in lines:
        assert len(r["turn_advantages"]) == len(r["turn_rewards"]) == 2 and r["turn_advantages"][0] == 0.0
        assert r["turn_advantages"][1] == pytest.approx(r["advantage"], abs=1e-5)  # one state per group at turn 2
    assert any(r["advantage"] != 0 for r in lines)
    step = read_metrics(tmp_path / "run" / "metrics.jsonl")[1]
    assert step["turn/anchor_groups"] == 8 and step["turn/anchor_group_size_mean"] == 4 and step["turn/singleton_fraction"] == 0
    assert step["train/skipped_update"] == 0


def test_a_mixtures_warm_start_demonstrates_every_env_with_its_own_settings(model_dir):
    from textgym.algos.models import load_tokenizer
    from textgym.algos.train.sft import warm_start_demonstrations

    sudoku = "textgym/Sudoku-v0"
    cfg = SFTConfig(
        env=(sudoku, "textgym/Code-v0"),
        env_kwargs={sudoku: {"size": 4, "blanks": 1, "max_turns": 1}},
        oracle_kwargs={sudoku: {"compact": True}},
        model=str(model_dir),
        num_envs=2,
    )
    demos = warm_start_demonstrations(cfg, load_tokenizer(model_dir), tiny.compact_chat_template(), list(range(6)))
    assert [d.env_id for d in demos] == [sudoku] * 3 + ["textgym/Code-v0"] * 3
    assert all(d.success for d in demos)
    assert "<answer>\n" in demos[0].messages[-2]["content"]  # Sudoku's compact grid, not its drawn board
    assert "+" not in demos[0].messages[-2]["content"]
    with pytest.raises(TextGymError, match="Sudoku-v0 solved none.*oracle_kwargs.*env_kwargs.*--sft-steps 0"):
        bad = SFTConfig(
            env=(sudoku, "textgym/Code-v0"),
            env_kwargs={sudoku: {"size": 4, "blanks": 1, "max_turns": 1}},
            oracle_kwargs={sudoku: {"compact": True, "noise": 1.0, "place": 0}},
        )
        warm_start_demonstrations(bad, load_tokenizer(model_dir), tiny.compact_chat_template(), [0])
