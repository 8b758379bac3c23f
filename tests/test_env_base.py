"""The TextEnv turn loop, on a small number-guessing env defined here."""

import json
import pickle
import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from textgym import messages as M
from textgym.env import Outcome, TextEnv, tool_messages
from textgym.error import InvalidAction, InvalidTask, ResetNeeded
from textgym.tasks import Task, task_id
from textgym.tools import Toolset


class GuessEnv(TextEnv):
    """Guess a number in [1, 99] with a `check` tool, then answer it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._tools = Toolset([self.check])
        self.checks = 0

    def check(self, number: int) -> str:
        """Compare a guess with the secret.

        Args:
            number: The guess.
        """
        self.checks += 1
        secret = self.task.answer
        return "higher" if number < secret else "lower" if number > secret else "correct"

    @property
    def tools(self):
        return self._tools

    def generate_task(self, rng):
        n = int(rng.integers(1, 100))
        return Task(task_id("guess", n), {"n": n}, n)

    def task_from_dict(self, d):
        if not 1 <= int(d["n"]) <= 99:
            raise InvalidTask("n must be in [1, 99]")
        return Task(task_id("guess", d["n"]), dict(d), int(d["n"]))

    def begin(self, task):
        self.checks = 0
        return [M.system("You play a guessing game."), M.user("Guess my number in [1, 99].")]

    def respond(self, turn):
        if turn.answer is not None:
            ok = turn.answer == str(self.task.answer)
            return Outcome([M.user("Right!" if ok else "Wrong.")], float(ok), True, ok, {"expected": self.task.answer})
        messages, errors = tool_messages(self._tools, turn)
        if not messages:
            return Outcome([M.user("Call check or answer.")], error="no tool call or answer")
        return Outcome(messages, error="; ".join(errors) or None)

    def oracle_action(self):
        return f"<answer>{self.task.answer}</answer>"


gym.register("test/Guess-v0", entry_point=GuessEnv)


def check(n):
    return f'<tool_call>{{"name": "check", "arguments": {{"number": {n}}}}}</tool_call>'


def test_passes_gymnasium_env_checker():
    check_env(GuessEnv(render_mode="ansi"), skip_render_check=False)


def test_reset_info_and_observation_contract():
    env = GuessEnv()
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["task_id"] == env.task.id and info["turn"] == 0 and info["error"] is None
    assert info["tools"][0]["function"]["name"] == "check"
    assert obs[-1]["role"] == "user"


def test_same_seed_same_task_in_another_process():
    env = GuessEnv()
    ids = [env.reset(seed=s)[1]["task_id"] for s in range(5)]
    code = (
        "import sys; sys.path.insert(0, 'tests');"
        "from test_env_base import GuessEnv;"
        "e = GuessEnv(); print([e.reset(seed=s)[1]['task_id'] for s in range(5)])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(ids)
    assert len(set(ids)) > 1


def test_tool_turns_append_messages_and_answer_ends_with_verification():
    env = GuessEnv()
    obs, _ = env.reset(options={"task": {"n": 40}})
    obs, reward, terminated, truncated, info = env.step(check(10) + check(40))
    assert [m["content"] for m in obs[-2:]] == ['"higher"', '"correct"']
    assert [m["tool_call_id"] for m in obs[-2:]] == ["call_1_0", "call_1_1"]
    assert (reward, terminated, truncated, info["error"]) == (0.0, False, False, None)
    obs, reward, terminated, truncated, info = env.step("<answer>40</answer>")
    assert (reward, terminated, info["success"], info["verification"]) == (1.0, True, True, {"expected": 40})
    with pytest.raises(ResetNeeded, match="episode has ended"):
        env.step("again")


def test_malformed_turn_is_feedback_and_changes_nothing():
    env = GuessEnv()
    env.reset(options={"task": {"n": 40}})
    obs, reward, terminated, truncated, info = env.step(check(10) + '<tool_call>{"name": }</tool_call>')
    assert env.checks == 0, "a turn with a broken call must not run its valid calls"
    assert "invalid JSON" in info["error"] and obs[-1]["role"] == "user"
    assert info["turn"] == 1 and not terminated
    obs, *_, info = env.step(check('"ten"'))
    assert "must be an integer" in info["error"] and obs[-1]["role"] == "tool"


def test_truncation_at_max_turns_reports_a_verdict():
    env = GuessEnv(max_turns=2)
    env.reset(seed=0)
    assert env.step("hmm")[3] is False
    _, reward, terminated, truncated, info = env.step("hmm")
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)
    assert "truncated" in info["verification"]["reason"]


def test_huge_action_is_cut_and_reported():
    env = GuessEnv(max_action_chars=100)
    env.reset(seed=0)
    obs, *_, info = env.step("x" * 10_000)
    assert len(obs[-2]["content"]) == 100 and "10000 characters" in info["error"]


def test_a_step_that_raises_leaves_turn_and_conversation_as_they_were():
    class Flaky(GuessEnv):
        def respond(self, turn):
            if turn.text == "boom":
                raise RuntimeError("verifier bug")
            return super().respond(turn)

    env = Flaky()
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            env.step("boom")
        with pytest.raises(InvalidAction):
            env.step(b"bytes")
    assert env.turn == 0 and env.conversation == obs
    _, _, _, _, info = env.step(check(50))
    assert info["turn"] == 1 and env.conversation[-1]["tool_call_id"] == "call_1_0"


def test_dict_actions_obey_max_action_chars():
    env = GuessEnv(max_action_chars=500)
    env.reset(seed=0)
    calls = [{"type": "function", "function": {"name": "check", "arguments": {"number": 5}}}] * 1000
    obs, *_, info = env.step({"role": "assistant", "content": "", "tool_calls": calls})
    assert "over 500 characters" in info["error"] and env.checks == 0
    assert len(json.dumps(M.thaw(obs[2:]))) < 20 * 500  # not 1,000 tool results


def test_api_misuse_raises():
    env = GuessEnv()
    with pytest.raises(ResetNeeded, match="reset"):
        env.step("x")
    env.reset(seed=0)
    with pytest.raises(InvalidAction, match="got int"):
        env.step(5)
    with pytest.raises(InvalidTask, match=r"\[1, 99\]"):
        env.reset(options={"task": {"n": 500}})
    with pytest.raises(InvalidTask, match="needs a dataset"):
        env.reset(options={"task_index": 0})
    with pytest.raises(ResetNeeded):
        env.step("a failed reset leaves nothing to step")


@pytest.mark.parametrize("env_id", ["textgym/Sudoku-v0", "textgym/Workplace-v0", "textgym/Code-v0"])
def test_a_failed_reset_leaves_nothing_of_the_last_episode(env_id):
    env = gym.make(env_id, render_mode="ansi")
    never_reset = env.unwrapped.render()
    env.reset(seed=0)
    env.step(env.unwrapped.oracle_action())
    with pytest.raises(InvalidTask):
        env.reset(options={"task": {"no such field": 1}})
    assert env.render() == never_reset and env.unwrapped.conversation == ()
    with pytest.raises(ResetNeeded, match="reset"):
        env.unwrapped.oracle_action()
    env.reset(seed=1)  # and the env is usable again
    assert env.render()


def test_dataset_tasks_by_index_and_by_seed(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps({"n": n}) for n in (5, 6, 7)) + "\n")
    env = GuessEnv(tasks=str(path))
    assert env.reset(options={"task_index": 2})[0] and env.task.answer == 7
    drawn = {env.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert drawn == {t.id for t in env.dataset}
    with pytest.raises(InvalidTask, match=r"task_index must be in \[0, 3\)"):
        env.reset(options={"task_index": 3})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"n": 5}\nnot json\n')
    with pytest.raises(InvalidTask, match="bad.jsonl:2"):
        GuessEnv(tasks=str(bad))


def test_pinned_task_record_round_trips():
    env = GuessEnv()
    env.reset(seed=1)
    record = json.loads(env.task.to_json())
    env.reset(options={"task": Task.from_dict(record)})
    assert env.task == Task.from_json(env.task.to_json())


def test_render_ansi_and_observations_share_messages():
    env = GuessEnv(render_mode="ansi")
    obs0, _ = env.reset(seed=1)
    obs1, *_ = env.step(check(50))
    assert obs1[0] is obs0[0], "earlier messages are shared, not copied"
    text = env.render()
    assert "[assistant]" in text and "[tool check]" in text


def test_observations_pickle_for_async_workers():
    env = GuessEnv()
    obs, _ = env.reset(seed=1)
    obs, *_ = env.step({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "check", "arguments": {"number": 3}}}]})
    assert pickle.loads(pickle.dumps(obs)) == obs
    assert M.thaw(obs)[-2]["tool_calls"][0]["function"]["name"] == "check"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_grouped_seeds(mode):
    venv = gym.make_vec("test/Guess-v0", num_envs=4, vectorization_mode=mode)
    try:
        obs, info = venv.reset(seed=[7, 7, 9, 9])
        assert info["task_id"][0] == info["task_id"][1] != info["task_id"][2] == info["task_id"][3]
        actions = list(venv.call("oracle_action"))
        obs, reward, terminated, truncated, info = venv.step(actions)
        assert reward.tolist() == [1.0] * 4 and terminated.all()
        assert isinstance(obs, tuple) and obs[0][-1]["content"] == "Right!"
    finally:
        venv.close()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=300) | st.binary(max_size=50).map(lambda b: b.decode("latin-1")), min_size=1, max_size=6))
def test_fuzzed_actions_never_raise_and_keep_the_conversation_valid(actions):
    env = GuessEnv(max_turns=4)
    obs, _ = env.reset(seed=0)
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs) and obs[-1]["role"] != "assistant"
        if terminated or truncated:
            break


def test_every_episode_ends_with_one_end_reason():
    env = GuessEnv(max_turns=2, max_action_chars=100)
    env.reset(seed=0)
    *_, info = env.step(check(50))
    assert "end_reason" not in info  # only the last step says why the episode ended
    assert env.step(env.unwrapped.oracle_action())[4]["end_reason"] == "success"
    env.reset(seed=0)
    assert env.step("<answer>0</answer>")[4]["end_reason"] == "failure"
    env.reset(seed=0)
    env.step("hmm")
    assert env.step("hmm")[4]["end_reason"] == "max_turns"
    env.reset(seed=0)
    env.step("hmm")
    assert env.step("x" * 1000)[4]["end_reason"] == "length"  # the turn that ended it was cut


@pytest.mark.parametrize("content", ["", "short"])
def test_a_dict_action_cut_in_its_tool_calls_ends_as_length_like_a_cut_text(content):
    """Content under the budget, tool calls past it: the calls are dropped, the turn was cut."""
    env = GuessEnv(max_turns=1, max_action_chars=100)
    env.reset(seed=0)
    calls = [{"type": "function", "function": {"name": "check", "arguments": {"number": 50, "pad": "p" * 200}}}]
    obs, _, _, truncated, info = env.step({"role": "assistant", "content": content, "tool_calls": calls})
    assert truncated and "dropped" in info["error"] and info["end_reason"] == "length"
    assert env.checks == 0 and "tool_calls" not in obs[-2]


class BrokenGuessEnv(GuessEnv):
    """Its checker fails like a database that went away."""

    def respond(self, turn):
        if turn.answer is not None:
            return Outcome([M.user("The checker failed.")], 0.0, True, False, {"reason": "checker down"}, end_reason="env_error")
        return super().respond(turn)


def test_an_env_failure_is_env_error_whatever_else_holds():
    env = BrokenGuessEnv(max_turns=1)
    env.reset(seed=0)
    *_, info = env.step(env.oracle_action())
    assert info["end_reason"] == "env_error" and info["success"] is False
