"""How to pre-train: TrainConfig, and the recipes (bert, budget), each a named set of defaults that a run starts
from; explicit flags override a recipe, --preset its size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import Configurable, check_choices, documented, parse_duration, require
from ..errors import UserError
from ..families import MODERNBERT_SHAPE, titles
from ..model.config import ModelConfig, preset_size
from ..model.variants import is_gated
from ..objectives import OBJECTIVES, PAIR_OBJECTIVES, Objective, PairObjective, objective, pair_objective

if TYPE_CHECKING:
    from ..data.masking import MaskingConfig

OPTIMIZERS = ("adamw", "muon")  # engine/optim.py builds them
RESIDUAL_INITS = ("normal", "scaled", "zero")  # model/bert.py's init_residual_outputs


@dataclass
class TrainConfig(Configurable):
    """How to pre-train: data, objectives, optimisation, schedule, logging and checkpoints."""

    init_from: str = documented(
        "",
        "a model or run directory to continue pre-training (e.g. on your domain's text): ours, or a downloaded "
        f"{titles()} (an ELECTRA's generator). Its architecture, weights, dropout and heads are the start, the "
        "run saves it in its own family, and the data must be prepared with its tokenizer",
    )
    head_warmup_steps: int | None = documented(
        None,
        "with an --init-from that has no masked-LM head (a released encoder: BertModel, a sentence-embedding "
        "model): steps the new head trains alone, the encoder frozen, before the encoder learns through it "
        "(default: a tenth of the run, at most 100 steps; under --time-budget, 100 steps or a tenth of the time)",
        at_least=0,
    )
    head_warmup_lr: float = documented(
        1e-3,
        "learning rate of a new masked-LM head while it trains alone (--head-warmup-steps), constant",
        at_least=0.0,
    )
    trust_pickle: bool = documented(
        False,
        "read an --init-from that has only pytorch_model.bin (older hub repositories): tensors alone are "
        "unpickled, but only for sources you trust",
    )
    seq_len: int = documented(128, "target length of an instance, [CLS] A [SEP] B [SEP] included", at_least=8)
    batch_size: int = documented(32, "instances per optimizer micro-step (per process)", at_least=1)
    grad_accum: int = documented(1, "micro-steps accumulated into one optimizer step", at_least=1)
    batch_ramp_steps: int = documented(
        0,
        "optimizer steps over which the batch grows linearly from batch_size_start to batch_size (0 = no ramp)",
        at_least=0,
    )
    batch_size_start: int = documented(8, "instances per micro-step at the first step of a batch ramp", at_least=1)
    max_steps: int = documented(1000, "optimizer steps to run (ignored when time_budget is set)", at_least=1)
    time_budget: float = documented(
        0.0,
        "training time, e.g. 90s, 30m, 1.5h; the lr schedule follows the clock (0 = off)",
        parse=parse_duration,
        at_least=0.0,
    )
    time_limit: float = documented(
        0.0,
        "a ceiling on --max-steps: the run ends at its steps or after this long, whichever comes first, its "
        "schedules following whichever is further along, so a slow machine still ends its lr's decay "
        "(0 = none), e.g. 10m",
        parse=parse_duration,
        at_least=0.0,
    )
    lr: float = documented(5e-4, "peak learning rate", at_least=0.0)
    warmup: float = documented(0.06, "warm-up as a fraction of the run (< 1) or a number of steps (>= 1)", at_least=0.0)
    schedule: str = documented("linear", "lr after warm-up", ("linear", "cosine", "constant"))
    optimizer: str = documented(
        "adamw",
        "adamw for every parameter, or muon: Muon (momentum orthogonalised by Newton-Schulz, Jordan et al. 2024) for "
        "the encoder layers' matrices and AdamW for embeddings, heads, norms and biases, at the same lr",
        OPTIMIZERS,
    )
    weight_decay: float = documented(0.01, "decoupled weight decay (never on LayerNorm or biases)", at_least=0.0)
    adam_beta1: float = documented(0.9, "AdamW beta1", at_least=0.0, at_most=0.9999)
    adam_beta2: float = documented(0.999, "AdamW beta2", at_least=0.0, at_most=0.99999)
    adam_eps: float = documented(1e-6, "AdamW epsilon", at_least=1e-12)
    grad_clip: float = documented(1.0, "clip the global gradient norm to this (0 = off)", at_least=0.0)
    pair_objective: str = documented(
        "nsp",
        "sentence-pair task beside MLM: nsp (BERT: is B the next text?), sop (ALBERT: "
        "are A and B in order?) or none (MLM only)",
        tuple(PAIR_OBJECTIVES),
    )
    objective: str = documented(
        "mlm",
        "mlm: the model learns to fill in the masked tokens (BERT); electra: a small generator fills them in, and "
        "the model learns for every token whether it was replaced (ELECTRA, Clark et al. 2020). An electra run "
        "saves the generator, which does fill-mask, in model/generator",
        tuple(OBJECTIVES),
    )
    generator_layers: int = documented(
        1, "electra: layers of the generator, which has the model's width and shares its embeddings", at_least=1
    )
    rtd_weight: float = documented(
        50.0, "electra: weight of the replaced-token loss beside the generator's MLM loss", at_least=0.0
    )
    generator_temperature: float = documented(
        1.0,
        "electra: replacements are drawn from softmax(generator logits / this); above 1 draws less likely tokens, "
        "which a discriminator early in a short run can learn to spot (1 = the paper)",
        at_least=1e-3,
    )
    mask_prob: float = documented(0.15, "fraction of non-special tokens chosen for MLM")
    mask_prob_final: float = documented(
        0.0,
        "mask rate at the end of the run, reached linearly from mask_prob, e.g. 0.3 -> 0.15 "
        "(Ankner et al. 2023) (0 = no schedule: mask_prob throughout)",
    )
    mask_token_prob: float = documented(0.8, "of chosen tokens, fraction replaced by [MASK]", at_least=0.0, at_most=1.0)
    random_token_prob: float = documented(
        0.1, "of chosen tokens, fraction replaced by a random token", at_least=0.0, at_most=1.0
    )
    max_predictions: int = documented(
        0, "cap on MLM predictions per sequence (0 = ceil(seq_len x mask_prob), never binding)", at_least=0
    )
    whole_word_mask: bool = documented(False, "mask all ## pieces of a word together")
    short_seq_prob: float = documented(
        0.1, "probability of a shorter random target length (BERT: 0.1)", at_least=0.0, at_most=1.0
    )
    seed: int = documented(0, "seed for init, data order and masking", at_least=0)
    residual_init: str = documented(
        "normal",
        "a new model's init of each layer's two output projections, attention's and the feed-forward's, which "
        "write to the residual stream: normal as every other weight (BERT), scaled by 1/sqrt(2 x layers) "
        "(GPT-2), or zero, each layer starting as the identity (modded-nanogpt)",
        RESIDUAL_INITS,
    )
    log_every: int = documented(10, "optimizer steps between metrics.jsonl lines", at_least=1)
    eval_every: int = documented(200, "optimizer steps between held-out evaluations (0 = only at the end)", at_least=0)
    eval_batches: int = documented(20, "held-out batches per evaluation", at_least=1)
    save_every: int = documented(500, "optimizer steps between checkpoints (0 = only at the end)", at_least=0)
    keep_last: int = documented(3, "checkpoints kept on disk", at_least=0)
    max_bad_steps: int = documented(5, "consecutive non-finite losses that stop the run", at_least=1)
    device: str = documented("auto", "auto | cpu | cuda | cuda:N")
    precision: str = documented(
        "auto", "auto picks bf16 on CUDA and on CPUs measured to be fast at it", ("auto", "fp32", "bf16", "fp16")
    )
    compile: bool = documented(False, "torch.compile the model")
    activation_checkpointing: bool = documented(
        False,
        "keep each encoder layer's input only and compute the layer again in the backward pass: a step's activation "
        "memory for about a third more compute, for long sequences or a large model on a small GPU",
    )
    num_workers: int = documented(1, "data loader worker processes", at_least=0)
    document_mask: bool = documented(
        False,
        "without a pair objective: attention stays inside each document of a packed window, and positions "
        "restart at each (ModernBERT, MosaicBERT, NeoBERT); otherwise documents joined by [SEP] see each other",
    )

    @property
    def pair_task(self) -> PairObjective:
        """The pair objective's record (objectives.py)."""
        return pair_objective(self.pair_objective)

    @property
    def token_task(self) -> Objective:
        """The objective's record (objectives.py)."""
        return objective(self.objective)

    def __post_init__(self) -> None:
        require(check_choices(self), "train")  # first: the checks below ask the chosen records
        require(
            [
                (
                    self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
                    f"device must be auto, cpu or cuda, not {self.device!r}",
                ),
                (0.0 < self.mask_prob < 1.0, f"mask_prob must be in (0, 1), not {self.mask_prob}"),
                (
                    not (self.time_budget and self.time_limit),
                    "time_limit caps a run of --max-steps; a --time-budget run is its time already",
                ),
                (
                    0.0 <= self.mask_prob_final < 1.0,
                    f"mask_prob_final must be in (0, 1), or 0 for none, not {self.mask_prob_final}",
                ),
                (
                    self.mask_token_prob + self.random_token_prob <= 1.0,
                    "mask_token_prob + random_token_prob must be <= 1",
                ),
                (self.seq_len >= 8, f"seq_len must be at least 8, not {self.seq_len}"),
                (self.batch_size > 0 and self.grad_accum > 0, "batch_size and grad_accum must be positive"),
                (self.batch_ramp_steps >= 0, f"batch_ramp_steps must be >= 0, not {self.batch_ramp_steps}"),
                (
                    self.batch_ramp_steps == 0 or 0 < self.batch_size_start <= self.batch_size,
                    f"a batch ramp starts at 1 to batch_size ({self.batch_size}) instances, "
                    f"not batch_size_start {self.batch_size_start}",
                ),
                (self.max_predictions >= 0, "max_predictions must be positive, or 0 for automatic"),
                (
                    self.token_task.pairs or not self.pair_task.head,
                    f"electra has no pair objective: add --pair-objective none (not {self.pair_objective})",
                ),
                (
                    not (self.init_from and self.residual_init != "normal"),
                    f"residual_init {self.residual_init} starts a new model; init_from starts from trained weights",
                ),
                (
                    not (self.init_from and self.token_task.discriminator),
                    "init_from continues a BERT's masked-LM pre-training; an electra run starts new models",
                ),
                (
                    self.generator_layers > 0 and self.rtd_weight > 0 and self.generator_temperature > 0,
                    "generator_layers, rtd_weight and generator_temperature must be positive",
                ),
                (
                    not self.document_mask or not self.pair_task.head,
                    "document_mask keeps the documents of a packed window apart: it needs pair_objective none "
                    "(pairs are never packed)",
                ),
            ],
            "train",
        )

    def batch_size_at(self, step: int) -> int:
        """Instances per micro-step at optimizer step `step` (0-based): the ramp, then batch_size."""
        if step >= self.batch_ramp_steps:
            return self.batch_size
        return round(self.batch_size_start + (self.batch_size - self.batch_size_start) * step / self.batch_ramp_steps)

    @property
    def betas(self) -> tuple[float, float]:
        """AdamW's (beta1, beta2)."""
        return self.adam_beta1, self.adam_beta2

    @property
    def peak_mask_prob(self) -> float:
        """The highest mask rate of the run: the collator masks at it, and a schedule thins from there."""
        return max(self.mask_prob, self.mask_prob_final)

    def mask_rate(self, progress: float) -> float:
        """The mask rate at `progress` ∈ [0, 1] of the run."""
        if not self.mask_prob_final:
            return self.mask_prob
        return self.mask_prob + (self.mask_prob_final - self.mask_prob) * progress

    @property
    def predictions_per_sequence(self) -> int:
        """The cap on MLM predictions: max_predictions, or (0) enough never to bind at the peak mask rate."""
        return self.max_predictions or math.ceil(self.seq_len * self.peak_mask_prob)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        if "nsp" in values and "pair_objective" not in values:  # runs saved before pair_objective existed
            values = {**values, "pair_objective": "nsp" if values["nsp"] else "none"}
        return super().from_dict(values)


