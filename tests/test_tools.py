"""Tools from typed functions: schemas, validation, coercion and error results."""

import json
from typing import Annotated, Literal

import pytest

from textgym.error import ToolError
from textgym.tools import Encoded, Param, Tool, Toolset, to_json


def send(
    recipient: Annotated[str, Param(format="email")],
    subject: str,
    priority: Literal["low", "high"] = "low",
    copies: int = 1,
    when: Annotated[str | None, Param(format="date")] = None,
    tags: list[str] | None = None,
) -> dict:
    """Send an email.

    A longer explanation that is not the summary.

    Args:
        recipient: Address to send to.
        subject: Subject line,
            continued on a second line.
    """
    return {"to": recipient, "subject": subject, "priority": priority, "copies": copies, "when": when, "tags": tags}


def test_schema_from_hints_and_docstring():
    schema = Tool(send).schema
    fn = schema["function"]
    assert fn["name"] == "send" and fn["description"] == "Send an email."
    props = fn["parameters"]["properties"]
    assert props["recipient"] == {"type": "string", "format": "email", "description": "Address to send to."}
    assert props["subject"]["description"] == "Subject line, continued on a second line."
    assert props["priority"] == {"type": "string", "enum": ["low", "high"]}
    assert props["copies"] == {"type": "integer"}
    assert props["when"] == {"type": "string", "nullable": True, "format": "date"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "nullable": True}
    assert fn["parameters"]["required"] == ["recipient", "subject"]


def test_coercion_of_numeric_and_boolean_strings():
    def f(n: int, x: float, b: bool) -> list:
        """F."""
        return [n, x, b]

    assert Toolset([f]).call("f", {"n": "7", "x": "2.5", "b": "true"}).content == "[7, 2.5, true]"
    assert Toolset([f]).call("f", {"n": 7.0, "x": 1, "b": False}).content == "[7, 1.0, false]"


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ({"subject": "s"}, "missing required argument 'recipient'"),
        ({"recipient": "not-an-email", "subject": "s"}, "must be an email address"),
        ({"recipient": "a@b.co", "subject": 3}, "'subject' must be a string, got integer"),
        ({"recipient": "a@b.co", "subject": "s", "priority": "urgent"}, "must be one of ['low', 'high']"),
        ({"recipient": "a@b.co", "subject": "s", "copies": "many"}, "'copies' must be an integer"),
        ({"recipient": "a@b.co", "subject": "s", "copies": True}, "got boolean"),
        ({"recipient": "a@b.co", "subject": "s", "when": "tomorrow"}, "YYYY-MM-DD"),
        ({"recipient": "a@b.co", "subject": "s", "bcc": "x"}, "unknown argument 'bcc'"),
        ({"recipient": "a@b.co", "subject": "s", "tags": ["a", 1]}, "'tags[1]' must be a string"),
    ],
)
def test_bad_arguments_become_error_results(arguments, fragment):
    result = Toolset([send]).call("send", arguments)
    assert fragment in result.error
    assert json.loads(result.content) == {"error": result.error}


def test_any_syntactically_valid_address_is_accepted():
    result = Toolset([send]).call("send", {"recipient": "someone@outside.example", "subject": "hi"})
    assert result.error is None and json.loads(result.content)["to"] == "someone@outside.example"


@pytest.mark.timeout(10)  # the quadratic pattern took ~5 s on the 32 KiB input, ~80 s on this one
@pytest.mark.parametrize(
    "recipient",
    ["a@" + "b." * 65536 + "@", "a@" + "." * 131072 + "@", "a" * 131072 + " @b.c", "a@b" + ".b" * 65536 + " x"],
    ids=["dots-then-at", "only-dots", "long-local-part", "space-at-the-end"],
)
def test_email_validation_is_linear_on_hostile_addresses(recipient):
    assert "must be an email address" in Toolset([send]).call("send", {"recipient": recipient, "subject": "s"}).error


def test_email_pattern_accepts_exactly_the_addresses_it_always_did():
    import itertools
    import re

    from textgym.tools import EMAIL_PATTERN

    original = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")  # the quadratic form, the specification
    for n in range(1, 8):
        for chars in itertools.product("ab.@ ", repeat=n):
            text = "".join(chars)
            assert bool(EMAIL_PATTERN.match(text)) == bool(original.match(text)), text


def test_unknown_tool_and_tool_errors():
    def boom(x: int) -> None:
        """Fail."""
        raise ToolError(f"no item {x}")

    tools = Toolset([boom])
    assert "unknown tool 'nope'; available tools: boom" in tools.call("nope", {}).error
    assert tools.call("boom", {"x": 4}).error == "no item 4"


def test_bound_methods_and_name_rules():
    class Board:
        def place(self, row: int) -> int:
            """Place."""
            return row

    assert Toolset([Board().place]).call("place", {"row": 2}).content == "2"
    with pytest.raises(ValueError, match="tool name"):
        Tool(send, name="bad name!")
    with pytest.raises(ValueError, match="duplicate"):
        Toolset([send, send])


def test_missing_hint_is_a_definition_error():
    def f(x):
        """F."""

    with pytest.raises(TypeError, match="needs a type hint"):
        Tool(f)


def test_an_encoded_result_is_sent_as_its_own_text():
    def page(n: int) -> dict:
        """A result whose JSON text was made beforehand (here spaced unlike the encoder's)."""
        return Encoded({"rows": [n]}, '{"rows":[%d]}' % n)

    result = Toolset([page]).call("page", {"n": 7})
    assert result.content == '{"rows":[7]}' != to_json({"rows": [7]}) and result.error is None
    assert page(7) == {"rows": [7]}  # a dict to every other caller
