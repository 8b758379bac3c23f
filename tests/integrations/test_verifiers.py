"""textgym envs as verifiers environments, run by verifiers' own ``env.evaluate`` against an
OpenAI-compatible server on loopback that answers as each env's oracle."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading

import gymnasium as gym
import pytest

pytest.importorskip("verifiers")
import verifiers as vf

import textgym  # noqa: F401  (registers the ids)
from textgym.integrations.verifiers import TextGymEnv, load_environment, to_verifiers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "policies"))
from fake_openai import FakeChatServer, Handler, stop

MALFORMED = {"role": "assistant", "content": "", "tool_calls": [{"id": "bad_0", "type": "function", "function": {"name": "place", "arguments": "{not json"}}]}  # fmt: skip


class ScriptHandler(Handler):
    """Answers with the server's ``script(request_messages)``: an OpenAI assistant message."""

    def reply(self, server, body):
        message = server.script(body["messages"])
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self.send(
            200,
            {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice], "usage": usage},
        )


@pytest.fixture
def server():
    srv = FakeChatServer()
    srv.RequestHandlerClass = ScriptHandler
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    stop(srv)


def oracle_script(env_id, seeds, **env_kwargs):
    """The oracle's turns per episode, keyed by the task's user message; the turn is the number of
    assistant messages the request holds. Tool calls become native ones with ids of their own."""
    env = gym.make(env_id, **env_kwargs).unwrapped
    by_task = {}
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        turns, done = [], False
        while not done:
            action = env.oracle_action()
            if isinstance(action, str):
                turns.append({"role": "assistant", "content": action})
            else:
                calls = [{**c, "id": f"oracle_{len(turns)}_{i}"} for i, c in enumerate(action["tool_calls"])]
                turns.append({"role": "assistant", "content": action.get("content") or None, "tool_calls": calls})
            _, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        by_task[obs[1]["content"]] = turns

    def script(messages):
        task = next(m["content"] for m in messages if m["role"] == "user")
        return by_task[task][sum(m["role"] == "assistant" for m in messages)]

    return script


def evaluate(env, server, **kwargs):
    client = vf.ClientConfig(api_base_url=server.url, max_retries=0)
    return asyncio.run(env.evaluate(client=client, model="oracle", max_concurrent=2, on_progress=lambda *a, **k: None, **kwargs))


@pytest.mark.parametrize(
    "env_id,kwargs",
    [("textgym/Workplace-v0", {}), ("textgym/Sudoku-v0", {"size": 4}), ("textgym/Code-v0", {"max_attempts": 2})],
)
def test_a_model_replying_as_the_oracle_scores_one(env_id, kwargs, server):
    server.script = oracle_script(env_id, [3, 4], **kwargs)
    env = load_environment(env_id, num_tasks=2, seed=3, **kwargs)
    assert isinstance(env, vf.MultiTurnEnv)
    outputs = evaluate(env, server, state_columns=["end_reason"])
    assert [o["reward"] for o in outputs["outputs"]] == [1.0, 1.0]
    for o in outputs["outputs"]:
        assert o["metrics"]["success"] == 1.0 and o["metrics"]["end_reason_success"] == 1.0
        assert o["metrics"]["end_reason_failure"] == 0.0 and o["end_reason"] == "success"
        assert o["stop_condition"] == "has_final_env_response"
    if env_id == "textgym/Workplace-v0":  # the oracle's calls went through as native tool calls, with the env's tools
        tool_messages = [m for o in outputs["outputs"] for m in o["completion"] if m["role"] == "tool"]
        assert tool_messages and all(m["tool_call_id"].startswith("oracle_") for m in tool_messages)
        assert len(server.requests[0]["tools"]) == 27
        assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {t.name for t in env.tool_defs}


def test_a_malformed_tool_call_comes_back_as_the_envs_feedback(server):
    server.script = lambda messages: MALFORMED
    env = load_environment("textgym/Sudoku-v0", num_tasks=1, seed=5, size=4, max_turns=2)
    [output] = evaluate(env, server, state_columns=["end_reason"])["outputs"]
    assert output["reward"] == 0.0 and output["end_reason"] == "max_turns" and output["metrics"]["end_reason_max_turns"] == 1.0

    local = gym.make("textgym/Sudoku-v0", size=4, max_turns=2)
    obs, _ = local.reset(seed=5)
    after, _, _, _, info = local.step(MALFORMED)
    assert info["error"]
    [feedback] = [m["content"] for m in after[len(obs) + 1 :]]
    # the in-process feedback, word for word, as the answer to the call (what chat APIs require)
    assert output["completion"][1] == {"role": "tool", "content": feedback, "tool_call_id": "bad_0"}
    second_request = server.requests[1]["messages"]
    assert second_request[-1] == {"role": "tool", "content": feedback, "tool_call_id": "bad_0"}


def test_every_native_call_is_answered_before_other_messages():
    env = gym.make("textgym/Sudoku-v0", size=4)
    obs, _ = env.reset(seed=5)
    good = {"id": "x1", "type": "function", "function": {"name": "place", "arguments": json.dumps({"row": 1, "col": 1, "digit": 4})}}
    bad = {"id": "x2", "type": "function", "function": {"name": "place", "arguments": "{bad"}}
    after, _, _, _, info = env.step({"role": "assistant", "content": "", "tool_calls": [good, bad]})
    reply = to_verifiers(after[len(obs) + 1 :], ["x1", "x2"], info["error"])
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in reply[:2]] == [("tool", "x1"), ("tool", "x2")]
    assert reply[1].content == info["error"]
    assert all(m.role != "tool" for m in reply[2:])


def test_the_same_seeds_give_the_same_tasks():
    first = load_environment("textgym/Workplace-v0", num_tasks=3, seed=7)
    again = load_environment("textgym/Workplace-v0", num_tasks=3, seed=7)
    other = load_environment("textgym/Workplace-v0", num_tasks=3, seed=8)
    rows = first.get_eval_dataset().to_list()
    assert rows == again.get_eval_dataset().to_list()
    assert [r["info"]["seed"] for r in rows] == [7, 8, 9]
    assert [r["info"]["task_id"] for r in rows][1:] == [r["info"]["task_id"] for r in other.get_eval_dataset().to_list()][:2]
    env = gym.make("textgym/Workplace-v0")
    obs, info = env.reset(seed=8)
    assert rows[1]["prompt"] == [dict(m) for m in obs] and rows[1]["info"]["task_id"] == info["task_id"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_tasks"):
        load_environment("textgym/Sudoku-v0", num_tasks=0)
    assert issubclass(TextGymEnv, vf.MultiTurnEnv)
