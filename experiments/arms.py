"""The arms learning.py compares: each a vocabulary size and the `bertforge pretrain` flags of one recipe or lever,
and the steady form of a scheduled arm that its 40-step calibration runs."""

from __future__ import annotations

WHOLE_RUN = "whole-run"  # an arm's --batch-ramp-steps: the ramp lasts the run, whose steps the calibration sets

# name: (vocabulary size, pretrain flags). `budget` is Cramming's switches (Geiping & Goldstein 2022) on BERT, as
# measured before ALiBi joined the recipe (so it pins the learned positions without a bias); the other arms vary one
# lever on top of it. Every arm names its position scheme, so that an arm means the same when the recipe changes.
# Each pins BERT's 15% masking, which `budget` had until 25% (the rope-8k-mask25 arm, today's `budget`).
MASK15 = ["--mask-prob", "0.15"]
# and AdamW at lr 1e-3, `budget`'s optimizer (Muon at 2e-3 was its default for a new model on 2026-12-02 only)
ADAMW = ["--optimizer", "adamw", "--lr", "1e-3"]
# BERT's shape, which `budget` had until it took ModernBERT's: the arms below that start from `--recipe budget` pin it
BERT_SHAPE = [
    "--feed-forward", "mlp", "--type-vocab-size", "2", "--norm-bias", "--linear-bias", "--first-attention-norm",
    "--task-head", "pooler", "--no-document-mask",
]  # fmt: skip


def bert_shaped(bias: str, positions: str) -> list[str]:
    """`budget` in BERT's shape with 15% masking, AdamW at 1e-3, and the given attention bias and positions."""
    return [
        "--recipe",
        "budget",
        *ADAMW,
        *BERT_SHAPE,
        "--attention-bias",
        bias,
        "--position-embedding",
        positions,
        *MASK15,
    ]


