"""One checkpoint layout across backends: a run saved by either backend resumes on the other.

AdamW's state is keyed by Hugging Face parameter name in both backends (``<name>.exp_avg``,
``<name>.exp_avg_sq``, ``step``), so the file a torch run writes is the file a JAX run writes.
"""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jax")

from safetensors.numpy import load_file

from tests.algos.tiny_batches import SMALL, rollouts
from textgym.algos import jax as jax_backend
from textgym.algos import torch as torch_backend
from textgym.algos.grpo import GRPOConfig, pack
from textgym.algos.grpo.learner import OPTIMIZER_STATE
from textgym.algos.models import tiny
from textgym.error import CheckpointMismatch

BACKENDS = {"jax": jax_backend, "torch": torch_backend}
# A large adam_eps makes each update a smooth function of the gradients: with the default 1e-8,
# Adam's first steps are ~lr * sign(grad), and gradients at rounding level (where the backends
# legitimately differ) would flip whole steps. kl_beta > 0 puts the KL reference in the checkpoint too.
CONFIG = GRPOConfig(group_size=4, micro_batch_size=4, lr=0.1, adam_eps=1.0, kl_beta=0.1, max_length=64, max_grad_norm=0.0)
# LoRA: the optimiser's state is the adapters', keyed by peft's tensor names in both backends
# (Adam's own eps: the adapters' gradients are small, and a large eps would hide their state).
LORA = dc.replace(CONFIG, lr=1e-2, adam_eps=1e-8, lora_rank=4, lora_alpha=8.0, lora_targets=("q_proj", "down_proj"))
PAIRS = [("torch", "jax"), ("jax", "torch")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


BATCHES = [pack(rollouts(s), CONFIG, pad_id=0) for s in (20, 21, 22)]
PROBE = pack(rollouts(99), CONFIG, pad_id=0)


def learner(name: str, path, config: GRPOConfig = CONFIG):
    backend = BACKENDS[name]
    return backend.Learner(backend.load_model(path), config)


def resumed(name: str, checkpoint, config: GRPOConfig = CONFIG, base=None):
    """A learner of backend ``name`` restored from ``checkpoint``, as ``textgym train`` resumes one
    (a LoRA checkpoint holds the adapter: its base model is loaded from ``base``)."""
    out = learner(name, base or checkpoint, config)
    out.restore(checkpoint)
    return out


def weights(learner, directory) -> dict[str, np.ndarray]:
    learner.export(directory)
    return load_file(str(directory / "model.safetensors"))


def probe_logprobs(learner) -> np.ndarray:
    return np.asarray(learner.model.logprobs(PROBE.input_ids, PROBE.attention_mask)) * PROBE.loss_mask


@pytest.mark.slow  # 14-25 s on 2 cores (measured with --durations); runs with -m slow
def test_both_backends_key_the_optimiser_state_by_parameter_name(model_dir, tmp_path):
    files = {}
    for name in BACKENDS:
        trained = learner(name, model_dir)
        trained.train_step(BATCHES[0])
        trained.save(tmp_path / name)
        files[name] = load_file(str(tmp_path / name / OPTIMIZER_STATE))
    assert {k: (v.shape, v.dtype) for k, v in files["torch"].items()} == {k: (v.shape, v.dtype) for k, v in files["jax"].items()}
    params = load_file(str(model_dir / "model.safetensors"))
    assert set(files["jax"]) == {"step"} | {f"{n}.{m}" for n in params for m in ("exp_avg", "exp_avg_sq")}
    assert int(files["jax"]["step"]) == int(files["torch"]["step"]) == 1
    for name, value in params.items():  # each moment has its parameter's Hugging Face shape
        assert files["jax"][f"{name}.exp_avg"].shape == value.shape
    lora = {}
    for name in BACKENDS:
        trained = learner(name, model_dir, LORA)
        trained.train_step(BATCHES[0])
        trained.save(tmp_path / f"lora-{name}")
        lora[name] = {k: v.shape for k, v in load_file(str(tmp_path / f"lora-{name}" / OPTIMIZER_STATE)).items()}
    assert lora["jax"] == lora["torch"]
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight.exp_avg" in lora["jax"]


@pytest.mark.parametrize("config", [CONFIG, LORA], ids=["full", "lora"])
@pytest.mark.parametrize(("saver", "runner"), PAIRS)
def test_a_run_saved_by_one_backend_continues_on_the_other_as_its_uninterrupted_run(model_dir, tmp_path, saver, runner, config):
    """``runner`` trains two steps and stops; ``saver`` loads that checkpoint and writes it again in
    the shared layout (all it holds of the run); ``runner`` resumes from ``saver``'s checkpoint and
    takes the third step: the same model as ``runner``'s run that never stopped."""
    base = model_dir if config.lora_rank else None
    straight = learner(runner, model_dir, config)
    for batch in BATCHES:
        straight.train_step(batch)
    first = learner(runner, model_dir, config)
    for batch in BATCHES[:2]:
        first.train_step(batch)
    first.save(tmp_path / "first")
    resumed(saver, tmp_path / "first", config, base).save(tmp_path / "saved")
    run = resumed(runner, tmp_path / "saved", config, base)
    assert run.step == 2
    run.train_step(BATCHES[2])
    assert np.abs(probe_logprobs(run) - probe_logprobs(straight)).max() < 1e-5
    # Without the optimiser state the same step lands elsewhere: the check tells them apart.
    lost = resumed(runner, tmp_path / "saved", config, base)
    lost._load_adam_state((0, {name: tuple(np.zeros_like(m) for m in pair) for name, pair in lost._adam_state()[1].items()}))
    lost.train_step(BATCHES[2])
    assert np.abs(probe_logprobs(lost) - probe_logprobs(straight)).max() > 1e-4


@pytest.mark.parametrize(("saver", "runner"), PAIRS)
def test_a_run_trained_on_one_backend_resumes_on_the_other_where_it_left_off(model_dir, tmp_path, saver, runner):
    """``saver`` trains two steps and saves; ``runner`` resumes and trains the third. Its model
    scores a held-out batch as ``saver``'s uninterrupted run does, up to the backends' float32
    disagreement (1e-4, as in tests/algos/test_parity.py) and 100x closer than a resume that lost
    the optimiser state."""
    straight = learner(saver, model_dir)
    for batch in BATCHES[:2]:
        straight.train_step(batch)
    straight.save(tmp_path / "ckpt")
    straight.train_step(BATCHES[2])
    want = probe_logprobs(straight)
    run = resumed(runner, tmp_path / "ckpt")
    run.train_step(BATCHES[2])
    lost = learner(runner, tmp_path / "ckpt")
    lost.step = 2
    lost.train_step(BATCHES[2])
    error, lost_error = np.abs(probe_logprobs(run) - want).max(), np.abs(probe_logprobs(lost) - want).max()
    assert error < 1e-4 and lost_error > 100 * error


@pytest.mark.parametrize("name", BACKENDS)
def test_an_optimiser_state_of_another_layout_is_a_checkpoint_mismatch(model_dir, tmp_path, name):
    from safetensors.numpy import save_file

    trained = learner(name, model_dir)
    trained.train_step(BATCHES[0])
    trained.save(tmp_path / "ckpt")
    state = load_file(str(tmp_path / "ckpt" / OPTIMIZER_STATE))
    save_file({k.replace("model.", "", 1): v for k, v in state.items()}, str(tmp_path / "ckpt" / OPTIMIZER_STATE))
    with pytest.raises(CheckpointMismatch, match="optimizer state"):
        resumed(name, tmp_path / "ckpt")
