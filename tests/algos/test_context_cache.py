"""Keys and values kept across an episode's turns change no sample: both samplers against themselves without reuse.

Episodes are played as a token env plays them: each turn's prompt is the previous prompt, the
sampled ids and some env tokens. Groups share their first prompt, episodes end at different
turns, rows stop at different steps (EOS ids), so every path of the cache is used: a group's
shared prefill, a row continuing its own entry, entries freed when their episode ends, and rows
of new and continuing episodes in one call.
"""

from __future__ import annotations

import numpy as np
import pytest

from textgym.algos.models import tiny
from textgym.algos.rollouts.context_cache import BLOCK, ContextCache

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
EOS = tuple(range(0, 256, 9))  # ~1 in 9 draws ends a row: rows stop at different steps
TURNS = [1, 3, 2, 4, 2, 1, 3, 3]  # turns of each episode; groups of 2 share a task (episodes 0-1, 2-3, ...)
GROUP = 2


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny.create(tmp_path_factory.mktemp("tiny"), seed=0, size=SMALL)


def load(backend: str, model_dir, **kwargs):
    if backend == "jax":
        pytest.importorskip("jax")
        from textgym.algos.jax import load_model
    else:
        pytest.importorskip("torch")
        from textgym.algos.torch import load_model
    return load_model(model_dir, **kwargs)