@dataclass(frozen=True)
class Recipe:
    """A named set of defaults for pretrain: a model size, then ModelConfig and TrainConfig values.

    Explicit flags override a recipe; --preset overrides its size.
    """

    description: str
    preset: str
    model: dict[str, Any]
    train: dict[str, Any]


RECIPES: dict[str, Recipe] = {
    "bert": Recipe(
        "BERT's own recipe (Devlin et al. 2019): post-LN, NSP, dropout 0.1, AdamW beta2 0.999, lr 1e-4 with 1% warm-up "
        "(BERT warmed up for 10k of 1M steps), clip 1.0. For learning what BERT did; slow to learn on a small budget.",
        "mini",
        {"norm_style": "post", "hidden_dropout": 0.1, "attention_dropout": 0.1},
        {
            "pair_objective": "nsp",
            "lr": 1e-4,
            "warmup": 0.01,
            "adam_beta2": 0.999,
            "grad_clip": 1.0,
            "weight_decay": 0.01,
            "mask_prob": 0.15,
            "schedule": "linear",
        },
    ),
    "budget": Recipe(
        "Learning on a small budget, after Cramming (Geiping & Goldstein 2022) and 24hBERT: pre-LN, MLM only on "
        "full-length windows, no dropout, AdamW beta2 0.98, lr 1e-3 with 2% warm-up decaying to zero, clip 0.5 "
        "(Muon, --optimizer muon --lr 2e-3, learns more held-out MLM per minute, but its weights grow and the "
        "model fine-tunes worse); "
        "rotary positions, which learned more per CPU minute than ALiBi and let [CLS] read the whole window; 25% of "
        "tokens masked, not BERT's 15% (Wettig et al. 2023). In ModernBERT's shape (Warner et al. 2024), which "
        "transformers loads as its own ModernBERT for every task: a gated feed-forward at equal FLOPs, no biases, "
        "no segment table, no norm before the first attention, task heads that transform first, and the documents "
        "of a packed window kept apart (experiments/modernbert.md). With a pair objective it keeps segments and "
        "lets windows cross documents, as the pairs need.",
        "mini",
        {**MODERNBERT_SHAPE, "hidden_dropout": 0.0, "attention_dropout": 0.0, "norm_bias": False, "linear_bias": False},
        {
            "document_mask": True,
            "pair_objective": "none",
            "lr": 1e-3,
            "warmup": 0.02,
            "adam_beta2": 0.98,
            "grad_clip": 0.5,
            "weight_decay": 0.01,
            "mask_prob": 0.25,
            "schedule": "linear",
        },
    ),
}


