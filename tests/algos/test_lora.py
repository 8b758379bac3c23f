"""LoRA in both backends: the same seeded adapters, the same first GRPO step, peft's format both ways."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
try:
    from textgym.algos import jax as jax_backend

    jax_backend.load_model  # noqa: B018 - the attribute imports JAX, Flax and optax
except ImportError as exc:  # pragma: no cover - the JAX extra is not installed
    pytest.skip(f"JAX backend not importable: {exc}", allow_module_level=True)

from transformers import AutoModelForCausalLM

from textgym.algos import torch as torch_backend
from textgym.algos.grpo import GRPOConfig, pack
from textgym.algos.grpo.lora import MERGED
from textgym.algos.models import tiny
from textgym.algos.torch.lora import get_adapters

from .test_parity import SMALL, rollouts

CONFIG = GRPOConfig(
    group_size=4,
    micro_batch_size=4,
    lr=1e-3,
    kl_beta=0.05,
    max_length=64,
    max_grad_norm=0.0,
    lora_rank=4,
    lora_alpha=8.0,
    lora_targets=("q_proj", "v_proj", "down_proj"),
    lora_merge=True,
    seed=3,
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


@pytest.fixture(scope="module")
def trained(model_dir, tmp_path_factory):
    """Both backends' learners after one GRPO step on the same batch, their metrics and exports."""
    out = tmp_path_factory.mktemp("lora")
    batch = pack(rollouts(1), CONFIG, pad_id=0)
    t = torch_backend.Learner(torch_backend.load_model(model_dir), CONFIG)
    j = jax_backend.Learner(jax_backend.load_model(model_dir), CONFIG)
    start = (get_adapters(t.network, t.lora_modules), j.adapters())
    metrics = (t.train_step(batch), j.train_step(batch))
    t.export(out / "torch"), j.export(out / "jax")
    return {"t": t, "j": j, "start": start, "metrics": metrics, "out": out, "batch": batch}


@pytest.mark.slow
def test_both_backends_start_from_the_same_seeded_adapters(trained):
    torch_start, jax_start = trained["start"]
    assert sorted(torch_start) == sorted(jax_start) and len(jax_start) == 3 * SMALL.num_hidden_layers
    for module, (a, b) in torch_start.items():
        np.testing.assert_array_equal(a, jax_start[module][0])
        np.testing.assert_array_equal(b, jax_start[module][1])
        assert not b.any() and a.any()  # B = 0: training starts at the base model
    other = jax_backend.Learner(jax_backend.load_model(trained["j"].model.path), CONFIG.__class__(**{**vars(CONFIG), "seed": 4}))
    assert not np.array_equal(other.adapters()[next(iter(jax_start))][0], next(iter(jax_start.values()))[0])


@pytest.mark.slow
def test_one_step_gives_the_same_loss_and_update(trained):
    t_metrics, j_metrics = trained["metrics"]
    for name in ("loss/total", "loss/policy", "loss/kl", "stats/clip_frac", "stats/grad_norm"):
        assert t_metrics[name] == pytest.approx(j_metrics[name], abs=1e-5), name
    torch_now, jax_now = get_adapters(trained["t"].network, trained["t"].lora_modules), trained["j"].adapters()
    torch_start = trained["start"][0]
    for module in torch_start:
        for k in (0, 1):
            dt, dj = torch_now[module][k] - torch_start[module][k], jax_now[module][k] - torch_start[module][k]
            np.testing.assert_allclose(dt, dj, atol=2e-6)
    moved = [torch_now[m][1] - torch_start[m][1] for m in torch_start]
    assert all(np.abs(d).max() > 5e-4 for d in moved)  # every B moved by ~lr (Adam's first step)
    assert trained["t"].params and all("lora_" in n for n, p in trained["t"].network.named_parameters() if p.requires_grad)


