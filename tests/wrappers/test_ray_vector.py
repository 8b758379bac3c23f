"""RayVectorEnv matches Gymnasium's SyncVectorEnv step for step, on a local two-CPU Ray."""

import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from tests.policies.toy import CountdownEnv
from textgym.policies import OraclePolicy, RandomPolicy

ray = pytest.importorskip("ray")
from textgym.wrappers.ray_vector import RayVectorEnv

pytestmark = pytest.mark.slow  # Ray start-up plus workers: 15-30 s on 2 shared cores


@pytest.fixture(scope="module")
def local_ray():
    # Workers cannot import the test package: ship the toy env's module by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[CountdownEnv.__module__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def assert_same(x, y):
    """Equal batches: arrays, tuples of conversations, and vector infos (dicts of arrays)."""
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            assert_same(x[k], y[k])
    elif isinstance(x, (np.ndarray, tuple, list)):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            assert_same(u, v)
    else:
        assert x == y


def assert_same_step(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert_same(x, y)


@pytest.mark.parametrize("autoreset_mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_matches_sync_vector_env_through_autoresets(local_ray, autoreset_mode):
    fns = [CountdownEnv] * 5
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset_mode)
    rvec = RayVectorEnv(fns, envs_per_actor=2, autoreset_mode=autoreset_mode, timeout=120)
    assert rvec.num_envs == 5 and len(rvec.actors) == 3
    assert rvec.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"]
    seeds = [7, 7, 3, 11, 20]
    assert_same_step(sync.reset(seed=seeds), rvec.reset(seed=seeds))
    oracle_s, oracle_r = OraclePolicy(sync), OraclePolicy(rvec)
    random_actions = RandomPolicy(seed=0)
    ended = np.zeros(5, dtype=int)
    for t in range(12):  # oracle episodes last 2-4 turns: several autoresets per sub-env
        obs = rvec.call("oracle_action")
        if t % 3 == 2:  # mix in random (often malformed) actions
            actions = random_actions.act(obs).actions
        else:
            actions = oracle_r.act(obs).actions
            assert actions == oracle_s.act(obs).actions
        a, b = sync.step(actions), rvec.step(actions)
        assert_same_step(a, b)
        ended += a[2] | a[3]
    assert (ended >= 2).all()
    sync.close()
    rvec.close()
    assert rvec.closed and rvec.actors == []


def test_seeds_call_attrs_and_errors(local_ray):
    venv = RayVectorEnv([CountdownEnv] * 3, timeout=120)
    obs, infos = venv.reset(seed=5)  # an int seeds the sub-envs with 5, 6, 7
    direct = [CountdownEnv().reset(seed=s)[1]["task_id"] for s in (5, 6, 7)]
    assert list(infos["task_id"]) == direct
    assert venv.get_attr("max_turns") == (6, 6, 6)
    venv.set_attr("max_turns", [1, 2, 3])
    assert venv.get_attr("max_turns") == (1, 2, 3)
    assert len(venv.call("oracle_action")) == 3
    # Only masked sub-envs reset; the others keep their task.
    _, infos2 = venv.reset(seed=[None, 42, None], options={"reset_mask": np.array([False, True, False])})
    assert list(infos2["_task_id"]) == [False, True, False]
    with pytest.raises(ValueError, match="3 seeds"):
        venv.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
    venv.close()


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0"])
def test_from_id_makes_registered_envs_in_workers(local_ray, env_id):
    venv = RayVectorEnv.from_id(env_id, num_envs=2, timeout=120)
    obs, infos = venv.reset(seed=[0, 0])
    assert obs[0] == obs[1] and infos["task_id"][0] == infos["task_id"][1]
    venv.close()


def test_autoreset_disabled_raises_the_sub_env_error(local_ray):
    venv = RayVectorEnv([CountdownEnv], autoreset_mode=AutoresetMode.DISABLED, timeout=120)
    venv.reset(seed=0)
    for _ in range(6):
        venv.step(["no answer"])  # max_turns=6: the episode is truncated
    with pytest.raises(gym.error.ResetNeeded):
        venv.step(["no answer"])
    venv.close()