def play(policy, *, waves: int = 1) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Every episode's ``(ids, logprobs)`` per turn; the live ones share each call, ended ones are released."""
    rng = np.random.default_rng(7)
    tasks = [rng.integers(1, 256, n).astype(np.int32) for n in (23, 41, 18, 60)]
    replies = rng.integers(1, 256, (len(TURNS), max(TURNS), 12)).astype(np.int32)
    out: list[list] = [[] for _ in TURNS]
    for wave in range(waves):
        contexts = [tasks[k // GROUP] for k in range(len(TURNS))]
        for turn in range(max(TURNS)):
            live = [k for k in range(len(TURNS)) if turn < TURNS[k]]
            ids, lps = policy.generate([contexts[k] for k in live], 10, temperature=1.0, seed=100 * wave + turn, eos_ids=EOS)
            for k, i, lp in zip(live, ids, lps):
                out[k].append((i, lp))
                contexts[k] = np.concatenate([contexts[k], i, replies[k, turn, : 3 + turn + k % 3]])
                if turn + 1 == TURNS[k]:
                    policy.release([contexts[k]])
    return out


def assert_same(got, want) -> None:
    for episode_got, episode_want in zip(got, want, strict=True):
        for (ids, lps), (want_ids, want_lps) in zip(episode_got, episode_want, strict=True):
            np.testing.assert_array_equal(ids, want_ids)
            np.testing.assert_allclose(lps, want_lps, atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])  # jax: ~23 s of compiling
def test_reuse_samples_what_a_full_prefill_samples(model_dir, backend):
    policy = load(backend, model_dir)
    got = play(policy, waves=2)
    assert_same(got, play(load(backend, model_dir, context_cache_mb=0), waves=2))
    contexts = policy.contexts
    assert contexts.reused_tokens > contexts.prefilled_tokens > 0  # later turns read most of their prompt
    assert len(contexts) == 0 and contexts.nbytes == 0  # every ended episode's entry was freed


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_small_cap_evicts_and_changes_nothing(model_dir, backend):
    policy = load(backend, model_dir, context_cache_mb=0.0005)  # 524 bytes: about one short context
    got = play(policy)
    assert policy.contexts.nbytes <= policy.contexts.max_bytes
    assert_same(got, play(load(backend, model_dir, context_cache_mb=0)))


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_new_weights_never_read_old_keys(model_dir, backend):
    """A learner's update between two turns: the next turn must sample as a fresh model would."""
    policy = load(backend, model_dir)
    prompt = np.arange(1, 40, dtype=np.int32)
    ids, _ = policy.generate([prompt], 6, temperature=1.0, seed=0, eos_ids=())
    assert len(policy.contexts) == 1
    scale_weights(policy, backend)
    reference = load(backend, model_dir, context_cache_mb=0)
    scale_weights(reference, backend)
    context = np.concatenate([prompt, ids[0], [5, 6, 7]])
    got = policy.generate([context], 6, temperature=1.0, seed=1, eos_ids=())
    want = reference.generate([context], 6, temperature=1.0, seed=1, eos_ids=())
    np.testing.assert_array_equal(got[0][0], want[0][0])
    np.testing.assert_allclose(got[1][0], want[1][0], atol=1e-5, rtol=0)
    assert policy.contexts.reused_tokens == 0


def scale_weights(policy, backend: str) -> None:
    if backend == "jax":
        import jax

        policy.params = jax.tree.map(lambda p: p * 1.25, policy.params)  # what a learner's update does: a new tree
    else:
        import torch

        with torch.no_grad():
            for p in policy.model.parameters():
                p.mul_(1.25)  # in place, as an optimiser step


def test_lookup_finds_the_longest_shared_prefix_and_release_frees_an_ended_episode():
    cache = ContextCache(1 << 20)
    a = np.arange(3 * BLOCK, dtype=np.int32)
    b = np.concatenate([a[: 2 * BLOCK], np.full(BLOCK, 999, np.int32)])
    cache.add(a, "kv of a", 100)
    cache.add(b, "kv of b", 100)
    cache.add(a.copy(), "again", 100)  # the same context twice is stored once
    assert len(cache) == 2 and cache.nbytes == 200
    hit = cache.lookup(np.concatenate([a, [7, 8]]))
    assert hit.entry.kv == "kv of a" and hit.length == len(a) and hit.extends
    hit = cache.lookup(np.concatenate([a[: 2 * BLOCK + 3], [5] * 40]))
    assert hit.length == 2 * BLOCK + 3 and not hit.extends  # part of another context's keys
    assert cache.lookup(a).length == len(a) - 1  # the last token always runs: its logits sample
    assert cache.lookup(np.arange(1, 90, dtype=np.int32)).entry is None
    cache.release(np.concatenate([b, [1, 2, 3]]))
    assert len(cache) == 1 and cache.lookup(b).entry.kv == "kv of a"
    cache.sync("weights 2")
    assert len(cache) == 0


def test_the_cap_drops_the_least_recently_used():
    cache = ContextCache(250)
    contexts = [np.full(BLOCK + i, i, np.int32) for i in range(3)]
    cache.add(contexts[0], 0, 100)
    cache.add(contexts[1], 1, 100)
    cache.lookup(contexts[0])  # used: now the most recent
    cache.add(contexts[2], 2, 100)
    assert len(cache) == 2 and cache.lookup(contexts[1]).entry is None and cache.lookup(contexts[0]).entry.kv == 0
    cache.add(np.arange(2 * BLOCK, dtype=np.int32), "too big", 251)
    assert len(cache) == 2


# JAX's compilations make its case the slowest test of the default suite (25 CPU-seconds measured).
@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_collect_with_reuse_records_the_same_rollouts(model_dir, backend):
    """Token envs through collect: two waves, groups, episodes of 1-3 turns, idle slots in the last wave."""
    import gymnasium as gym

    from tests.policies.toy import CountdownEnv
    from textgym.algos.models import load_tokenizer
    from textgym.policies import ModelPolicy
    from textgym.rollout import collect
    from textgym.wrappers import TokenObservation

    tokenizer, template = load_tokenizer(model_dir), tiny.compact_chat_template()

    def rollouts(policy):
        venv = gym.vector.SyncVectorEnv(
            [(lambda t=t: TokenObservation(CountdownEnv(max_turns=t), tokenizer, chat_template=template)) for t in (1, 3, 2, 3)]
        )
        try:
            return collect(venv, ModelPolicy(policy, max_new_tokens=8, seed=3), seeds=[0, 1, 2], group_size=2)
        finally:
            venv.close()

    policy = load(backend, model_dir)
    got, want = rollouts(policy), rollouts(load(backend, model_dir, context_cache_mb=0))
    assert sorted({r.turns for r in got}) == [1, 2, 3]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
    assert policy.contexts.reused_tokens > 0
    assert len(policy.contexts) == 0  # collect's end freed every episode's keys and values


def test_finished_rows_and_unneeded_padding_leave_the_torch_decode_batch_and_change_nothing(model_dir, monkeypatch):
    """The torch sampler's decode steps drop the rows that ended and the left padding columns no live
    row needs; the samples and every stored context are those of decoding the whole batch to the end."""
    from textgym.algos.torch import sampler

    kept: list[tuple[int, int]] = []
    keep = sampler._SlotLayer.keep

    def counted(layer, rows, first):
        kept.append((len(rows), first))
        keep(layer, rows, first)

    monkeypatch.setattr(sampler._SlotLayer, "keep", counted)
    compacted = load("torch", model_dir)
    got = play(compacted, waves=2)
    assert kept and any(first > 0 for _, first in kept)  # rows left, and so did padding columns
    monkeypatch.setattr(sampler, "_RETIRE_AT", 0)  # never: every row decodes to the call's end
    kept.clear()
    whole = load("torch", model_dir)
    assert_same(got, play(whole, waves=2))
    assert not kept
    assert compacted.contexts.reused_tokens == whole.contexts.reused_tokens > 0
