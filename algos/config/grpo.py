"""The one GRPO configuration that both backends (JAX and torch) read.

Every knob of the objective lives here, so switching ``backend`` changes nothing else. Choices
between behaviours are ``Literal`` fields validated once, in ``__post_init__``; the loss and the
packer read them without re-checking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from textgym.algos.config.fields import check_choices, documented, option
from textgym.algos.config.optimizer import LRSchedule, OptimizerConfig

LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant"]
AdvantageScaling = Literal["group", "batch", "none"]
AdvantageLevel = Literal["episode", "turn", "rejection-sampling"]
TurnTokenCredit = Literal["turn", "prefix"]
ComputeDType = Literal["float32", "bfloat16"]
PolicyLoss = Literal["clip", "gspo", "cispo"]
RolloutCorrection = Literal["none", "tis", "mis"]
# The linear layers of the Llama/Qwen decoders: every one gets an adapter by default.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def check_dtype(name: str, value: str) -> None:
    """Raise ``ValueError`` unless ``value`` is a :data:`ComputeDType` (the policies' dtype arguments)."""
    if value not in get_args(ComputeDType):
        raise ValueError(f"{name} must be 'float32' or 'bfloat16', got {value!r}")


@documented
@dataclass(frozen=True, kw_only=True)
class GRPOConfig:
    """Group Relative Policy Optimisation, with the fixes the literature found since.

    The objective per policy token ``t`` of sequence ``i`` is the clipped surrogate of PPO with
    asymmetric clipping (DAPO's "clip-higher") plus a k3 KL penalty against a frozen reference::

        r = exp(logp - old_logp)
        pg = -min(r * A_i, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) * A_i)
        kl = exp(ref_logp - logp) - (ref_logp - logp) - 1          # k3, >= 0, unbiased
        loss = sum_{i,t} w_{i,t} * (pg + kl_beta * kl)

    where the weights ``w`` implement ``loss_aggregation`` with counts taken over the whole batch
    (see :func:`textgym.algos.grpo.pack`). ``policy_loss`` swaps ``pg`` for GSPO's or CISPO's and
    ``rollout_correction`` multiplies it by importance weights between sampler and learner (see
    :func:`textgym.algos.grpo.grpo_loss`). Each field's meaning is its ``doc`` (listed below, in
    ``textgym train --help`` and in docs/trainers.md).
    """

    group_size: int = option(
        8,
        "Completions sampled per prompt; rollouts without a ``group`` id are grouped in consecutive chunks of this size.",
    )
    clip_eps_low: float = option(
        0.2,
        "Lower clip range, ``ratio >= 1 - clip_eps_low`` for negative advantages.",
    )
    clip_eps_high: float = option(
        0.2,
        "Upper clip range; DAPO (Yu et al., 2025) uses 0.28 > 0.2 to keep entropy.",
    )
    kl_beta: float = option(
        0.0,
        "Weight of the k3 KL to the frozen reference policy; 0 disables the reference forward pass entirely.",
    )
    loss_aggregation: LossAggregation = option(
        "token-mean",
        "How token losses become one number. ``token-mean``: divide by all policy tokens in the batch"
        " (DAPO). ``seq-mean-token-mean``: mean per sequence, then mean over sequences (original "
        "GRPO; favours short answers). ``seq-mean-token-sum``: sum per sequence, mean over sequences."
        " ``constant``: sum over everything divided by ``num_sequences * loss_constant`` (Dr. GRPO, "
        "Liu et al., 2025: no length bias).",
    )
    loss_constant: int | None = option(
        None,
        "The Dr. GRPO normaliser per sequence; ``None`` means ``max_length``.",
    )
    advantage_scaling: AdvantageScaling = option(
        "group",
        "``group``: ``(r - mean_g) / (std_g + eps)`` (GRPO). ``batch``: divide by the batch's reward "
        "std instead (robust when a group's rewards are all equal). ``none``: ``r - mean_g`` only "
        "(Dr. GRPO).",
    )
    advantage_eps: float = option(
        1e-6,
        "Added to the std before dividing.",
    )
    negative_advantage_scale: float = option(
        1.0,
        "Multiplies the advantages below 0. ``0`` trains only on the episodes that beat their group's "
        "mean (positive sample reinforcement, Zhu et al., 2025): a failed multi-turn episode then no "
        "longer pushes down its later turns that were right for what its earlier turns got back.",
    )
    advantage: AdvantageLevel = option(
        "episode",
        "``episode``: every token of an episode gets its group-relative advantage (GRPO). ``turn``: "
        "each policy turn also gets its own, GiGPO-style (Feng et al., 2025): its return from that turn"
        " on, ``sum_j turn_discount**j * r_(t+j)`` of the env's per-turn rewards, against those of the"
        ' turns of its group that left from the same ``info["state_key"]``, scaled by '
        "``advantage_scaling`` (a state met once, or returns all equal, give 0); the token advantage "
        "is ``(1 - turn_advantage_weight) * A_episode + turn_advantage_weight * A_turn``. "
        "``rejection-sampling``: turn-level rejection sampling, an SFT step on the step's accepted "
        "turns: those whose return from that turn on (``turn_discount``, as ``turn`` takes it) is "
        "above 0 are trained with advantage 1 and nothing else is (no baseline, no scaling); an "
        "episode without one is dropped. With ``turn_discount=0`` and a dense reward a turn is "
        "accepted when its own env step paid (a Sudoku digit that is right), the rule of "
        '``TrainConfig.sft_turns="rewarded"``.',
    )
    turn_advantage_weight: float = option(
        1.0,
        "With ``advantage=\"turn\"``, the weight ``w`` of the turn's advantage against the episode's "
        "(0: the episode's alone, 1: the turn's alone). GiGPO's ``A_E + omega * A_S`` is "
        "``w = omega / (1 + omega)``, up to the scale ``1 + omega``.",
    )
    turn_discount: float = option(
        1.0,
        'With ``advantage="turn"`` or ``"rejection-sampling"``, the discount ``gamma`` of a turn\'s return over the turns after '
        "it: 1 counts every later reward fully, 0 the turn's own reward alone (a dense per-turn "
        "reward's exact signal).",
    )
    turn_token_credit: TurnTokenCredit = option(
        "turn",
        'With ``advantage="turn"``, how a turn\'s advantage reaches its tokens. ``turn``: each token gets '
        "the turn's. ``prefix``: each token gets the change it made to the expected return, the mean "
        "return of its anchor group's turns that share the action up to and including it less that "
        "of those sharing it up to the token before (scaled as the turn's; a turn's tokens sum to the "
        "mean advantage of the turns that chose the same action). Tokens every action shares (the "
        "format) then get 0, and each choice its own credit: a move's cell apart from its digit.",
    )
    num_iterations: int = option(
        1,
        "Policy updates per batch (GRPO's mu). Ratios use the sampler's logprobs as ``old_logp`` (the"
        " learner's own with ``rollout_correction``); with ``mu > 1`` they make the clipping bite.",
    )
    policy_loss: PolicyLoss = option(
        "clip",
        "``clip``: PPO's clipped token ratio (GRPO, DAPO). ``gspo``: one ratio per sequence, "
        "``exp(mean_t(logp - old_logp))``, clipped (GSPO, Zheng et al., 2025; the paper's weighting "
        'is ``loss_aggregation="seq-mean-token-mean"`` and clip ranges of ~3e-4). ``cispo``: '
        "REINFORCE on ``logp`` weighted by the clipped, stop-gradient token ratio, so clipped tokens "
        "keep their gradient (CISPO, MiniMax-M1, 2025).",
    )
    rollout_correction: RolloutCorrection = option(
        "none",
        "Correct for the sampler and the learner disagreeing on the same weights (kernels, dtypes): "
        "``old_logp`` becomes the learner's recomputed logprobs and the policy term is weighted per "
        "token by ``w = p_learner / p_sampler``, truncated at ``rollout_correction_cap`` (``tis``) or"
        " zeroed above it (``mis``) (Yao et al., 2025). ``none`` trusts the sampler's logprobs.",
    )
    rollout_correction_cap: float = option(
        2.0,
        "The cap ``C`` of ``tis`` and ``mis``.",
    )
    filter_zero_std_groups: bool = option(
        False,
        "Drop groups whose rewards are all equal before the update (DAPO's dynamic sampling): their "
        "advantages are 0, so they only dilute the token mean.",
    )
    soft_overlong_buffer: int = option(
        0,
        "DAPO's soft overlong punishment: a turn of ``L`` generated tokens gets ``(max_new_tokens - N"
        " - L) / N`` added to its episode's reward when it is within the last ``N`` tokens before "
        "``max_new_tokens`` (-1 at the limit); the longest turn counts. 0 disables it.",
    )
    mask_truncated: bool = option(
        False,
        "Drop truncated episodes from the loss (DAPO's overlong filtering): their reward says nothing"
        " about the answer. They still count in the group statistics.",
    )
    lr: float = option(
        1e-6,
        "Peak learning rate of AdamW.",
    )
    lr_schedule: LRSchedule = option(
        "constant",
        "``constant``, or ``linear`` / ``cosine`` decay to 0 at ``total_steps``.",
    )
    warmup_steps: int = option(
        0,
        "Linear warm-up from 0 to ``lr``.",
    )
    total_steps: int | None = option(
        None,
        "Optimiser steps of the run (the decay horizon); ``None``: ``textgym train`` derives it as "
        "``steps * num_iterations``, a bare learner decays over 1000 steps.",
    )
    weight_decay: float = option(
        OptimizerConfig.weight_decay,
        "AdamW's decoupled weight decay.",
    )
    adam_beta1: float = option(
        OptimizerConfig.adam_beta1,
        "AdamW's first-moment decay.",
    )
    adam_beta2: float = option(
        OptimizerConfig.adam_beta2,
        "AdamW's second-moment decay.",
    )
    adam_eps: float = option(
        OptimizerConfig.adam_eps,
        "AdamW's epsilon.",
    )
    max_grad_norm: float = option(
        OptimizerConfig.max_grad_norm,
        "Global gradient-norm clip; ``0`` disables it.",
    )
    micro_batch_size: int = option(
        8,
        "Sequences per forward/backward; gradients accumulate over the batch.",
    )
    max_length: int = option(
        1024,
        "Longest packed sequence (prompt and all turns); longer ones are cut.",
    )
    max_new_tokens: int = option(
        256,
        "Most tokens the sampler generates in one assistant turn.",
    )
    temperature: float = option(
        1.0,
        "Sampling temperature; the learner divides logits by it too, so that the trained distribution is the one that was sampled.",
    )
    top_p: float = option(
        1.0,
        "Nucleus sampling threshold of the sampler.",
    )
    compute_dtype: ComputeDType = option(
        "float32",
        "Activations' dtype in the learner (parameters and optimiser state stay float32).",
    )
    sampler_dtype: ComputeDType = option(
        "float32",
        "The dtype the sampler computes rollouts in; ``bfloat16`` samples from a bf16 cast of the "
        "weights (several times the float32 matmul rate on CPUs with AMX or AVX512-BF16, and half the"
        " weight traffic per decode step), its logprobs then differ from float32 ones by bf16 "
        'rounding (docs/benchmarks.md, "Samplers", states by how much), which ``rollout_correction`` can account '
        "for. Apart from ``compute_dtype``: the learner's gradients can stay float32 while sampling "
        "runs in bf16.",
    )
    trainable_layers: int | None = option(
        None,
        "Train only the top this many decoder layers, the final norm and an untied output head; the "
        "embedding (and so a head tied to it) and the lower layers stay frozen, so the backward pass "
        "stops at the lowest trained layer and the optimiser holds state for the trained weights only"
        " (see :func:`~textgym.algos.grpo.learner.is_trainable`). ``None``: every parameter trains.",
    )
    lora_rank: int = option(
        0,
        "Rank ``r`` of LoRA adapters (Hu et al., 2021) on the ``lora_targets`` modules: the base weights"
        " stay frozen and only the adapters train (and sit in the optimiser); ``final/`` and ``best/``"
        " then hold the adapter in peft's format. 0 disables LoRA. Excludes ``trainable_layers``.",
    )
    lora_alpha: float = option(
        16.0,
        "LoRA's scale numerator: an adapter adds ``(lora_alpha / lora_rank) * B @ A`` to its weight.",
    )
    lora_targets: tuple[str, ...] = option(
        LORA_TARGETS,
        "Module names that get an adapter (``--lora-targets q_proj,v_proj``); each must name a linear layer of the model.",
    )
    lora_merge: bool = option(
        False,
        "With LoRA, also write ``merged/`` inside ``final/`` and ``best/``: a plain Hugging Face "
        "directory with the adapter folded into the weights.",
    )
    max_off_policy_steps: int = option(
        0,
        "Asynchronous GRPO: rollouts of later steps are collected in the background while the learner "
        "updates, from weights at most this many updates old (AReaL's ``max_head_offpolicyness``). "
        "0 is the synchronous loop.",
    )
    seed: int = option(
        0,
        "Root of the run's seed tree (:class:`~textgym.algos.grpo.SeedTree`): training tasks and "
        "sampling; ``textgym train`` sets it from ``--seed``.",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))  # JSON gives a list; a jit key needs a tuple
        check_choices(self)
        for name in ("group_size", "num_iterations", "micro_batch_size", "max_length", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("clip_eps_low", "clip_eps_high", "kl_beta", "lr", "weight_decay", "max_grad_norm", "negative_advantage_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("turn_advantage_weight", "turn_discount"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.clip_eps_low < 1:
            raise ValueError(f"clip_eps_low must be in [0, 1), got {self.clip_eps_low}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.trainable_layers is not None and self.trainable_layers < 0:
            raise ValueError(f"trainable_layers must be >= 0 or None, got {self.trainable_layers}")
        if self.lora_rank < 0 or self.lora_alpha <= 0 or not self.lora_targets:
            raise ValueError(
                f"expected lora_rank >= 0, lora_alpha > 0 and lora targets, got {self.lora_rank}, {self.lora_alpha}, "
                f"{list(self.lora_targets)}"
            )
        if self.lora_rank and self.trainable_layers is not None:
            raise ValueError("lora_rank and trainable_layers exclude each other: LoRA freezes every base weight")
        if self.lora_merge and not self.lora_rank:
            raise ValueError("lora_merge needs lora_rank > 0")
        if self.max_off_policy_steps < 0:
            raise ValueError(f"max_off_policy_steps must be >= 0, got {self.max_off_policy_steps}")
        if self.loss_constant is not None and self.loss_constant < 1:
            raise ValueError(f"loss_constant must be >= 1 or None, got {self.loss_constant}")
        if self.rollout_correction_cap < 1:
            raise ValueError(f"rollout_correction_cap must be >= 1, got {self.rollout_correction_cap}")
        if not 0 <= self.soft_overlong_buffer < self.max_new_tokens:
            raise ValueError(f"soft_overlong_buffer must be in [0, max_new_tokens), got {self.soft_overlong_buffer}")
        if self.warmup_steps < 0 or (self.total_steps is not None and self.total_steps < 1):
            raise ValueError(f"expected warmup_steps >= 0 and total_steps >= 1, got {self.warmup_steps}, {self.total_steps}")

    @property
    def lora_scale(self) -> float:
        """The factor of an adapter's ``B @ A``: ``lora_alpha / lora_rank``."""
        return self.lora_alpha / self.lora_rank

    @property
    def optimizer(self) -> OptimizerConfig:
        """The learner's AdamW and learning-rate schedule, from this config's fields."""
        return OptimizerConfig(
            lr=self.lr,
            lr_schedule=self.lr_schedule,
            warmup_steps=self.warmup_steps,
            total_steps=self.total_steps,
            weight_decay=self.weight_decay,
            adam_beta1=self.adam_beta1,
            adam_beta2=self.adam_beta2,
            adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm,
        )

    @property
    def dr_grpo_constant(self) -> int:
        """The per-sequence normaliser of ``loss_aggregation="constant"``."""
        return self.max_length if self.loss_constant is None else self.loss_constant
