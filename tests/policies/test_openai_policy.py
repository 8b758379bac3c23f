"""OpenAIPolicy against a scripted OpenAI-compatible server on loopback (see fake_openai.py)."""

import gymnasium as gym
import numpy as np
import pytest

from tests.policies.fake_openai import serve, stop
from tests.policies.toy import ENV_ID, CountdownEnv
from textgym.error import EndpointError
from textgym.messages import thaw
from textgym.policies import OpenAIPolicy
from textgym.rollout import collect

pytest.importorskip("openai")


@pytest.fixture
def server():
    srv = serve()
    yield srv
    stop(srv)


def episode_start(seed=0):
    env = CountdownEnv()
    obs, info = env.reset(seed=seed)
    return env, obs, info


def test_text_reply_with_logprobs_and_the_conversation_sent_as_is(server):
    policy = OpenAIPolicy(server.url, "text", logprobs=True, temperature=0.5, max_tokens=64)
    env, obs, info = episode_start()
    out = policy.act([obs], [info])
    assert out.actions == ["<answer>7</answer>"]
    assert out.logprobs[0].dtype == np.float32 and np.allclose(out.logprobs[0], [-0.25, -0.5, -0.75])
    request = server.requests[0]
    assert request["messages"] == thaw(obs)
    assert request["temperature"] == 0.5 and request["max_tokens"] == 64 and request["logprobs"] is True
    assert request["tools"] == info["tools"]
    policy.close()


def test_native_tool_calls_become_actions_the_env_runs(server):
    policy = OpenAIPolicy(server.url, "tool")
    env, obs, info = episode_start(seed=3)
    out = policy.act([obs], [info])
    action = out.actions[0]
    assert action["role"] == "assistant" and action["tool_calls"][0]["function"]["name"] == "check"
    assert out.logprobs is None
    obs, reward, terminated, truncated, step_info = env.step(action)
    assert step_info["error"] is None and obs[-1]["role"] == "tool" and obs[-1]["name"] == "check"
    # Step infos carry no tools: the policy keeps sending the ones from this slot's reset.
    policy.act([obs], [step_info])
    assert server.requests[-1]["tools"] == info["tools"]
    assert server.requests[-1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "check"
    policy.close()


def test_a_reply_cut_by_max_tokens_ends_the_episode_as_length(server):
    """finish_reason "length" is the endpoint's word for a cut turn: the record says ``length``,
    as TokenObservation says for sampled ids without a stop token; a stopped reply stays ``failure``."""
    for model, reason in (("long", "length"), ("text", "failure")):
        policy = OpenAIPolicy(server.url, model, max_tokens=3)
        out = policy.act(*[[x] for x in episode_start()[1:]])
        assert out.cut == [model == "long"]
        venv = gym.make_vec(ENV_ID, num_envs=2)
        records = collect(venv, policy, seeds=[0, 1])  # secrets 18 and 10: both answers are wrong
        assert [(r.terminated, r.success, r.end_reason) for r in records] == [(True, False, reason)] * 2
        venv.close()
        policy.close()


def test_requests_run_concurrently_up_to_the_limit(server):
    policy = OpenAIPolicy(server.url, "sleepy", concurrency=4)
    _, obs, info = episode_start()
    out = policy.act([obs] * 8, [info] * 8)
    assert len(out.actions) == 8 and len(server.requests) == 8
    assert server.max_in_flight == 4
    policy.close()


def test_timeout_raises_a_clear_error(server):
    policy = OpenAIPolicy(server.url, "slow", timeout=0.3, max_retries=0)
    _, obs, info = episode_start()
    with pytest.raises(EndpointError, match=r"no reply within 0.3 s after 0 retries"):
        policy.act([obs], [info])
    policy.close()


def test_server_errors_are_retried(server):
    policy = OpenAIPolicy(server.url, "flaky", max_retries=2)
    _, obs, info = episode_start()
    assert policy.act([obs], [info]).actions == ["<answer>7</answer>"]
    assert len(server.requests) == 3  # two 500s, then the reply
    policy.close()


def test_server_errors_beyond_the_retries_raise(server):
    policy = OpenAIPolicy(server.url, "flaky", max_retries=1)
    _, obs, info = episode_start()
    with pytest.raises(EndpointError, match="HTTP 500 after 1 retries"):
        policy.act([obs], [info])
    assert len(server.requests) == 2
    policy.close()


def test_connection_refused_is_a_clear_error():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "any", max_retries=0, timeout=2)
    _, obs, info = episode_start()
    with pytest.raises(EndpointError, match="cannot connect"):
        policy.act([obs], [info])
    policy.close()


def test_rejects_token_observations_and_bad_arguments(server):
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIPolicy(server.url, "text", concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        OpenAIPolicy(server.url, "text", timeout=0)
    policy = OpenAIPolicy(server.url, "text")
    with pytest.raises(TypeError, match="TokenObservation"):
        policy.act([np.arange(4, dtype=np.int32)])
    policy.close()