BUDGET = bert_shaped("none", "learned")
ALIBI = bert_shaped("alibi", "learned")
ROPE = bert_shaped("none", "rotary")
# ModernBERT's shape (Warner et al. 2024) on the budget of 25% masking (rope-8k-mask25), which transformers loads as
# its ModernBERT: a gated feed-forward at equal FLOPs (inner 680, 2/3 of mini's 1024), no segment table, no biases,
# no norm before the first attention (the embeddings' LayerNorm is just before it), task heads that transform first.
# Today's `budget` is modern-8k.
MODERN = [
    "--recipe", "budget", *ADAMW, "--attention-bias", "none", "--position-embedding", "rotary", "--mask-prob", "0.25",
    "--feed-forward", "glu", "--intermediate-size", "680", "--type-vocab-size", "0", "--no-norm-bias",
    "--no-linear-bias", "--no-first-attention-norm", "--task-head", "transform",
]  # fmt: skip
# `budget` with Muon at 2e-3 on BERT's vocabulary (modern-30k-muon-lr2e-3), the base of the muon-30k-* levers
MUON = [*MODERN, "--document-mask", "--optimizer", "muon", "--lr", "2e-3"]
# 8 layers of 192 (3 heads of 64, GLU inner 2/3 of 4 × 192) in place of mini's 4 of 256, at about its step cost
DEEP = ["--num-layers", "8", "--hidden-size", "192", "--num-heads", "3", "--intermediate-size", "512"]
ARMS: dict[str, tuple[int, list[str]]] = {
    "bert": (30522, ["--recipe", "bert"]),
    "budget": (30522, BUDGET),
    "budget-mask40": (30522, [*BUDGET, "--mask-prob", "0.4"]),
    "budget-batch128": (30522, [*BUDGET, "--batch-size", "128", "--lr", "2e-3"]),
    "budget-sinusoidal": (30522, [*BUDGET, "--position-embedding", "sinusoidal"]),
    "budget-alibi": (30522, ALIBI),
    # ELECTRA on the ALiBi recipe; its held-out MLM and cloze figures are its 1-layer generator's
    "electra": (30522, [*ALIBI, "--objective", "electra"]),
    "electra-temp2": (30522, [*ALIBI, "--objective", "electra", "--generator-temperature", "2"]),
    "budget-tiny": (30522, [*BUDGET, "--preset", "tiny", "--lr", "2e-3"]),
    "budget-8k": (8192, BUDGET),
    "budget-tiny-8k": (8192, [*BUDGET, "--preset", "tiny", "--lr", "2e-3"]),
    "budget-mask40-8k": (8192, [*BUDGET, "--mask-prob", "0.4"]),
    "budget-mask40to15-8k": (8192, [*BUDGET, "--mask-prob", "0.4", "--mask-prob-final", "0.15"]),
    # the ALiBi recipe at the tiny size, and both sizes on an 8k vocabulary, whose MLM head costs a quarter
    "alibi-tiny": (30522, [*ALIBI, "--preset", "tiny"]),
    "alibi-8k": (8192, ALIBI),
    "alibi-tiny-8k": (8192, [*ALIBI, "--preset", "tiny"]),
    # a gated feed-forward (GEGLU) on it, at the same FLOPs: 2/3 of tiny's 512 inner units (3·128·344 ≈ 2·128·512)
    "alibi-tiny-8k-glu": (8192, [*ALIBI, "--preset", "tiny", "--feed-forward", "glu", "--intermediate-size", "344"]),
    # and on mini, at the same FLOPs: 2/3 of mini's 1024 inner units (3·256·680 ≈ 2·256·1024)
    "alibi-8k-glu": (8192, [*ALIBI, "--feed-forward", "glu", "--intermediate-size", "680"]),
    # rotary positions (RoPE, as ModernBERT) in place of ALiBi and the learned table: `budget` until 25% masking
    "rope-tiny-8k": (8192, [*ROPE, "--preset", "tiny"]),
    "rope-8k": (8192, ROPE),
    # its peak learning rate: 1e-3 was chosen on mini with ALiBi at 500 steps, where 2e-3 stalled
    "rope-8k-lr1.5e-3": (8192, [*ROPE, "--lr", "1.5e-3"]),
    # more of each window to predict: at 8k the MLM head is cheap, so 25% masked costs a step 7% more, not 13-16%;
    # rope-8k-mask25 was `budget` until it took ModernBERT's shape (modern-8k)
    "rope-8k-mask25": (8192, [*ROPE, "--mask-prob", "0.25"]),
    "rope-8k-mask40": (8192, [*ROPE, "--mask-prob", "0.4"]),  # Wettig et al. 2023's rate; a step costs 1.26x
    # Ankner et al. 2023's schedule, 30% falling to 15%: the demo's, never measured on the hour
    "rope-8k-mask30to15": (8192, [*ROPE, "--mask-prob", "0.3", "--mask-prob-final", "0.15"]),
    # ModernBERT's shape, packed documents kept apart (attention inside each, positions restarting) or not
    "modern-8k": (8192, [*MODERN, "--document-mask"]),
    "modern-8k-stream": (8192, [*MODERN, "--no-document-mask"]),
    # with BERT's biases kept (ModernBERT's config allows them): what dropping them costs
    "modern-8k-bias": (8192, [*MODERN, "--norm-bias", "--linear-bias"]),
    # today's `budget` on BERT's 30,522-piece vocabulary (the budget issue's yardstick), and the levers on top of it
    "modern-30k": (30522, [*MODERN, "--document-mask"]),
    "modern-30k-muon": (30522, [*MODERN, "--document-mask", "--optimizer", "muon"]),
    "modern-30k-muon-lr2e-3": (30522, [*MODERN, "--document-mask", "--optimizer", "muon", "--lr", "2e-3"]),
    "modern-30k-lr2e-3": (30522, [*MODERN, "--document-mask", "--lr", "2e-3"]),  # is it Muon, or the lr?
    # twice the updates of half the size: is 32 × 128 past what a 30-minute run can use?
    "modern-30k-batch16": (30522, [*MODERN, "--document-mask", "--batch-size", "16"]),
    "modern-30k-batch8": (30522, [*MODERN, "--document-mask", "--batch-size", "8"]),
    "modern-30k-batch16-muon-lr2e-3": (
        30522,
        [*MODERN, "--document-mask", "--batch-size", "16", "--optimizer", "muon", "--lr", "2e-3"],
    ),
    # today's `budget` from nothing (Muon at 2e-3, batch 32) with one lever more:
    # the batch growing from 16 to 32 over the run (mean 24; Cramming ramped its batch too), or 8 throughout
    "muon-30k-batch16to32": (
        30522,
        [*MUON, "--batch-size-start", "16", "--batch-size", "32", "--batch-ramp-steps", WHOLE_RUN],
    ),
    "muon-30k-batch8": (30522, [*MUON, "--batch-size", "8"]),
    # the mask rate, where the MLM head is a quarter of a step: 15% makes steps cheaper, 40% each step richer
    "muon-30k-mask15": (30522, [*MUON, "--mask-prob", "0.15"]),
    "muon-30k-mask40": (30522, [*MUON, "--mask-prob", "0.4"]),
    # what each layer writes to the residual stream, at the start: zero (every layer the identity) or scaled down
    "muon-30k-zero-init": (30522, [*MUON, "--residual-init", "zero"]),
    "muon-30k-scaled-init": (30522, [*MUON, "--residual-init", "scaled"]),
    # depth against width at fixed time; the narrower embeddings and MLM head also cost less on a 30k vocabulary
    "modern-30k-deep": (30522, [*MODERN, "--document-mask", *DEEP]),
    # both of BERT's objectives on the ALiBi recipe: what NSP costs the MLM at equal time, and whether it learns
    "alibi-tiny-nsp": (30522, [*ALIBI, "--preset", "tiny", "--pair-objective", "nsp"]),
    # and on rotary positions, whose [CLS] reads the whole window where ALiBi's slopes kept it from the second text
    "rope-tiny-8k-nsp": (8192, [*ROPE, "--preset", "tiny", "--pair-objective", "nsp"]),
}


def steady_flags(flags: list[str]) -> list[str]:
    """An arm's flags with a schedule replaced by its mean, which costs what the whole run costs per step on
    average: a mask-rate schedule by its mean rate (the MLM head's work is linear in the rate), a batch ramp over
    the whole run by its mean batch (a step's work is linear in the batch); 40 calibration steps would otherwise
    run the start of the schedule only."""
    values = {name: flags[i + 1] for i, name in enumerate(flags[:-1]) if name.startswith("--")}
    steady = {}
    if "--mask-prob-final" in values:
        mean = (float(values["--mask-prob"]) + float(values["--mask-prob-final"])) / 2
        steady.update({"--mask-prob": str(mean), "--mask-prob-final": "0"})
    if values.get("--batch-ramp-steps") == WHOLE_RUN:
        mean = (int(values["--batch-size"]) + int(values["--batch-size-start"])) / 2
        steady.update({"--batch-size": str(round(mean)), "--batch-ramp-steps": "0"})
    return [steady.get(flags[i - 1], flag) if i else flag for i, flag in enumerate(flags)]


def whole_run(flags: list[str], steps: int) -> list[str]:
    """The flags for a run of `steps`: a ramp over the whole run lasts them."""
    return [str(steps) if flag == WHOLE_RUN else flag for flag in flags]
