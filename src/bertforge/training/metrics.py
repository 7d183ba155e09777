"""Pre-training's metrics: running sums of the MLM (and pair head's, and ELECTRA's) losses and accuracies over a
window of steps or a held-out evaluation.

Sums stay on the device until they are read, so accumulating costs no host sync. The pair head's metrics are
named after its objective: nsp_loss/nsp_acc or sop_loss/sop_acc.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from ..data.masking import packed_documents
from ..engine.runtime import Distributed, MixedPrecision
from ..objectives import PAIR_OBJECTIVES

KEYS = (
    "steps",
    "grad_norm",
    "mlm_sum",
    "masked",
    "mlm_correct",
    "pair_sum",
    "pair_correct",
    "sequences",
    "rtd_sum",  # ELECTRA's discriminator: loss × tokens, tokens judged right, tokens judged
    "rtd_correct",
    "rtd_tokens",
)
AVERAGED_OVER_PROCESSES = ("steps", "grad_norm")  # every process counts the same steps and sees the same norm


class MetricSums:
    """Sums of MLM loss, correct predictions and counts (and the pair head's), over any number of batches."""

    def __init__(self, values: dict[str, float] | None = None):
        self.sums: dict[str, Any] = dict.fromkeys(KEYS, 0.0)
        self.sums.update(values or {})

    def add_batch(self, out, pair_labels: torch.Tensor | None = None) -> None:
        """One forward pass's output; `pair_labels` when the pair head is trained."""
        s, n = self.sums, out.mlm_targets.numel()
        s["mlm_sum"] = s["mlm_sum"] + out.mlm_loss.detach() * n
        s["masked"] += n
        s["mlm_correct"] = s["mlm_correct"] + out.mlm_correct()
        if pair_labels is not None:
            s["pair_sum"] = s["pair_sum"] + out.nsp_loss.detach() * len(pair_labels)
            s["pair_correct"] = s["pair_correct"] + (out.nsp_logits.argmax(-1) == pair_labels).sum()
            s["sequences"] += len(pair_labels)
        if out.rtd_loss is not None:
            s["rtd_sum"] = s["rtd_sum"] + out.rtd_loss.detach() * out.rtd_tokens
            s["rtd_correct"] = s["rtd_correct"] + out.rtd_correct
            s["rtd_tokens"] = s["rtd_tokens"] + out.rtd_tokens

    def add_step(self, grad_norm: torch.Tensor) -> None:
        self.sums["grad_norm"] = self.sums["grad_norm"] + grad_norm.detach()
        self.sums["steps"] += 1

    def totals(self, processes: Distributed | None = None, device: str = "cpu") -> dict[str, float]:
        """The sums as floats, added up over all processes (one all-reduce)."""
        values = torch.tensor([float(self.sums[k]) for k in KEYS], dtype=torch.float64)
        if processes is not None and processes.world > 1:
            values = values.to(device)
            dist.all_reduce(values)
            values = values.cpu()
            for key in AVERAGED_OVER_PROCESSES:
                values[KEYS.index(key)] /= processes.world
        return dict(zip(KEYS, values.tolist()))


def summarise(totals: dict[str, float], pair_objective: str) -> dict[str, float]:
    """Losses and accuracies from summed totals: mlm_loss, mlm_acc, and the pair head's, and their sum;
    rtd_loss and rtd_acc for ELECTRA (whose mlm_* are its generator's)."""
    mlm_loss = totals["mlm_sum"] / max(totals["masked"], 1)
    record = {"loss": mlm_loss, "mlm_loss": mlm_loss, "mlm_acc": totals["mlm_correct"] / max(totals["masked"], 1)}
    if PAIR_OBJECTIVES.get(pair_objective).head and totals["sequences"]:
        pair_loss = totals["pair_sum"] / totals["sequences"]
        record.update(
            {
                "loss": mlm_loss + pair_loss,
                f"{pair_objective}_loss": pair_loss,
                f"{pair_objective}_acc": totals["pair_correct"] / totals["sequences"],
            }
        )
    if totals.get("rtd_tokens"):
        record["rtd_loss"] = totals["rtd_sum"] / totals["rtd_tokens"]
        record["rtd_acc"] = totals["rtd_correct"] / totals["rtd_tokens"]
    return record


@torch.no_grad()
def evaluate_batches(
    model, batches: list[dict], precision: MixedPrecision, pair_objective: str = "nsp"
) -> dict[str, float]:
    """Held-out MLM loss, accuracy and perplexity (and the pair head's) of `model` on fixed batches."""
    was_training = model.training
    model.eval()
    sums = MetricSums()
    pair = PAIR_OBJECTIVES.get(pair_objective).head
    for batch in batches:
        documents = packed_documents(batch)
        apart = {"document_ids": documents.to(precision.device)} if documents is not None else {}
        batch = {k: v.to(precision.device) for k, v in batch.items()}
        with precision.autocast():
            out = model(
                batch["input_ids"],
                batch["token_type_ids"],
                batch["attention_mask"],
                batch["mlm_labels"],
                batch["nsp_labels"] if pair else None,
                **apart,
            )
        sums.add_batch(out, batch["nsp_labels"] if pair else None)
    model.train(was_training)
    totals = sums.totals()
    result = summarise(totals, pair_objective)
    masked = int(totals["masked"])
    # the accuracy's standard error as a binomial's: how far another draw of as many masks may land
    spread = math.sqrt(result["mlm_acc"] * (1 - result["mlm_acc"]) / masked) if masked else float("nan")
    result.update(perplexity=math.exp(min(result["mlm_loss"], 50)), masked_tokens=masked, mlm_acc_stderr=spread)
    return result
