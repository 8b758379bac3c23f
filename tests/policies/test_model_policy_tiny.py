"""ModelPolicy with the torch backend's tiny model on a TokenObservation env, through collect."""

import numpy as np
import pytest

from tests.policies.toy import CountdownEnv
from textgym.policies import ModelPolicy

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # torch import and the tiny model: 12 s of CPU, 30 s on shared cores


def test_sampled_ids_and_logprobs_land_verbatim_in_the_rollouts(tmp_path):
    import gymnasium as gym

    from textgym.algos.models import tiny
    from textgym.algos.torch.model import load_model
    from textgym.rollout import collect
    from textgym.wrappers import TokenObservation

    backend = load_model(tiny.create(tmp_path / "tiny", seed=0))
    template = tiny.compact_chat_template()
    venv = gym.vector.SyncVectorEnv([lambda: TokenObservation(CountdownEnv(max_turns=2), backend.tokenizer, chat_template=template)] * 2)
    policy = ModelPolicy(backend, max_new_tokens=6, temperature=1.0, seed=3)
    rollouts = collect(venv, policy, seeds=[0, 1])
    venv.close()
    for r in rollouts:
        sampled = r.loss_mask.astype(bool)
        assert 1 <= sampled.sum() <= 6 * r.turns and r.token_ids.dtype == np.int32
        assert np.all(r.logprobs[sampled] <= 0) and np.all(r.logprobs[~sampled] == 0)
        assert np.any(r.logprobs[sampled] < 0)
    # Re-scoring the trajectory gives the sampler's logprobs back at the sampled positions.
    r = rollouts[0]
    scored = backend.logprobs(r.token_ids[None], np.ones((1, r.token_ids.size), np.int32))[0]
    assert np.allclose(scored[r.loss_mask.astype(bool)], r.logprobs[r.loss_mask.astype(bool)], atol=1e-4)
