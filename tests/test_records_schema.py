"""The rollout JSON Schema in the package: valid itself, and true of what ``eval`` writes and of old records."""

from __future__ import annotations

import json

import pytest

from textgym.cli import main
from textgym.rollout import Rollout, rollout_schema

jsonschema = pytest.importorskip("jsonschema")


def validator():
    schema = rollout_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0", "textgym/Code-v0"])
def test_records_written_by_eval_match_the_schema(env_id, tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["eval", env_id, "--policy", "oracle", "--policy", "random", "--episodes", "2", "--num-envs", "2", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    check = validator()
    for r in records:
        assert not [e.message for e in check.iter_errors(r)]
        assert r["end_reason"] in ("success", "failure", "max_turns", "length", "env_error") and r["verifications"]
        assert len(r["turn_rewards"]) == len(r["turn_state_keys"]) == r["turns"]


def test_token_records_match_the_schema():
    import gymnasium as gym

    from textgym.policies import OraclePolicy
    from textgym.rollout import collect
    from textgym.tokenizer import tiny_tokenizer
    from textgym.wrappers import TokenObservation

    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=2, size=4, wrappers=[lambda e: TokenObservation(e, tiny_tokenizer())])
    records = [r.to_dict() for r in collect(venv, OraclePolicy(venv), seeds=[0, 1])]
    venv.close()
    check = validator()
    assert all(r["token_ids"] and not list(check.iter_errors(r)) for r in records)


def test_an_old_record_is_valid_and_loads():
    old = {
        "env_id": "textgym/Sudoku-v0",
        "task_id": "sudoku-1",
        "seed": 0,
        "messages": [{"role": "user", "content": "x"}],
        "reward": 0.0,
        "success": False,
        "turns": 1,
        "terminated": False,
        "truncated": True,
    }
    assert not list(validator().iter_errors(old))
    assert Rollout.from_dict(old).end_reason is None


def test_the_schema_rejects_what_is_not_a_record():
    check = validator()
    assert list(check.iter_errors({"env_id": "x"}))  # required fields missing
    bad = {
        "env_id": "e",
        "task_id": "t",
        "seed": 0,
        "messages": [],
        "reward": 0.0,
        "success": False,
        "turns": 1,
        "terminated": True,
        "truncated": False,
        "end_reason": "timeout",
    }
    assert any("end_reason" in e.json_path for e in check.iter_errors(bad))
    for field, value in (("turn_rewards", ["1"]), ("turn_state_keys", [3]), ("turn_advantages", None)):
        assert any(field in e.json_path for e in check.iter_errors(dict(bad, end_reason=None, **{field: value}))), field