@pytest.mark.slow
def test_the_sampler_runs_with_the_adapter_and_peft_loads_both_exports(trained, model_dir):
    batch = trained["batch"]
    ids, mask = batch.input_ids, batch.attention_mask
    base = torch_backend.load_model(model_dir).logprobs(ids, mask)
    j_lp = trained["j"].model.logprobs(ids, mask)
    t_lp = trained["t"].model.logprobs(ids, mask)
    assert np.abs(j_lp - base).max() > 1e-4  # the update reached the sampler
    np.testing.assert_allclose(t_lp, j_lp, atol=1e-4)
    for name in ("torch", "jax"):
        directory = trained["out"] / name
        loaded = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), str(directory))
        np.testing.assert_allclose(torch_backend.TorchLanguageModel.logprobs(_as_policy(loaded, model_dir), ids, mask), j_lp, atol=1e-4)
        merged = jax_backend.load_model(directory / MERGED).logprobs(ids, mask)
        np.testing.assert_allclose(merged, j_lp, atol=1e-4)


@pytest.mark.slow
def test_checkpoints_restore_the_adapter_and_optimiser(trained, tmp_path):
    j, t = trained["j"], trained["t"]
    j.save(tmp_path / "j")
    assert (tmp_path / "j" / "adapter_model.safetensors").is_file() and not (tmp_path / "j" / "reference").exists()
    fresh = jax_backend.Learner(jax_backend.load_model(j.model.path), CONFIG)
    fresh.restore(tmp_path / "j")
    for module, (a, b) in j.adapters().items():
        np.testing.assert_array_equal(fresh.adapters()[module][0], a)
        np.testing.assert_array_equal(fresh.adapters()[module][1], b)
    batch = trained["batch"]
    assert fresh.train_step(batch)["loss/total"] == pytest.approx(_copy_step(j, batch), abs=1e-6)
    t.save(tmp_path / "t")
    other = torch_backend.Learner(torch_backend.load_model(trained["t"].model.path), CONFIG)
    other.restore(tmp_path / "t")
    np.testing.assert_allclose(
        get_adapters(other.network, other.lora_modules)[t.lora_modules[0]][1], get_adapters(t.network, t.lora_modules)[t.lora_modules[0]][1]
    )


def test_bad_lora_settings_are_one_clear_error(model_dir):
    with pytest.raises(ValueError, match="exclude each other"):
        GRPOConfig(lora_rank=4, trainable_layers=1)
    bad = GRPOConfig(lora_rank=4, lora_targets=("q_proj", "qkv"))
    for backend in (torch_backend, jax_backend):
        with pytest.raises(ValueError, match="lora target qkv names no linear module"):
            backend.Learner(backend.load_model(model_dir), bad)


def _copy_step(learner, batch) -> float:
    """The loss the learner's next step reports, on a throwaway copy of its state."""
    import jax

    saved = (jax.tree.map(lambda x: x.copy(), learner.params), jax.tree.map(lambda x: x.copy(), learner.opt_state), learner.step)
    loss = learner.train_step(batch)["loss/total"]
    learner.params, learner.opt_state, learner.step = saved
    learner._publish()
    return loss


def _as_policy(model, path):
    policy = torch_backend.load_model(path)
    policy.model = model
    return policy


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_lora_run_resumes_exactly_and_writes_adapters(model_dir, tmp_path, backend):
    from textgym.algos import train as train_module

    from .test_train import comparable, config, read_metrics

    lora = dict(vars(CONFIG)) | {"lr": 3e-2, "max_new_tokens": 3, "micro_batch_size": 4, "group_size": 4}
    run = lambda out, **kw: train_module.train(config(model_dir, out, backend=backend, grpo=GRPOConfig(**lora), **kw))
    run(tmp_path / "straight")
    run(tmp_path / "resumed", stop_after=1)
    run(tmp_path / "resumed")
    straight, resumed = (read_metrics(tmp_path / name / "metrics.jsonl") for name in ("straight", "resumed"))
    assert comparable(straight) == comparable(resumed)
    final = tmp_path / "straight" / "final"
    assert (final / "adapter_config.json").is_file() and (final / "adapter_model.safetensors").is_file()
    assert (final / MERGED / "config.json").is_file() and not (final / "model.safetensors").exists()
