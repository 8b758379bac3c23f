"""The shared assistant-turn parser: tool calls, answers, code, dict actions and bad input."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textgym.error import InvalidAction
from textgym.messages import thaw
from textgym.parsing import extract_code, parse_turn


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_text_with_several_tool_calls_in_order():
    turn = parse_turn("first " + call("a", x=1) + " then\n" + call("b", y="z"))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("a", {"x": 1}), ("b", {"y": "z"})]
    assert [c.id for c in turn.tool_calls] == ["call_0", "call_1"]
    assert turn.errors == ()
    assert turn.message == {"role": "assistant", "content": turn.text}


def test_closing_tag_inside_a_json_string_is_an_argument_not_the_end():
    turn = parse_turn(call("send", body="see </tool_call> here"))
    assert turn.errors == ()
    assert turn.tool_calls[0].arguments == {"body": "see </tool_call> here"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('<tool_call>{"name": "a", "arguments": {</tool_call>', "invalid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "missing tool 'name'"),
        ('<tool_call>{"name": "a", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "a"} trailing</tool_call>', "expected </tool_call>"),
        ("<tool_call>[1, 2]</tool_call>", "expected a JSON object"),
        ('<tool_call>{"name": "a", "arguments": "{bad"}</tool_call>', "not valid JSON"),
        ("stray </tool_call>", "without a matching"),
    ],
)
def test_malformed_tool_calls_give_clear_errors(text, fragment):
    turn = parse_turn(text)
    assert turn.tool_calls == ()
    assert fragment in turn.error


def test_arguments_as_json_string_and_valid_call_after_a_broken_one():
    turn = parse_turn("<tool_call>{oops}</tool_call>" + '<tool_call>{"name": "b", "arguments": "{\\"k\\": 2}"}</tool_call>')
    assert [c.arguments for c in turn.tool_calls] == [{"k": 2}]
    assert "tool call 1" in turn.error


def test_answer_takes_the_last_block_and_tolerates_a_missing_close():
    assert parse_turn("<answer>1</answer> no, <answer> 2 </answer>").answer == "2"
    assert parse_turn("think... <answer>\n12\n34").answer == "12\n34"
    assert parse_turn("no answer").answer is None


def test_code_prefers_the_last_python_block():
    text = "```python\na = 1\n```\n```text\nout\n```\n```py\nb = 2\n```"
    assert extract_code(text) == "b = 2\n"
    assert extract_code("```\nplain\n```") == "plain\n"
    assert extract_code("```python\nunclosed") == "unclosed"
    assert extract_code("none") is None


def test_openai_dict_with_tool_calls():
    action = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "abc", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            {"type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
        ],
    }
    turn = parse_turn(action, call_id_prefix="call_3")
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("abc", "f", {"x": 1}), ("call_3_1", "g", {"y": 2})]
    stored = turn.message["tool_calls"]
    assert json.loads(stored[1]["function"]["arguments"]) == {"y": 2}
    assert turn.message["content"] == ""


def test_openai_dict_without_tool_calls_parses_its_content():
    turn = parse_turn({"role": "assistant", "content": call("f", a=1)})
    assert turn.tool_calls[0].name == "f"


@pytest.mark.parametrize(
    "action", [{"role": "user", "content": "x"}, {"role": "assistant", "content": 3}, {"content": "", "tool_calls": "no"}]
)
def test_bad_dicts_are_errors_not_exceptions(action):
    assert parse_turn(action).errors


@pytest.mark.parametrize("action", [None, 3, b"bytes", ["list"]])
def test_non_text_actions_raise(action):
    with pytest.raises(InvalidAction, match="expected the assistant turn"):
        parse_turn(action)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda a, b: a + "<tool_call>" + b, st.text(), st.text()))
def test_parser_never_raises_on_any_text(text):
    turn = parse_turn(text)
    assert turn.message["content"] == text
    for c in turn.tool_calls:
        assert isinstance(c.arguments, dict)


def dict_action(*arguments, content=""):
    calls = [{"type": "function", "function": {"name": "f", "arguments": a}} for a in arguments]
    return {"role": "assistant", "content": content, "tool_calls": calls}


def test_max_chars_bounds_a_dict_action_like_text():
    small = dict_action({"x": 1}, '{"y": 2}')
    assert parse_turn(small, max_chars=1000).errors == ()
    many = parse_turn(dict_action(*[{"x": "a" * 50}] * 1000), max_chars=2000)
    assert "over 2000 characters" in many.errors[0] and "were dropped" in many.errors[0]
    kept = many.message["tool_calls"]
    assert 0 < len(kept) < 1000 and len(json.dumps(thaw(kept))) < 4000  # the message stays near the limit
    huge_string = parse_turn(dict_action("{" + '"k": 1, ' * 100_000 + '"z": 0}'), max_chars=1000)
    assert huge_string.tool_calls == () and "over 1000 characters" in huge_string.error
    long_content = parse_turn(dict_action({"x": 1}, content="c" * 5000), max_chars=1000)
    assert long_content.tool_calls == () and len(long_content.text) == 1000 and "5000 characters" in long_content.error


def test_text_counts_the_same_as_the_dict_that_says_it():
    text = call("f", x="a" * 50) * 10
    turn = parse_turn(text)
    as_dict = dict_action(*[{"x": "a" * 50}] * 10)
    assert parse_turn(as_dict, max_chars=len(text)).errors == ()
    assert parse_turn(as_dict, max_chars=len(text) - 1).errors
    assert turn.errors == ()


def test_decode_json_turns_every_decoder_failure_into_a_value_error():
    from textgym.parsing import decode_json

    for text, reason in [("[" * 30000, "nested too deeply"), ("1" + "0" * 5000, "too many digits"), ("{", "Expecting")]:
        with pytest.raises(ValueError, match=reason):
            decode_json(text)


def test_the_shortest_text_calls_past_the_limits_are_still_rejected():
    # Short calls skip the depth and int-size walk; the shortest calls that break a
    # limit are longer than that bound, so they are caught as before.
    from textgym.parsing import MAX_ARGUMENT_DEPTH

    deep = '<tool_call>{"name":"f","arguments":{"":' + "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH + "}}</tool_call>"
    assert "deeper than" in parse_turn(deep).error
    ok = deep.replace("[", "", 1).replace("]", "", 1)
    assert parse_turn(ok).errors == () and parse_turn(ok).tool_calls[0].name == "f"
    big = '<tool_call>{"name":"f","arguments":{"a":' + "9" * 4250 + "}}</tool_call>"
    assert "too many digits" in parse_turn(big).error


def test_without_tools_tags_are_text_and_dict_calls_an_error():
    text = "s = '<tool_call>'\n" + call("f", a=1) + " </tool_call>"
    turn = parse_turn(text, tools=False)
    assert turn.tool_calls == () and turn.errors == () and turn.text == text
    action = {"role": "assistant", "content": "hi", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}
    dict_turn = parse_turn(action, tools=False)
    assert "no tools" in dict_turn.error and [c.name for c in dict_turn.tool_calls] == ["f"]
    assert parse_turn({"role": "assistant", "content": text}, tools=False).errors == ()


def test_cut_says_whether_max_chars_cut_the_action():
    calls = [{"function": {"name": "f", "arguments": {"a": "x" * 50}}}]
    assert parse_turn("x" * 11, max_chars=10).cut and not parse_turn("x" * 10, max_chars=10).cut
    assert parse_turn(dict_action(*[{"a": "x" * 50}]), max_chars=30).cut  # the calls alone are over
    assert parse_turn({"role": "assistant", "content": "x" * 31, "tool_calls": calls}, max_chars=30).cut
    assert not parse_turn(dict_action({"a": 1}), max_chars=1000).cut
    assert not parse_turn("<tool_call>{oops}</tool_call>", max_chars=1000).cut  # an error, not a cut


def test_deep_nesting_is_refused_whatever_the_recursion_limit():
    # The decoder's own limit is the interpreter's recursion limit, which an imported library may
    # raise; the parser's bound must not move with it.
    import sys

    from textgym.parsing import MAX_JSON_DEPTH, decode_json, parse_turn

    limit = sys.getrecursionlimit()
    deep = '<tool_call>{"name": "place", "arguments": ' + '{"a": ' * 30_000 + "</tool_call>"
    sys.setrecursionlimit(100_000)
    try:
        turn = parse_turn(deep, call_id_prefix="c", max_chars=32_768, tools=True)
    finally:
        sys.setrecursionlimit(limit)
    assert any("nested too deeply" in e for e in turn.errors)
    with pytest.raises(ValueError, match="nested too deeply"):
        decode_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    assert decode_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    assert decode_json('["\\"' + "[" * 600 + '"]') == ['"' + "[" * 600]  # brackets in strings do not count
