"""DDP and FSDP2 on CPU: two gloo ranks take the same steps as one process on the whole batch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from textgym.algos.grpo import GRPOConfig, pack
from textgym.algos.grpo.learner import OPTIMIZER_STATE, adam_tensors
from textgym.algos.models import tiny
from textgym.algos.torch import Learner, load_model
from textgym.rollout import Rollout

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
# 10 rows with micro-batches of 2: 5 micro-batches do not split evenly over 2 ranks, so the
# learner's row padding is exercised too.
CONFIG = dict(group_size=5, micro_batch_size=2, lr=1e-3, kl_beta=0.01, max_length=64)
STEPS = 2

WORKER = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from textgym.algos.grpo import GRPOConfig
    from textgym.algos.torch import Learner, load_model

    model_dir, batch_file, out_dir, data_parallel = sys.argv[1:5]
    dist.init_process_group("gloo")
    config, batch, steps = pickle.load(open(batch_file, "rb"))
    model = load_model(model_dir)
    learner = Learner(model, GRPOConfig(**config), data_parallel=data_parallel)
    metrics = [learner.train_step(batch) for _ in range(steps)]
    learner.save(out_dir)
    # The tied head stays its embedding's parameter, in the trained (sharded) model and in the sampler's.
    tied = [m.lm_head.weight is m.model.embed_tokens.weight for m in (learner.network, model.model)]
    # A learner restored from the checkpoint takes the next step exactly as the one that wrote it.
    resumed = Learner(load_model(model_dir), GRPOConfig(**config), data_parallel=data_parallel)
    resumed.restore(out_dir)
    same = learner.train_step(batch) == resumed.train_step(batch) and all(
        torch.equal(a, b) for a, b in zip(model.model.parameters(), resumed.model.model.parameters(), strict=True)
    )
    if dist.get_rank() == 0:
        pickle.dump((metrics, tied, learner.sharded, same), open(out_dir + "/metrics.pkl", "wb"))
    dist.destroy_process_group()
    """
)


def rollouts() -> list[Rollout]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(10):
        size = int(rng.integers(8, 30))
        mask = (np.arange(size) >= size // 2).astype(np.int8)
        out.append(
            Rollout(
                "e",
                "t",
                i // 5,
                [],
                float(i % 3 == 0),
                False,
                1,
                True,
                False,
                token_ids=rng.integers(0, 256, size).astype(np.int32),
                loss_mask=mask,
                logprobs=np.where(mask > 0, -5.5, 0.0).astype(np.float32),
                group=i // 5,
            )
        )
    return out


@pytest.mark.slow  # two torch processes start in ~30-40 s on 2 shared cores
@pytest.mark.parametrize(
    ("data_parallel", "extra"),
    [
        ("ddp", {}),
        ("fsdp", {}),
        ("fsdp", {"trainable_layers": 1}),  # FSDP units that mix frozen and trained parameters (the root's embedding and norm)
    ],
)
def test_two_gloo_ranks_equal_one_process(tmp_path: Path, data_parallel: str, extra: dict):
    import pickle

    model_dir = tiny.create(tmp_path / "tiny", size=SMALL)
    config = GRPOConfig(**CONFIG, **extra)
    batch = pack(rollouts(), config, pad_id=0)
    batch_file = tmp_path / "batch.pkl"
    batch_file.write_bytes(pickle.dumps((CONFIG | extra, batch, STEPS)))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(script),
        str(model_dir),
        str(batch_file),
        str(tmp_path / "ranks"),
        data_parallel,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    policy = load_model(model_dir)
    learner = Learner(policy, config)
    single = [learner.train_step(batch) for _ in range(STEPS)]
    ranks, tied, sharded, resumed_exactly = pickle.loads((tmp_path / "ranks" / "metrics.pkl").read_bytes())
    assert sharded == (data_parallel == "fsdp") and tied == [True, True] and resumed_exactly
    for step in range(STEPS):
        for name in ("loss/total", "loss/policy", "loss/kl", "stats/clip_frac", "stats/grad_norm"):
            assert ranks[step][name] == pytest.approx(single[step][name], abs=1e-5), (step, name)
    trained = load_model(tmp_path / "ranks")
    want = dict(policy.model.named_parameters())
    for name, value in trained.model.named_parameters():
        np.testing.assert_allclose(value.detach().numpy(), want[name].detach().numpy(), atol=1e-5, err_msg=name)
    # Rank 0 wrote AdamW's whole moments (gathered from the shards under FSDP), keyed by Hugging Face names.
    saved, moments = load_file(str(tmp_path / "ranks" / OPTIMIZER_STATE)), adam_tensors(learner._adam_state())
    assert saved.keys() == moments.keys()
    for name, value in moments.items():
        np.testing.assert_allclose(saved[name], value, rtol=1e-4, atol=1e-4 * np.abs(value).max(), err_msg=name)  # float noise
