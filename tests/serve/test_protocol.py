"""The frame codec without sockets: JSON-safety and the fast encoder agree."""

import math

import numpy as np
import orjson
import pytest

from textgym.messages import freeze
from textgym.serve.protocol import ErrorCode, ProtocolError, encode, env_action, json_safe, parse_frame, reset_arguments


@pytest.mark.parametrize(
    "value",
    [
        freeze({"role": "tool", "content": "x", "nested": [{"a": (1, 2)}]}),
        {"nan": float("nan"), "inf": -math.inf, "ok": 1.5},
        {"set": {3, 1, 2}, "frozen": frozenset({"b", "a"})},
        {"np": np.float32(0.5), "arr": np.arange(3), "int": np.int64(7), "bool": np.bool_(True)},
        {1: "int key", "o": object},
    ],
)
def test_encode_is_json_safe_as_json(value):
    assert orjson.loads(encode(value)) == json_safe(value)
    assert orjson.loads(orjson.dumps(json_safe(value))) == json_safe(value)  # plain JSON data


def test_actions_and_resets():
    assert env_action({"content": "hi", "metadata": {}}) == "hi"
    calls = [{"id": "c1", "type": "function", "function": {"name": "place", "arguments": "{}"}}]
    assert env_action({"content": None, "tool_calls": calls}) == {"role": "assistant", "content": "", "tool_calls": calls}
    assert reset_arguments(None) == ({"seed": None, "options": None}, None)
    assert reset_arguments({"seed": 3, "episode_id": "e", "options": {"k": 1}}) == ({"seed": 3, "options": {"k": 1}}, "e")
    for bad in ({"seed": True}, {"seed": 1.0}, {"episode_id": 3}):
        with pytest.raises(ProtocolError) as exc:
            reset_arguments(bad)
        assert exc.value.code is ErrorCode.VALIDATION_ERROR
    with pytest.raises(ProtocolError) as exc:
        parse_frame(b"x" * 11, max_bytes=10)
    assert exc.value.code is ErrorCode.VALIDATION_ERROR