DEFAULT_RECIPE = "bert"


def recipe_configs(
    recipe: str, preset: str | None, model_values: dict[str, Any], train_values: dict[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """The recipe's defaults, its (or the given) preset's size on top, then the explicitly given values.

    Unless given, the position table is as long as the training sequences: rows past them would keep their
    random start, and a longer text would reach them at inference (the hour's mini, trained at 128 with a table of
    512: held-out MLM accuracy 0.408 on 128-token sequences, 0.300 on 256). A later --init-from run on longer
    sequences grows the table (BERT's second phase, at 512 tokens).
    """
    if recipe not in RECIPES:
        raise UserError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    chosen = RECIPES[recipe]
    recipe_model, recipe_train = dict(chosen.model), dict(chosen.train)
    if pair_objective(train_values.get("pair_objective", recipe_train["pair_objective"])).head:
        # sentence pairs need segments, and their second text may come from across a document's end
        recipe_model.pop("type_vocab_size", None)
        recipe_train.pop("document_mask", None)
    train = TrainConfig(**{**recipe_train, **train_values})
    size = preset_size(
        preset or chosen.preset, is_gated(model_values.get("feed_forward", recipe_model.get("feed_forward")))
    )
    trained_length = {"max_position_embeddings": train.seq_len}
    model = ModelConfig(**{**size, **recipe_model, **trained_length, **model_values})
    return model, train


def masking_config(cfg: TrainConfig) -> MaskingConfig:
    """How a run masks its instances: at the peak rate of its schedule, drawing what thinning and ELECTRA's
    sampling need (per instance, so that a batch split across processes samples as the whole batch would)."""
    from ..data.masking import MaskingConfig  # here: the command line reads these configs without torch

    return MaskingConfig(
        cfg.peak_mask_prob,
        cfg.mask_token_prob,
        cfg.random_token_prob,
        cfg.predictions_per_sequence,
        cfg.whole_word_mask,
        thinning_draws=bool(cfg.mask_prob_final),
        sampling_draws=cfg.token_task.discriminator,
    )
