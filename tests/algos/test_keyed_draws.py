"""An episode's random draws are its own: the same seeds sample the same episodes whatever the
batch they share, and the same in JAX and in torch, because every uniform number comes from
:mod:`textgym.draws` keyed by the episode, never from a backend's generator seeded per call."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import tests.algos.test_train as envs  # registers the one- and two-turn test envs
from textgym import draws
from textgym.algos import models
from textgym.algos.backends import load_backend
from textgym.algos.grpo.seeds import SeedTree, eval_seeds
from textgym.algos.models import tiny
from textgym.algos.rollouts import seeded, token_envs
from textgym.policies import ModelPolicy
from textgym.rollout import EpisodeSlot, collect

BACKENDS = ["torch", "jax"]
NEW_TOKENS = 10


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=envs.SMALL)


@pytest.fixture(scope="module")
def backend_models(model_dir):
    """Each backend's sampler of the same checkpoint, loaded once (JAX compiles once)."""
    loaded = {}

    def get(backend: str):
        if backend not in loaded:
            if backend == "jax":
                pytest.importorskip("jax")
                pytest.importorskip("flax")
            loaded[backend] = load_backend(backend).load_model(model_dir)
        return loaded[backend]

    return get


def venv(model_dir, env: str, num_envs: int):
    return token_envs.token_venv(env, {}, models.load_tokenizer(model_dir), tiny.compact_chat_template(), num_envs)


def play(model, model_dir, num_envs: int, env: str = envs.TWO_TURN_ID):
    """Four groups of two two-turn episodes, ``num_envs`` at a time."""
    policy = ModelPolicy(model, max_new_tokens=NEW_TOKENS, temperature=1.0, seed=3)
    return collect(venv(model_dir, env, num_envs), policy, seeds=[11, 12, 13, 14], group_size=2)


def test_uniforms_are_a_pure_function_of_seed_key_turn_and_token():
    u = draws.token_uniforms(7, keys=[5, 5, 6], turns=[0, 1, 0], n=6)
    assert u.shape == (3, 6) and u.dtype == np.float32
    assert len({tuple(row) for row in u}) == 3  # another turn or another key: other numbers
    np.testing.assert_array_equal(draws.token_uniforms(7, keys=[6], turns=[0], n=4), u[2:, :4])
    assert not np.array_equal(draws.token_uniforms(8, keys=[5], turns=[0], n=6), u[:1])
    big = 2**63 + 12345  # keys past int64 beside small ones: no rounding through float64
    np.testing.assert_array_equal(draws.call_uniforms(1, [(big, 0), (3, 0)], 2, 4)[0], draws.call_uniforms(1, [(big, 0)], 1, 4)[0])
    many = draws.token_uniforms(0, keys=np.arange(200), turns=np.zeros(200, int), n=200)
    assert many.min() >= 0 and many.max() < 1 and abs(many.mean() - 0.5) < 0.01


def test_episode_keys_depend_on_the_episode_not_the_process():
    tree = SeedTree(3)
    key = tree.episode_key("train_sampler", step=2, group=5, member=1)
    assert key == SeedTree(3).episode_key("train_sampler", 2, 5, 1)
    others = {
        tree.episode_key("train_sampler", 2, 5, 0),
        tree.episode_key("train_sampler", 2, 4, 1),
        tree.episode_key("train_sampler", 3, 5, 1),
        tree.episode_key("eval_sampler", 2, 5, 1),
        tree.episode_key("train_sampler", 2, 5, 1, row=1),
        SeedTree(4).episode_key("train_sampler", 2, 5, 1),
    }
    assert key not in others and len(others) == 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_episode_samples_the_same_in_batches_of_1_3_and_8(backend_models, model_dir, backend):
    model = backend_models(backend)
    runs = [play(model, model_dir, n) for n in (1, 3, 8)]
    assert all(r.turns == 2 for r in runs[0])  # the second turn draws with its own numbers
    ids = [[r.token_ids.tolist() for r in run] for run in runs]
    assert ids[1] == ids[0] and ids[2] == ids[0]
    assert ids[0][0] != ids[0][1]  # a group's episodes draw apart


def test_a_keyed_row_samples_the_same_among_any_rows(backend_models):
    """At the sampler itself: one row's tokens, alone and among other rows in another order."""
    model = backend_models("torch")
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 256, n).astype(np.int32) for n in (5, 9, 3, 7)]
    keys = [(101, 0), (102, 1), (103, 0), (104, 2)]
    alone, _ = model.generate(rows[1:2], NEW_TOKENS, 1.0, 9, keys=keys[1:2], eos_ids=())
    mixed, _ = model.generate(rows[::-1], NEW_TOKENS, 1.0, 9, keys=keys[::-1], eos_ids=())
    np.testing.assert_array_equal(alone[0], mixed[2])


def test_jax_and_torch_sample_the_same_episodes(backend_models, model_dir):
    """Equal logits pick equal tokens: the backends' logits agree to ~1e-6 here, far inside every
    gap between a uniform and a CDF boundary that these episodes meet, so no float tie decides."""
    torch_ids = [r.token_ids.tolist() for r in play(backend_models("torch"), model_dir, 3)]
    jax_ids = [r.token_ids.tolist() for r in play(backend_models("jax"), model_dir, 8)]
    assert jax_ids == torch_ids


def test_held_out_evaluation_scores_the_same_on_either_backend(backend_models, model_dir):
    seeds = eval_seeds(12)

    def score(backend: str, num_envs: int) -> dict[str, float]:
        return seeded.evaluate(
            backend_models(backend), venv(model_dir, envs.ENV_ID, num_envs), seeds, max_new_tokens=4, temperature=1.0, seed=5
        )

    torch_score = score("torch", 4)
    assert 0 < torch_score["eval/success"] < 1  # some episodes pass, some fail: the draws decide
    assert score("jax", 12) == torch_score


def test_a_policy_keys_episodes_by_task_seed_and_member():
    policy = ModelPolicy(type("M", (), {"generate": lambda self, prompts, max_new_tokens, temperature, seed, keys: None})(), seed=1)
    key = policy.episode_key(EpisodeSlot(seed=4, group=0, member=1, turn=0))
    assert key == policy.episode_key(EpisodeSlot(seed=4, group=7, member=1, turn=3))  # not its place in the call
    assert key != policy.episode_key(EpisodeSlot(seed=4, group=0, member=0, turn=0))
