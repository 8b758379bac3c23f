"""Immutable messages, the task record and the object spaces."""

import pickle

import numpy as np
import pytest

from textgym import messages as M
from textgym.spaces import AssistantTurn, Conversation, TokenSequence
from textgym.tasks import Task, task_id


def test_frozen_messages_are_read_only_hashable_and_equal_to_dicts():
    msg = M.assistant("hi", tool_calls=[{"id": "c", "function": {"name": "f", "arguments": "{}"}}])
    plain = {"role": "assistant", "content": "hi", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}
    assert M.thaw(msg) == plain and msg == M.freeze(plain)
    assert M.user("x") == {"role": "user", "content": "x"}
    assert isinstance(msg["tool_calls"], tuple)
    with pytest.raises(TypeError):
        msg["role"] = "user"
    with pytest.raises(AttributeError):
        msg.x = 1
    assert hash(msg) == hash(pickle.loads(pickle.dumps(msg)))
    assert M.thaw(msg)["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}


def test_message_factory_rejects_bad_roles_and_content():
    with pytest.raises(ValueError, match="role"):
        M.message("robot", "x")
    with pytest.raises(TypeError, match="content"):
        M.message("user", None)


def test_task_round_trip_and_stable_ids():
    task = Task("t-1", {"puzzle": "1..."}, answer=[1, 2], metadata={"difficulty": "easy"})
    assert Task.from_json(task.to_json()) == task
    assert "\n" not in task.to_json()
    assert task_id("x", 1, "a") == task_id("x", 1, "a") != task_id("x", 2, "a")


def test_spaces_contain_their_samples_and_compare_equal():
    for space in (Conversation(seed=0), AssistantTurn(seed=0), TokenSequence(100, seed=0)):
        for _ in range(20):
            assert space.contains(space.sample())
        assert space == type(space)(*([100] if isinstance(space, TokenSequence) else []))
    assert TokenSequence(10) != TokenSequence(11)
    assert not Conversation().contains(({"role": "robot", "content": "x"},))
    assert not TokenSequence(10).contains(np.array([10], dtype=np.int32))
    assert not TokenSequence(10).contains(np.array([1], dtype=np.int64))
