"""The configs of ``textgym train`` and ``textgym sft``: one flat, frozen dataclass each.

The GRPO objective's knobs live in :class:`~textgym.algos.grpo.GRPOConfig` (shared by both
backends); these configs add what a run needs around it: the env, the backend, the model, how
many rollouts, evaluation, checkpoints. ``backend`` is the only field that picks a framework, and
nothing else changes with it.

Every default lives on a field, with its documentation (:func:`textgym.algos.config.fields.option`).
A preset (:mod:`textgym.algos.config.presets`) is a whole ``TrainConfig`` for an env and a model; the
command line starts from it and puts the flags it was given on top. ``None`` in a field means
what the field's doc says (no limit, the framework's default, a value derived from other fields
by :meth:`TrainConfig.resolved`), never "look it up elsewhere".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from textgym.algos.config import checks
from textgym.algos.config.checks import default_output_dir, warm_start
from textgym.algos.config.fields import check_choices, documented, option
from textgym.algos.config.grpo import LORA_TARGETS, GRPOConfig
from textgym.algos.config.mesh import parse_mesh
from textgym.algos.config.optimizer import OptimizerConfig
from textgym.algos.grpo.seeds import EVAL_SEED_OFFSET, SFT_SEED_OFFSET

__all__ = ["EVAL_SEED_OFFSET", "SFT_SEED_OFFSET", "SFTConfig", "TrainConfig", "default_output_dir"]

Backend = Literal["jax", "torch"]
Template = Literal["auto", "model", "compact"]
TemplateBreak = Literal["raise", "new_sample"]
VectorMode = Literal["sync", "async", "ray"]
DataParallel = Literal["ddp", "fsdp"]
BranchSource = Literal["rollouts", "demonstrator"]
TinyVocab = Literal["bytes", "bpe"]
SFTTurns = Literal["all", "rewarded"]
Tracker = Literal["tensorboard", "wandb", "trackio"]

# Fields that SFTConfig and TrainConfig share mean the same thing: one text each.
_BACKEND = "``jax`` or ``torch``; nothing else depends on it."
_MODEL = (
    "A Hugging Face model directory, a ``.gguf`` file (converted once, cached) or a preset: ``tiny`` "
    "(created in ``output_dir``), ``smollm2-135m`` (see :mod:`textgym.algos.models`)."
)
_PRESET = (
    "The named preset (:data:`textgym.algos.config.presets.PRESETS`, e.g. ``sudoku-tiny``) this configuration "
    "starts from; on the command line, the flags given go on top of it, and without ``--preset`` a "
    "run starts from the preset made for its env and model, if there is one."
)
_TEMPLATE = (
    "``model``: the checkpoint's template; ``compact``: the tiny template without its system turn and "
    "tool list (a tiny model learns the task from examples, not from instructions; prompts are ~15x "
    "shorter); ``auto``: compact for ``tiny``, the model's own for others."
)
_TEMPLATE_BREAK = (
    "Where the chat template rewrites earlier turns (Qwen3's dropping of past ``<think>`` blocks): "
    "``raise`` a TemplateError, or ``new_sample``: split the episode there into training samples "
    "that share its advantage (see ``TokenObservation`` and docs/tokens.md)."
)
_REPORT_TO = (
    "Experiment trackers that receive the run, comma-separated: ``tensorboard`` (event files in "
    "``<output_dir>/tensorboard``), ``wandb`` (an offline run in ``<output_dir>/wandb`` unless ``WANDB_MODE`` "
    "says otherwise), ``trackio`` (its local store); empty: none. Every number of the metrics stream goes to "
    "each under its key and step, the resolved config is the tracker run's hyperparameters, ``summary.json`` "
    "its summary, and a resumed run continues the same tracker run (see :mod:`textgym.algos.train.trackers`)."
)
_THREADS = "Intra-op CPU threads of the backend (``None``: the framework's default); see :func:`textgym.algos.backends.load_backend`."
_ORACLE_KWARGS = (
    "Keyword arguments of the env's ``oracle_action`` (``None``: none); Sudoku's ``{\"place\": 16}`` "
    "demonstrates ``place`` calls, not the grid. For a mixture, an object keyed by env id gives each env its own."
)
_TINY_LAYERS = (
    "Decoder layers of the ``tiny`` model (``None``: its default of 2); deeper ones find cells on a board "
    "that two layers do not (docs/benchmarks.md). Only for ``model=tiny``."
)
_TINY_VOCAB = (
    "The ``tiny`` model's tokenizer: ``bytes`` (one token a byte) or ``bpe`` (a byte-level BPE of ~1k tokens "
    "trained offline on the envs' own text, :mod:`textgym.tiny_bpe`: a Sudoku ``place`` call is 30 tokens, not 67, "
    "every digit still a token of its own). Only for ``model=tiny``."
)
_DATA_PARALLEL = (
    "How several torch processes (``--nproc N``, ``torchrun``) split the learner: ``ddp``, each holds every "
    "weight, gradient and AdamW moment; ``fsdp``, FSDP2 (``fully_shard`` on each decoder layer, then the root) "
    "shards them over the processes, while each keeps the whole weights it samples with. The same steps and "
    "checkpoints either way; ignored with one process. The JAX backend shards with ``mesh`` instead (docs/scaling.md)."
)
_SFT_TURNS = (
    "Which demonstration turns the warm start trains on: ``all``; ``rewarded``, only the turns whose env step paid a "
    "positive reward (``Rollout.turn_rewards``), the others kept as context. With a dense reward (Sudoku's "
    '``reward="dense"``) a noisy demonstrator\'s rejected moves then show the model a rejection and its recovery '
    "without teaching it to guess."
)
_TRAINABLE = "Train only the top this many decoder layers (see ``GRPOConfig.trainable_layers``; ``None``: every parameter)."


@documented
@dataclass(frozen=True, kw_only=True)
class SFTConfig:
    """Supervised warm start on the env's oracle demonstrations (``textgym sft``)."""

    env: str | tuple[str, ...] = option(
        doc="Registered env id, e.g. ``textgym/Sudoku-v0``, or several (a mixture's warm start: the demonstrations "
        "are shared equally among them).",
        **warm_start("env"),
    )
    env_kwargs: dict[str, Any] = option(
        factory=dict,
        doc="Keyword arguments of ``gym.make``; for a mixture, an object keyed by env id gives each env its own.",
        **warm_start("sft_kwargs"),
    )
    backend: Backend = option("torch", _BACKEND, **warm_start("backend"))
    model: str = option("tiny", _MODEL, **warm_start("model"))
    tiny_layers: int | None = option(None, _TINY_LAYERS, **warm_start("tiny_layers"))
    tiny_vocab: TinyVocab = option("bytes", _TINY_VOCAB, **warm_start("tiny_vocab"))
    preset: str | None = option(None, _PRESET, **warm_start("preset"))
    output_dir: str | None = option(
        None,
        "Where the run writes ``final/`` (a HF directory) and ``sft_metrics.jsonl`` (``None``: ``runs/<env>-sft-<backend>``).",
        **warm_start("sft_output_dir"),
    )
    steps: int = option(100, "Optimiser steps.", **warm_start("sft_steps"))
    demos: int = option(
        256,
        "Oracle episodes collected (task seeds from the run's seed tree, in ``[SFT_SEED_OFFSET, "
        "EVAL_SEED_OFFSET)``), cycled through in a seeded order.",
        **warm_start("sft_demos"),
    )
    oracle_kwargs: dict[str, Any] | None = option(None, _ORACLE_KWARGS, **warm_start("sft_oracle_kwargs"))
    turns: SFTTurns = option("all", _SFT_TURNS, **warm_start("sft_turns"))
    batch_size: int = option(16, "Demonstration episodes per step.", **warm_start("sft_batch_size"))
    lr: float = option(1e-4, "Peak AdamW learning rate (linear warm-up over the first 10% of steps, cosine decay).", **warm_start("sft_lr"))
    max_length: int = option(1024, "Longest packed sequence in tokens.", **warm_start("grpo.max_length"))
    micro_batch_size: int = option(16, "Sequences per forward/backward (gradients accumulate).", **warm_start("grpo.micro_batch_size"))
    trainable_layers: int | None = option(None, _TRAINABLE, **warm_start("grpo.trainable_layers"))
    lora_rank: int = option(
        0,
        "Train LoRA adapters of this rank instead of the weights (see ``GRPOConfig.lora_rank``; 0: none); "
        "``final/`` then holds the adapter and ``final/merged/`` the merged model a warm start continues from.",
        **warm_start("grpo.lora_rank"),
    )
    lora_alpha: float = option(16.0, "LoRA's scale numerator (see ``GRPOConfig.lora_alpha``).", **warm_start("grpo.lora_alpha"))
    lora_targets: tuple[str, ...] = option(
        LORA_TARGETS, "Modules that get an adapter (see ``GRPOConfig.lora_targets``).", **warm_start("grpo.lora_targets")
    )
    chat_template: Template = option("auto", _TEMPLATE, **warm_start("chat_template"))
    on_template_break: TemplateBreak = option("raise", _TEMPLATE_BREAK, **warm_start("on_template_break"))
    seed: int = option(0, "Seeds the tiny model's init, the demonstrations' tasks and their order.", **warm_start("seed"))
    num_envs: int = option(32, "Vector env width when collecting demonstrations.")
    threads: int | None = option(None, _THREADS, **warm_start("threads"))
    data_parallel: DataParallel = option("ddp", _DATA_PARALLEL, **warm_start("data_parallel"))
    progress: bool = option(True, "Show rich progress bars.", **warm_start("progress"))
    report_to: tuple[Tracker, ...] = option((), _REPORT_TO, **warm_start("report_to"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        object.__setattr__(self, "report_to", checks.trackers(self.report_to))
        if not isinstance(self.env, str):
            object.__setattr__(self, "env", checks.distinct_ids(self.env))
        check_choices(self)
        checks.check_positive(self, "batch_size", "max_length", "micro_batch_size", "num_envs", "threads", "tiny_layers")
        checks.check_tiny_layers(self)
        checks.check_data_parallel(self)
        if self.steps < 0 or self.demos < 0:  # 0: a warm start that `textgym train` skips
            raise ValueError(f"steps and demos must be >= 0, got {self.steps}, {self.demos}")

    @property
    def envs(self) -> tuple[str, ...]:
        """The warm start's env ids (one, or a mixture's)."""
        return (self.env,) if isinstance(self.env, str) else self.env

    def kwargs_of(self, env: str) -> dict[str, Any]:
        """``gym.make`` keyword arguments of ``env`` (``env_kwargs``, or its entry when keyed by env id)."""
        return checks.env_entry(self.env_kwargs, self.envs, env) or {}

    def oracle_kwargs_of(self, env: str) -> dict[str, Any] | None:
        """``oracle_action`` keyword arguments of ``env`` (``oracle_kwargs``, or its entry when keyed by env id)."""
        return checks.env_entry(self.oracle_kwargs, self.envs, env)

    @property
    def optimizer(self) -> OptimizerConfig:
        """The warm start's own AdamW: ``lr`` warmed up over the first 10% of ``steps``, then a cosine
        decay to 0 at the last one, gradients clipped at norm 1."""
        return OptimizerConfig(
            lr=self.lr, lr_schedule="cosine", warmup_steps=max(1, self.steps // 10), total_steps=self.steps, max_grad_norm=1.0
        )

    def resolved(self) -> SFTConfig:
        """The config a run uses: ``output_dir`` filled in. A resolved config resolves to itself
        (see :meth:`TrainConfig.resolved`)."""
        if self.output_dir is not None:
            return self
        return dataclasses.replace(self, output_dir=default_output_dir(self.env, f"sft-{self.backend}"))


@documented
@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A GRPO run (``textgym train``), optionally preceded by an SFT warm start.

    Seeds are a pure function of ``seed`` and their place in the run
    (:class:`~textgym.algos.grpo.SeedTree`: GRPO step ``s`` plays task seeds
    ``tree.task_seeds(s, prompts_per_step)`` and episode ``i`` of its group ``g`` draws with
    ``tree.episode_key("train_sampler", s, g, i)``), so a resumed run continues exactly as if it
    had never stopped, and the same episodes are sampled however the run is split. Held-out evaluation tasks are the same for every ``seed`` (seeds from
    ``EVAL_SEED_OFFSET``), so that runs compare on one test set.
    """

    env: str | tuple[str, ...] = option(
        doc="Registered env id, or several (a tuple; ``--env A --env B``) to train on a mixture: each step's "
        "prompts are shared among them by ``env_weights``, and the metrics, the curve and ``summary.json`` "
        "report each env as well as the whole."
    )
    env_weights: tuple[float, ...] | None = option(
        None, "Shares of each step's prompts per env of a mixture (``--env-weights 0.5,0.5``; normalised; ``None``: equal)."
    )
    env_kwargs: dict[str, Any] = option(
        factory=dict, doc="Keyword arguments of ``gym.make``; for a mixture, an object keyed by env id gives each env its own."
    )
    env_url: tuple[str, ...] | None = option(
        None,
        "Play the env on these ``textgym serve`` servers instead of in-process (``--env-url URL``, repeatable): "
        "sessions spread over them, and a server lost mid-run ends its episodes as ``env_error`` (not trained on) "
        "while the others go on. A warm start's demonstrations still run in-process (the oracle reads the env's "
        "hidden state).",
    )
    backend: Backend = option("torch", _BACKEND)
    model: str = option("tiny", _MODEL)
    tiny_layers: int | None = option(None, _TINY_LAYERS)
    tiny_vocab: TinyVocab = option("bytes", _TINY_VOCAB)
    preset: str | None = option(None, _PRESET)
    output_dir: str | None = option(
        None, "Run directory: checkpoints, ``metrics.jsonl``, ``curve.png``, ``summary.json`` (``None``: ``runs/<env>-<backend>``)."
    )
    steps: int = option(100, "GRPO steps.")
    prompts_per_step: int = option(8, "Task seeds per step; each is played ``grpo.group_size`` times.")
    num_envs: int = option(64, "Vector env width (at most the episodes per step).")
    vectorization_mode: VectorMode = option(
        "sync",
        "``sync`` or ``async`` sub-envs, or ``ray``: sub-envs in Ray actors of the cluster that ``RAY_ADDRESS`` "
        "names (``auto``: the one started on this machine with ``ray start``), else of a local Ray.",
    )
    chat_template: Template = option("auto", _TEMPLATE)
    on_template_break: TemplateBreak = option("raise", _TEMPLATE_BREAK)
    eval_episodes: int = option(128, "Held-out episodes (task seeds from ``EVAL_SEED_OFFSET``, whatever ``seed`` is) per evaluation.")
    eval_every: int = option(10, "Evaluate every this many steps (and before the first and after the last).")
    eval_temperature: float = option(0.0, "Sampling temperature of evaluation; 0 is greedy.")
    save_every: int = option(10, "Checkpoint every this many steps (and at the end, and on Ctrl-C).")
    log_rollouts_every: int = option(
        10,
        "Write the rollouts of every this many steps (and of the first) to ``rollouts/step_XXXXXX.jsonl`` "
        "for ``textgym view``, with each episode's ``step`` and ``advantage``; 0 writes none. The default "
        "keeps the README run's view under 20 MB.",
    )
    stop_after: int | None = option(
        None,
        "Stop (with a checkpoint) after this many steps of *this invocation*; the next invocation "
        "resumes. For time-sliced jobs and for testing resumption.",
    )
    resume: bool = option(True, "Continue from ``output_dir``'s latest checkpoint when there is one.")
    sft_steps: int = option(0, "Optimiser steps of the SFT warm start before GRPO (0: none).")
    sft_env_kwargs: dict[str, Any] | None = option(
        None,
        "``gym.make`` keyword arguments of the warm start's demonstrations (``None``: ``env_kwargs``), "
        "e.g. easier tasks than GRPO's for a curriculum.",
    )
    sft_demos: int = option(256, "Oracle demonstrations for the warm start.")
    sft_lr: float | None = option(None, "Learning rate of the warm start (``None``: ``10 * grpo.lr``).")
    sft_batch_size: int = option(16, "Demonstration episodes per step of the warm start.")
    sft_oracle_kwargs: dict[str, Any] | None = option(None, _ORACLE_KWARGS)
    sft_turns: SFTTurns = option("all", _SFT_TURNS)
    branch_groups: int = option(
        0,
        "Branched groups trained per step besides the ``prompts_per_step`` ordinary ones (0: none): each plays "
        "``grpo.group_size`` continuations of one saved env state, so a turn is scored by what it did "
        "(:mod:`textgym.algos.rollouts.branches`, docs/trainers.md).",
    )
    branch_turns: int = option(
        1, "Policy turns a branch plays from its start state (0: to the end); it is scored by the env's rewards over them."
    )
    branch_source: BranchSource = option(
        "rollouts",
        "Where branches start: ``rollouts``, states saved before the turns of the step's own episodes (groups "
        "whose episodes disagreed first); ``demonstrator``, the env's oracle episodes (with ``sft_oracle_kwargs``) "
        "at a random turn, a start-state curriculum.",
    )
    seed: int = option(
        0, "Root of the run's seed tree: the tiny init, training tasks, demonstrations and sampling (copied into ``grpo.seed``)."
    )
    threads: int | None = option(None, _THREADS)
    mesh: str | None = option(
        None,
        'The JAX learner\'s device mesh, ``"data=N,fsdp=M"`` (``None``: one device); see '
        ":func:`textgym.algos.jax.make_mesh`. The torch backend scales with ``torchrun``.",
    )
    data_parallel: DataParallel = option("ddp", _DATA_PARALLEL)
    plot: bool = option(True, "Write ``curve.png`` (needs matplotlib).")
    progress: bool = option(True, "Show rich progress bars.")
    report_to: tuple[Tracker, ...] = option((), _REPORT_TO)
    grpo: GRPOConfig = option(factory=GRPOConfig, doc="The GRPO objective and optimiser (see :class:`~textgym.algos.grpo.GRPOConfig`).")

    def __post_init__(self) -> None:
        if not isinstance(self.env, str):
            object.__setattr__(self, "env", checks.distinct_ids(self.env))
        object.__setattr__(self, "report_to", checks.trackers(self.report_to))
        if self.env_weights is not None:
            object.__setattr__(self, "env_weights", tuple(float(w) for w in self.env_weights))
            finite = all(math.isfinite(w) and w >= 0 for w in self.env_weights)  # NaN passes both < 0 and <= 0
            if len(self.env_weights) != len(self.envs) or not finite or sum(self.env_weights) <= 0:
                raise ValueError(f"expected {len(self.envs)} finite env weights >= 0 with a positive sum, got {list(self.env_weights)}")
        if self.env_url is not None:
            object.__setattr__(self, "env_url", tuple(self.env_url))
            if not self.env_url or len(self.envs) > 1:
                raise ValueError("env_url serves one env: give one --env and one or more --env-url")
        check_choices(self)
        checks.check_positive(
            self,
            "steps",
            "prompts_per_step",
            "num_envs",
            "eval_episodes",
            "eval_every",
            "save_every",
            "stop_after",
            "threads",
            "sft_batch_size",
            "tiny_layers",
        )
        checks.check_tiny_layers(self)
        checks.check_data_parallel(self)
        if min(self.log_rollouts_every, self.sft_steps, self.branch_groups, self.branch_turns) < 0:
            raise ValueError(
                "log_rollouts_every, sft_steps, branch_groups and branch_turns must be >= 0, got "
                f"{self.log_rollouts_every}, {self.sft_steps}, {self.branch_groups}, {self.branch_turns}"
            )
        if self.branch_groups and self.env_url:
            raise ValueError("branch_groups needs in-process envs (a branch restores a saved state): drop --env-url or --branch-groups")
        if self.mesh is not None:
            parse_mesh(self.mesh)
            if self.backend != "jax":
                raise ValueError(f"mesh is for the JAX backend, got backend={self.backend!r} (torch scales with torchrun)")

    @property
    def envs(self) -> tuple[str, ...]:
        """The run's env ids (one, or a mixture's)."""
        return (self.env,) if isinstance(self.env, str) else self.env

    @property
    def sft_kwargs(self) -> dict[str, Any]:
        """``gym.make`` keyword arguments of the warm start's demonstrations (keyed by env id for a mixture)."""
        if self.sft_env_kwargs is not None:
            return dict(self.sft_env_kwargs)
        if len(self.envs) > 1:
            return {env: self.kwargs_of(env) for env in self.envs}
        return self.kwargs_of(self.env)

    @property
    def sft_output_dir(self) -> str:
        """Where the warm start writes (``<output_dir>/sft``)."""
        return f"{self.resolved().output_dir}/sft"

    def kwargs_of(self, env: str) -> dict[str, Any]:
        """``gym.make`` keyword arguments of ``env`` (``env_kwargs``, or its entry when keyed by env id)."""
        return checks.env_entry(self.env_kwargs, self.envs, env) or {}

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def resolved(self) -> TrainConfig:
        """The config a run uses: ``output_dir`` and ``sft_lr`` filled in, ``grpo.seed`` set to ``seed``
        and ``grpo.total_steps`` (the schedule's horizon) to ``steps * grpo.num_iterations`` when unset.

        The one resolution of a run's settings. The command line's config comes resolved from
        :func:`textgym.algos.config.presets.train_config`; ``train()`` resolves one built in Python
        when it starts. A resolved config resolves to itself (the same object), so nothing that
        reads a setting afterwards has to ask whether it was filled in.
        """
        grpo = self.grpo
        if None not in (self.output_dir, self.sft_lr, grpo.total_steps) and grpo.seed == self.seed:
            return self
        total = grpo.total_steps if grpo.total_steps is not None else self.steps * grpo.num_iterations
        return dataclasses.replace(
            self,
            output_dir=self.output_dir if self.output_dir is not None else default_output_dir(self.env, self.backend),
            sft_lr=self.sft_lr if self.sft_lr is not None else 10 * grpo.lr,
            grpo=dataclasses.replace(grpo, seed=self.seed, total_steps=total),
        )

    def sft_config(self) -> SFTConfig:
        """The warm start's config: each :class:`SFTConfig` field from the ``TrainConfig`` attribute its
        ``warm_start`` metadata names in the resolved config (the others keep their defaults)."""
        source = self.resolved()
        values = {
            f.name: checks.attribute(source, f.metadata["warm_start"]) for f in dataclasses.fields(SFTConfig) if "warm_start" in f.metadata
        }
        return SFTConfig(**values)
