"""One backend contract: the JAX and torch learners export, train, checkpoint and fail the same way.

Every test runs for both backends (or compares them), on one tiny random checkpoint that both load.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jax")

from tests.algos.tiny_batches import SMALL, rollouts
from textgym.algos import jax as jax_backend
from textgym.algos import torch as torch_backend
from textgym.algos.backends import contract
from textgym.algos.config import OptimizerConfig, SFTConfig
from textgym.algos.config.mesh import parse_mesh
from textgym.algos.grpo import GRPOConfig, grpo_loss, pack, rollout_correction
from textgym.algos.models import tiny
from textgym.error import CheckpointMismatch

BACKENDS = {"jax": jax_backend, "torch": torch_backend}
CONFIG = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-2, kl_beta=0.1, max_length=64, max_grad_norm=0.0)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def test_both_backends_export_the_same_names_lazily_and_one_loss_signature():
    assert jax_backend.__all__ == torch_backend.__all__ == sorted(contract.CONTRACT)
    code = "import sys, textgym.algos.jax, textgym.algos.torch; print(sorted(m for m in ('torch', 'jax', 'flax') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    names = [list(inspect.signature(f).parameters) for f in (grpo_loss, jax_backend.grpo_loss, torch_backend.grpo_loss)]
    assert names[0] == names[1] == names[2] == ["logprobs", "batch", "config", "ref_logprobs"]
    for name in ("train_step", "save", "restore", "export", "update"):
        assert hasattr(jax_backend.Learner, name) and hasattr(torch_backend.Learner, name)
    for module in ("processes", "threads"):  # the framework's side of the two, the same functions in both
        assert own_functions(f"textgym.algos.jax.{module}") == own_functions(f"textgym.algos.torch.{module}")


def own_functions(module: str) -> set[str]:
    found = importlib.import_module(module)
    return {name for name, value in vars(found).items() if inspect.isfunction(value) and value.__module__ == module}


@pytest.mark.parametrize("backend", [jax_backend, torch_backend])
def test_the_old_loader_name_still_loads_and_says_it_is_renamed(backend):
    with pytest.warns(DeprecationWarning, match="renamed load_model"):
        assert backend.load_policy is backend.load_model


@pytest.mark.parametrize("backend", [jax_backend, torch_backend])
def test_a_learner_names_its_model_model_and_the_old_policy_name_warns(backend, model_dir):
    model = backend.load_model(model_dir)
    learner = backend.Learner(model, GRPOConfig())
    assert learner.model is model
    with pytest.warns(DeprecationWarning, match="renamed Learner.model"):
        assert learner.policy is model


@pytest.mark.parametrize("policy_loss", ["clip", "gspo", "cispo"])
@pytest.mark.parametrize("correction", ["none", "tis", "mis"])
def test_objective_variants_agree_across_reference_jax_and_torch(policy_loss, correction):
    import jax.numpy as jnp
    import torch

    eps = (0.01, 0.01) if policy_loss == "gspo" else (0.2, 0.28)  # GSPO's sequence ratios stay near 1: its clip is narrow
    cfg = GRPOConfig(
        group_size=4,
        micro_batch_size=8,
        kl_beta=0.05,
        clip_eps_low=eps[0],
        clip_eps_high=eps[1],
        policy_loss=policy_loss,
        rollout_correction=correction,
        rollout_correction_cap=1.2,
    )
    batch = pack(rollouts(1), cfg, pad_id=0)
    rng = np.random.default_rng(2)
    noise = lambda s: (rng.normal(0, s, batch.shape) * batch.loss_mask).astype(np.float32)
    lp = batch.old_logprobs + noise(0.3)  # ratios far from 1: the clip and the caps bite
    ref = batch.old_logprobs + noise(0.2)
    if correction != "none":
        learner_old = batch.old_logprobs + noise(0.2)
        weights, kl = rollout_correction(batch.old_logprobs, learner_old, batch.loss_mask, cfg)
        assert kl > 0 and weights.max() <= 1.2 + 1e-6 and (correction == "tis" or (weights[batch.loss_mask > 0] == 0).any())
        batch = batch.replace(old_logprobs=learner_old, is_weights=weights)
    want, metrics = grpo_loss(lp, batch, cfg, ref)
    j_loss, j_metrics = jax_backend.grpo_loss(jnp.asarray(lp), batch, cfg, jnp.asarray(ref))
    t_loss, t_metrics = torch_backend.grpo_loss(torch.tensor(lp), batch, cfg, torch.tensor(ref))
    assert metrics["stats/clip_frac"] > 0
    assert float(j_loss) == pytest.approx(want, abs=1e-5) and float(t_loss) == pytest.approx(want, abs=1e-5)
    for key, value in metrics.items():
        assert float(j_metrics[key]) == pytest.approx(value, abs=1e-5), key
        assert float(t_metrics[key]) == pytest.approx(value, abs=1e-5), key


def test_gspo_uses_one_ratio_per_sequence_and_cispo_keeps_clipped_gradients():
    import torch

    batch = pack(rollouts(3), GRPOConfig(group_size=4, micro_batch_size=8), pad_id=0)
    lp = torch.tensor(batch.old_logprobs + 0.5 * batch.loss_mask, requires_grad=True)  # every ratio e^0.5, clipped
    _, m = torch_backend.grpo_loss(lp, batch, GRPOConfig(policy_loss="gspo"))
    assert m["stats/ratio_mean"].item() == pytest.approx(np.exp(0.5), rel=1e-5)
    for name, has_gradient in (("clip", False), ("cispo", True)):
        lp.grad = None
        loss, _ = torch_backend.grpo_loss(lp, batch, GRPOConfig(policy_loss=name))
        loss.backward()
        positive = torch.tensor(batch.advantages > 0)
        assert bool(lp.grad[positive].abs().sum() > 0) == has_gradient, name


@pytest.mark.parametrize("name", BACKENDS)
def test_the_kl_reference_survives_save_and_restore(model_dir, tmp_path, name):
    backend = BACKENDS[name]
    batches = [pack(rollouts(s), CONFIG, pad_id=0) for s in (10, 11, 12)]
    straight = backend.Learner(backend.load_model(model_dir), CONFIG)
    for b in batches[:2]:
        straight.train_step(b)
    straight.save(tmp_path / "ckpt")
    want = straight.train_step(batches[2])
    # The loop reloads the policy from the checkpoint: the reference must still be the start.
    resumed = backend.Learner(backend.load_model(tmp_path / "ckpt"), CONFIG)
    resumed.restore(tmp_path / "ckpt")
    got = resumed.train_step(batches[2])
    assert got["loss/kl"] > 1e-4
    assert got == pytest.approx(want, abs=1e-6)


def test_both_backends_write_one_checkpoint_layout(model_dir, tmp_path):
    layouts = []
    for name, backend in BACKENDS.items():
        learner = backend.Learner(backend.load_model(model_dir), CONFIG)
        learner.train_step(pack(rollouts(4), CONFIG, pad_id=0))
        learner.save(tmp_path / name)
        layouts.append({p.relative_to(tmp_path / name).as_posix() for p in (tmp_path / name).rglob("*") if p.is_file()})
    wanted = {
        "config.json",
        "model.safetensors",
        "optimizer/state.safetensors",
        "trainer_state.json",
        "reference/config.json",
        "reference/model.safetensors",
    }
    assert wanted <= layouts[0] and wanted <= layouts[1]
    # A torch checkpoint's weights and reference load in JAX (the same HF files).
    jax_learner = jax_backend.Learner(jax_backend.load_model(tmp_path / "torch"), CONFIG)
    jax_learner._restore_weights(tmp_path / "torch", tmp_path / "torch" / "reference")


@pytest.mark.parametrize("name", BACKENDS)
def test_a_mismatched_checkpoint_raises_checkpoint_mismatch(model_dir, tmp_path, name):
    backend = BACKENDS[name]
    other = tiny.create(tmp_path / "big", size=tiny.TinySize(hidden_size=48, intermediate_size=64, num_hidden_layers=2))
    backend.Learner(backend.load_model(other), GRPOConfig()).save(tmp_path / "ckpt")
    with pytest.raises(CheckpointMismatch):
        backend.Learner(backend.load_model(model_dir), GRPOConfig()).restore(tmp_path / "ckpt")
    backend.Learner(backend.load_model(model_dir), GRPOConfig(kl_beta=0.0)).save(tmp_path / "no_ref")
    with pytest.raises(CheckpointMismatch, match="KL reference"):
        backend.Learner(backend.load_model(model_dir), CONFIG).restore(tmp_path / "no_ref")


@pytest.mark.slow  # 14-25 s on 2 cores (measured with --durations); runs with -m slow
def test_uneven_micro_batches_empty_batches_and_rollout_correction_agree(model_dir):
    cfg = GRPOConfig(group_size=4, micro_batch_size=3, lr=1e-2, max_length=64, rollout_correction="tis")
    batch = pack(rollouts(5), GRPOConfig(group_size=4, micro_batch_size=8, max_length=64), pad_id=0)  # 8 rows: not a multiple of 3
    results = {name: b.Learner(b.load_model(model_dir), cfg).train_step(batch) for name, b in BACKENDS.items()}
    assert results["jax"]["stats/sampler_mismatch_kl"] > 0  # random "sampler" logprobs are far from the model's
    assert results["jax"] == pytest.approx(results["torch"], rel=1e-4, abs=1e-5)
    empty = batch.replace(loss_mask=0 * batch.loss_mask, loss_weights=0 * batch.loss_weights, num_sequences=0, token_count=0)
    for name, b in BACKENDS.items():
        metrics = b.Learner(b.load_model(model_dir), GRPOConfig(micro_batch_size=8)).train_step(empty)
        assert metrics["stats/reward_mean"] == 0.0 and metrics["loss/total"] == 0.0, name


def test_both_samplers_take_single_stop_ids(model_dir):
    prompts = [np.array([5, 6, 7], np.int32)]
    for name, b in BACKENDS.items():
        policy = b.load_model(model_dir)
        free, _ = policy.generate(prompts, 6, 0.0, 0, eos_ids=())
        ids, _ = policy.generate(prompts, 6, 0.0, 0, stop_ids=[int(free[0][1])], eos_ids=())
        assert ids[0].tolist() == free[0][: free[0].tolist().index(free[0][1]) + 1].tolist(), name


def test_threads_reach_jax_before_it_is_imported():
    code = (
        "import os; from textgym.algos.backends import load_backend; load_backend('jax', {n}); import jax; "
        "print(os.environ.get('XLA_FLAGS', ''), len(os.sched_getaffinity(0)))"
    )
    one = subprocess.run([sys.executable, "-c", code.format(n=1)], capture_output=True, text=True, check=True).stdout
    assert "--xla_cpu_multi_thread_eigen=false" in one
    cpus = len(__import__("os").sched_getaffinity(0))
    two = subprocess.run([sys.executable, "-c", code.format(n=2)], capture_output=True, text=True, check=True).stdout
    assert int(two.split()[-1]) == min(2, cpus)


def test_the_mesh_is_reachable_from_the_config(model_dir):
    from textgym.algos import backends

    learner = backends.make_learner(jax_backend, jax_backend.load_model(model_dir), GRPOConfig(micro_batch_size=4), "data=1,fsdp=1")
    assert learner.mesh is not None and dict(learner.mesh.shape) == {"data": 1, "fsdp": 1}
    with pytest.raises(ValueError, match="torchrun"):
        backends.make_learner(torch_backend, torch_backend.load_model(model_dir), GRPOConfig(), "data=1")
    with pytest.raises(ValueError, match="expected a mesh"):
        parse_mesh("data=2,model=4")


def test_both_backends_follow_the_one_learning_rate_schedule():
    optimizer = OptimizerConfig(lr=1e-3, lr_schedule="cosine", warmup_steps=3, total_steps=10)
    want = [optimizer.learning_rate(step) for step in range(14)]
    assert [torch_backend.make_schedule(optimizer)(step) for step in range(14)] == want
    np.testing.assert_allclose([float(jax_backend.make_schedule(optimizer)(step)) for step in range(14)], want, rtol=1e-6)
    warm_start = SFTConfig(env="textgym/Sudoku-v0", steps=20, lr=1e-4).optimizer
    assert (warm_start.lr, warm_start.lr_schedule, warm_start.warmup_steps, warm_start.total_steps) == (1e-4, "cosine", 2, 20)


def test_model_policy_load_is_the_backends_loader_under_its_old_name(monkeypatch):
    from textgym.algos import backends
    from textgym.policies import ModelPolicy

    monkeypatch.setattr(backends, "load_model_policy", lambda model, **kwargs: (model, kwargs))
    with pytest.warns(DeprecationWarning, match="load_model_policy"):
        assert ModelPolicy.load("tiny", backend="jax") == ("tiny", {"backend": "jax"})
