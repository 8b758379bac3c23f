"""RayVectorEnv on a real two-node cluster (``ray start --head`` plus ``ray start --address``),
joined with ``address="auto"``; a killed actor is replaced and its episode ends as ``env_error``."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.policies.toy import CountdownEnv
from tests.wrappers.ray_cluster import two_node_cluster
from textgym.error import TextGymError
from textgym.policies import OraclePolicy
from textgym.rollout import collect

ray = pytest.importorskip("ray")
from textgym.wrappers.ray_vector import RayVectorEnv

# The cluster tests are slow: two Ray nodes start in 20-45 s on 2 shared cores.


@pytest.fixture(scope="module")
def cluster():
    with two_node_cluster() as (address, home):
        yield address, home


@pytest.fixture
def joined(cluster, monkeypatch):
    """This process joined to the cluster the way a user's script is: ``address="auto"`` and ``RAY_ADDRESS``."""
    address, home = cluster
    monkeypatch.setenv("RAY_ADDRESS", address)
    monkeypatch.setenv("HOME", home)
    # Workers cannot import the test package: ship the toy env's module by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[CountdownEnv.__module__])
    yield address
    ray.shutdown()


class KillingOracle:
    """The oracle, which kills the first actor right after its ``at``-th batch of actions."""

    def __init__(self, venv: RayVectorEnv, at: int):
        self.venv, self.at, self.calls, self.oracle = venv, at, 0, OraclePolicy(venv)

    def act(self, observations, infos=None):
        out = self.oracle.act(observations, infos)
        self.calls += 1
        if self.calls == self.at:
            kill(self.venv.actors[0])
        return out


def kill(actor) -> None:
    """``ray.kill``, and wait until the actor is dead (the kill is asynchronous)."""
    ray.kill(actor, no_restart=True)
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(100):
            ray.get(actor.spaces.remote(), timeout=60)


@pytest.mark.slow
def test_actors_spread_over_both_nodes_and_a_killed_one_is_replaced(joined):
    venv = RayVectorEnv([CountdownEnv] * 2, address="auto", actor_options={"num_cpus": 1}, timeout=120)
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2 and ray.get_runtime_context().gcs_address.endswith(":" + joined.split(":")[1])
    # One CPU per node and one per actor: the two actors can only run on different nodes.
    where = ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in venv.actors])
    assert set(where) == nodes

    # Countdown's oracle needs 2-4 turns: the kill after the first action lands mid-episode.
    rollouts = collect(venv, KillingOracle(venv, at=1), seeds=[3, 4, 5, 6], group_size=1)
    assert venv.replaced_actors == 1
    assert rollouts[0].end_reason == "env_error" and rollouts[0].reward == 0.0 and not rollouts[0].success
    assert rollouts[0].turns == 1
    assert all(r.success and r.end_reason == "success" for r in rollouts[1:])  # the other slot, and the new actor

    # The replacement plays the same tasks as the lost actor would have.
    again = collect(venv, OraclePolicy(venv), seeds=[3], group_size=2)
    assert [r.success for r in again] == [True, True] and again[0].task_id == again[1].task_id
    venv.close()


@pytest.mark.slow
def test_a_lost_actor_before_a_reset_is_replaced_and_the_reset_retried(joined):
    venv = RayVectorEnv([CountdownEnv] * 2, address="auto", envs_per_actor=1, timeout=120)
    kill(venv.actors[1])
    _, infos = venv.reset(seed=[7, 7])
    assert infos["task_id"][0] == infos["task_id"][1] and venv.replaced_actors == 1
    kill(venv.actors[0])
    with pytest.raises(TextGymError, match="died and was replaced"):
        venv.call("oracle_action")
    venv.close()


@pytest.mark.slow
def test_a_token_env_lost_with_its_actor_is_a_record_without_loss_tokens(joined):
    from textgym.algos.grpo import GRPOConfig, pack
    from textgym.tokenizer import tiny_tokenizer
    from textgym.wrappers import TokenObservation

    tokenizer = tiny_tokenizer()
    venv = RayVectorEnv([lambda: TokenObservation(CountdownEnv(), tokenizer)] * 2, address="auto", timeout=120)
    rollouts = collect(venv, KillingOracle(venv, at=1), seeds=[3, 4], group_size=2)
    lost = [r for r in rollouts if r.end_reason == "env_error"]
    assert len(lost) == 1 and lost[0].token_ids is not None and lost[0].loss_mask.sum() == 0
    batch = pack(rollouts, GRPOConfig(group_size=2, micro_batch_size=2), pad_id=0)
    assert batch.env_errors == 1 and np.all(batch.loss_mask[rollouts.index(lost[0])] == 0)
    venv.close()


def test_no_cluster_at_the_address_is_one_clear_error(monkeypatch):
    from tests.wrappers.ray_cluster import free_port

    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")
    with pytest.raises(TextGymError, match="cannot reach the Ray cluster"):
        RayVectorEnv([CountdownEnv], address="auto")


@pytest.mark.slow
def test_textgym_train_plays_its_envs_on_the_cluster(cluster, tmp_path):
    import os
    import subprocess

    from textgym.algos.train.report import read_metrics

    address, home = cluster
    env = dict(os.environ, RAY_ADDRESS=address, HOME=home, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    out = tmp_path / "run"
    argv = [
        "train",
        "--env",
        "textgym/Sudoku-v0",
        "--env-kwargs",
        '{"size": 4, "max_turns": 2}',
        "--vectorization-mode",
        "ray",
        "--sft-steps",
        "0",
        "--output-dir",
        str(out),
        "--steps",
        "2",
        "--prompts-per-step",
        "2",
        "--group-size",
        "4",
        "--num-envs",
        "4",
        "--eval-episodes",
        "4",
        "--eval-every",
        "2",
        "--max-new-tokens",
        "3",
        "--max-length",
        "64",
        "--log-rollouts-every",
        "1",
        "--no-progress",
        "--no-plot",
    ]
    done = subprocess.run([sys.executable, "-m", "textgym.cli", *argv], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Connecting to existing Ray cluster" in done.stderr
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [0, 1, 2]
    assert len((out / "rollouts" / "step_000002.jsonl").read_text().splitlines()) == 8
