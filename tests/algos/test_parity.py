"""The two backends agree: same weights and batch give the same logprobs, losses and update direction."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
try:
    from textgym.algos import jax as jax_backend

    jax_backend.load_model  # noqa: B018 - the attribute imports JAX, Flax and optax
except ImportError as exc:  # pragma: no cover - the JAX extra is not installed
    pytest.skip(f"JAX backend not importable: {exc}", allow_module_level=True)

from textgym.algos import torch as torch_backend
from textgym.algos.grpo import GRPOConfig, pack
from textgym.algos.grpo import grpo_loss as reference_loss
from textgym.algos.models import tiny
from textgym.rollout import Rollout

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
CONFIG = GRPOConfig(group_size=4, micro_batch_size=4, lr=1e-3, kl_beta=0.05, clip_eps_high=0.28, max_length=64, max_grad_norm=0.0)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def rollouts(seed: int = 0, n: int = 8) -> list[Rollout]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(10, 40))
        mask = (np.arange(size) >= int(rng.integers(3, size - 2))).astype(np.int8)
        out.append(
            Rollout(
                "e",
                "t",
                i // 4,
                [],
                float(rng.integers(0, 2)),
                False,
                1,
                True,
                False,
                token_ids=rng.integers(0, 270, size).astype(np.int32),
                loss_mask=mask,
                logprobs=np.where(mask > 0, rng.normal(-5.6, 0.2, size), 0.0).astype(np.float32),
                group=i // 4,
            )
        )
    return out


def test_logprobs_agree_to_1e_4(model_dir):
    batch = pack(rollouts(), CONFIG, pad_id=0)
    t = torch_backend.load_model(model_dir).logprobs(batch.input_ids, batch.attention_mask)
    j = jax_backend.load_model(model_dir).logprobs(batch.input_ids, batch.attention_mask)
    np.testing.assert_allclose(t, j, atol=1e-4)
    t2 = torch_backend.load_model(model_dir).logprobs(batch.input_ids, batch.attention_mask, temperature=0.7)
    j2 = jax_backend.load_model(model_dir).logprobs(batch.input_ids, batch.attention_mask, temperature=0.7)
    np.testing.assert_allclose(t2, j2, atol=1e-4)


def test_logprobs_agree_on_left_padding_at_the_first_real_token(model_dir):
    """Left padding: both report 0 where nothing real precedes a token, as at an unpadded row's
    start (JAX once reported a value there, from a padding query, that moved with later tokens)."""
    rng = np.random.default_rng(3)
    row = rng.integers(0, 270, 12).astype(np.int32)
    later = row.copy()
    later[-1] = (row[-1] + 1) % 270  # only the last token differs: nothing before it may move
    pad = np.zeros(4, np.int32)
    ids = np.stack([np.r_[pad, row], np.r_[pad, later], np.r_[row, pad]])
    mask = np.stack([np.r_[pad, np.ones(12, np.int32)]] * 2 + [np.r_[np.ones(12, np.int32), pad]])
    t = torch_backend.load_model(model_dir).logprobs(ids, mask)
    j = jax_backend.load_model(model_dir).logprobs(ids, mask)
    np.testing.assert_allclose(t, j, atol=1e-4)
    for lp in (t, j):
        assert lp[0, 4] == 0.0 and lp[1, 4] == 0.0  # the first real token after the padding
        np.testing.assert_allclose(lp[0, 4:], lp[2, :12], atol=1e-5)  # left and right padding agree
        np.testing.assert_allclose(lp[0, :-1], lp[1, :-1], atol=1e-5)  # no position sees a later token


def test_losses_agree_to_1e_5_and_equal_the_numpy_reference(model_dir):
    batch = pack(rollouts(1), CONFIG, pad_id=0)
    t_policy, j_policy = torch_backend.load_model(model_dir), jax_backend.load_model(model_dir)
    t_lp = t_policy.logprobs(batch.input_ids, batch.attention_mask)
    j_lp = j_policy.logprobs(batch.input_ids, batch.attention_mask)
    ref = t_lp - 0.1 * batch.loss_mask  # some distance to a reference policy, so the KL term counts
    want, _ = reference_loss(t_lp, batch, CONFIG, ref)
    t_loss, _ = torch_backend.grpo_loss(torch.tensor(t_lp), batch, CONFIG, torch.tensor(ref))
    j_loss, _ = jax_backend.grpo_loss(j_lp, batch, CONFIG, ref)
    assert float(t_loss) == pytest.approx(want, abs=1e-5)
    assert float(j_loss) == pytest.approx(float(t_loss), abs=1e-5)
    # The learners' own losses (forward, loss and aggregation inside train_step) agree as well.
    t_metrics = torch_backend.Learner(t_policy, CONFIG).train_step(batch)
    j_metrics = jax_backend.Learner(j_policy, CONFIG).train_step(batch)
    for name in ("loss/total", "loss/policy", "loss/kl", "stats/clip_frac", "stats/ratio_mean"):
        assert j_metrics[name] == pytest.approx(t_metrics[name], abs=1e-5), name


def test_one_step_moves_both_backends_the_same_way(model_dir, tmp_path):
    batch = pack(rollouts(2), CONFIG, pad_id=0)
    t_policy, j_policy = torch_backend.load_model(model_dir), jax_backend.load_model(model_dir)
    lp_before = t_policy.logprobs(batch.input_ids, batch.attention_mask)
    t_learner, j_learner = torch_backend.Learner(t_policy, CONFIG), jax_backend.Learner(j_policy, CONFIG)
    t_learner.train_step(batch)
    j_learner.train_step(batch)
    j_learner.export(tmp_path / "jax_step")
    t_learner.export(tmp_path / "torch_step")
    from safetensors.numpy import load_file

    start = load_file(str(model_dir / "model.safetensors"))
    t_after = load_file(str(tmp_path / "torch_step" / "model.safetensors"))
    j_after = load_file(str(tmp_path / "jax_step" / "model.safetensors"))
    for name, before in start.items():
        dt, dj = (t_after[name] - before).ravel(), (j_after[name] - before).ravel()
        cosine = float(dt @ dj / (np.linalg.norm(dt) * np.linalg.norm(dj)))
        assert cosine > 0.99, name
        # Adam's first step is ~lr * sign(gradient) per weight: only gradients within float32 noise
        # of zero (where Adam's normalisation amplifies that noise) may differ in sign.
        assert np.mean(np.sign(dt) == np.sign(dj)) > 0.99, name
    # The trained tokens' logprobs change alike: up where the advantage is positive, down where negative.
    on = batch.loss_mask > 0
    d_t = (t_policy.logprobs(batch.input_ids, batch.attention_mask) - lp_before)[on]
    d_j = (j_policy.logprobs(batch.input_ids, batch.attention_mask) - lp_before)[on]
    assert np.corrcoef(d_t, d_j)[0, 1] > 0.95
    direction = np.broadcast_to(np.sign(batch.advantages)[:, None], batch.shape)[on]
    assert (d_t * direction).sum() > 0 and (d_j * direction).sum() > 0


def test_torch_checkpoints_load_in_jax_and_back(model_dir, tmp_path):
    policy = torch_backend.load_model(model_dir)
    learner = torch_backend.Learner(policy, CONFIG)
    batch = pack(rollouts(3), CONFIG, pad_id=0)
    learner.train_step(batch)
    learner.save(tmp_path / "ckpt")
    from_jax = jax_backend.load_model(tmp_path / "ckpt")
    np.testing.assert_allclose(
        from_jax.logprobs(batch.input_ids, batch.attention_mask), policy.logprobs(batch.input_ids, batch.attention_mask), atol=1e-4
    )
    from_jax.export(tmp_path / "back")
    again = torch_backend.load_model(tmp_path / "back")
    np.testing.assert_allclose(
        again.logprobs(batch.input_ids, batch.attention_mask), policy.logprobs(batch.input_ids, batch.attention_mask), atol=1e-4
    )


FROZEN = dc.replace(CONFIG, trainable_layers=1, kl_beta=0.0)


def test_trainable_layers_freeze_the_same_weights_and_move_the_rest_alike(model_dir, tmp_path):
    """Top layer, final norm (the tiny head is tied to the embedding): trained; embedding and layer 0: bit-identical."""
    from safetensors.numpy import load_file

    batch = pack(rollouts(4), FROZEN, pad_id=0)
    t_learner = torch_backend.Learner(torch_backend.load_model(model_dir), FROZEN)
    j_learner = jax_backend.Learner(jax_backend.load_model(model_dir), FROZEN)
    for _ in range(2):
        t_learner.train_step(batch)
        j_learner.train_step(batch)
    t_learner.save(tmp_path / "torch")
    j_learner.save(tmp_path / "jax")
    start = load_file(str(model_dir / "model.safetensors"))
    t_after, j_after = load_file(str(tmp_path / "torch" / "model.safetensors")), load_file(str(tmp_path / "jax" / "model.safetensors"))
    trained = {n for n in start if n.startswith("model.layers.1.") or n == "model.norm.weight"}
    assert trained and "model.embed_tokens.weight" not in trained
    for name, before in start.items():
        dt, dj = (t_after[name] - before).ravel(), (j_after[name] - before).ravel()
        if name not in trained:
            assert not dt.any() and not dj.any(), name
            continue
        assert np.abs(dt).max() > 0 and np.abs(dj).max() > 0, name
        assert float(dt @ dj / (np.linalg.norm(dt) * np.linalg.norm(dj))) > 0.99, name
    # The optimiser holds state for the trained weights only, in both backends' checkpoints.
    sizes = {
        k: sum(
            v.size
            for n, v in load_file(str(tmp_path / k / "optimizer" / "state.safetensors")).items()
            if "step" not in n and "count" not in n
        )
        for k in ("torch", "jax")
    }
    assert sizes["torch"] == sizes["jax"] == 2 * sum(start[n].size for n in trained)


def test_a_frozen_run_resumes_and_rejects_a_mismatched_setting(model_dir, tmp_path):
    from textgym.error import CheckpointMismatch

    batch = pack(rollouts(5), FROZEN, pad_id=0)
    for backend in (torch_backend, jax_backend):
        learner = backend.Learner(backend.load_model(model_dir), FROZEN)
        learner.train_step(batch)
        learner.save(tmp_path / backend.__name__)
        again = backend.Learner(backend.load_model(model_dir), FROZEN)
        again.restore(tmp_path / backend.__name__)
        assert again.step == learner.step
        with pytest.raises(CheckpointMismatch):
            backend.Learner(backend.load_model(model_dir), dc.replace(FROZEN, trainable_layers=2)).restore(tmp_path / backend.__name__)
        with pytest.raises(ValueError, match="at most the model's 2 layers"):
            backend.Learner(backend.load_model(model_dir), dc.replace(FROZEN, trainable_layers=3))
