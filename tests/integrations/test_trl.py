"""TRL's environment_factory contract, with TRL's own GRPOTrainer."""

from __future__ import annotations

import inspect

import gymnasium as gym
import pytest

from textgym.integrations.trl import environment_factory, reward_func, seed_dataset
from textgym.messages import thaw

pytest.importorskip("datasets")


def test_one_method_per_tool_with_typed_schema():
    transformers = pytest.importorskip("transformers")
    cls = environment_factory("textgym/Workplace-v0")
    env = cls()
    local = gym.make("textgym/Workplace-v0")
    _, info = local.reset(seed=0)
    public = {n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public - {"reset", "get_reward"} == {t["function"]["name"] for t in info["tools"]}
    for tool in info["tools"]:
        schema = transformers.utils.get_json_schema(getattr(env, tool["function"]["name"]))["function"]
        ours = tool["function"]["parameters"]
        assert schema["name"] == tool["function"]["name"] and schema["description"] == tool["function"]["description"]
        assert set(schema["parameters"]["properties"]) == set(ours["properties"])
        assert set(schema["parameters"].get("required", [])) == set(ours["required"])
        for name, prop in ours["properties"].items():
            assert schema["parameters"]["properties"][name]["type"] == prop["type"]


def test_reset_tools_reward_and_final_text_match_the_env():
    rows = seed_dataset("textgym/Sudoku-v0", [3, 3, 4])
    assert rows[0] == rows[1] and rows[0]["seed"] == 3
    cls = environment_factory("textgym/Sudoku-v0")
    a, b = cls(), cls()
    assert a.reset(**rows[0]) is None  # the row's prompt already is the opening
    b.reset(**rows[1])
    assert a._conversation == b._conversation  # one seed, one initial state for the group
    assert cls().reset(prompt=[{"role": "user", "content": ""}], seed=3).startswith(rows[0]["prompt"][0]["content"])

    local = gym.make("textgym/Sudoku-v0")
    local.reset(seed=3)
    reply = a.place(row=0, col=0, digit=1)  # a tool error comes back as text
    assert "error" in reply and a.get_reward() == 0.0
    oracle = local.unwrapped.oracle_action()
    assert reward_func([[{"role": "assistant", "content": oracle}]], environments=[a]) == [None]
    assert a.get_reward() == 1.0 and a._done
    assert reward_func(["<answer>1</answer>"], environments=[b]) == [None] and b.get_reward() == 0.0
    with pytest.raises(ValueError, match="environment_factory"):
        reward_func(["x"])


@pytest.mark.slow
def test_grpo_trainer_trains_tiny_through_the_factory(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from textgym.algos.models import tiny

    path = tiny.create(tmp_path / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.response_template = qwen3_template  # the tiny template writes tool calls as Qwen's do
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    base = environment_factory("textgym/Sudoku-v0", size=4, max_turns=3)
    made = []

    class Recorded(base):
        def __init__(self):
            super().__init__()
            made.append(self)

    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=12,
        max_steps=2,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        beta=0.0,
        max_tool_calling_iterations=2,
        seed=0,
        shuffle_dataset=False,
    )
    trainer = GRPOTrainer(
        model=model,
        args=config,
        processing_class=tokenizer,
        reward_funcs=reward_func,
        train_dataset=seed_dataset("textgym/Sudoku-v0", range(4), size=4),
        environment_factory=Recorded,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [entry for entry in trainer.state.log_history if any(k.startswith("rewards/Recorded") for k in entry)]
    assert len(logged) == 2
    played = [env for env in made if env._conversation]
    assert len(played) >= 4 and all(env._done for env in played)  # every rollout reached the env and ended
    openings = {}
    for env in played:  # group members (same seed) started from the same state
        openings.setdefault(env._env.unwrapped.task.id, set()).add(tuple(map(str, thaw(list(env._conversation[:2])))))
    assert all(len(v) == 1 for v in openings.values())
