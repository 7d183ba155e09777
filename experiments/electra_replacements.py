"""Can ELECTRA's discriminator learn from these replacements? Ranking quality (AUC) over the first steps.

    python experiments/electra_replacements.py --data learnE/data30522 --steps 150 --modes uniform,1,2,3

A tiny ELECTRA (2 layers of 128, ALiBi, pre-LN, a 1-layer generator) trains on
the data directory's first `--steps` batches of 16 × 128, one thread, lr 1e-3,
AdamW beta2 0.98, clip 0.5, bf16 autocast where the CPU has it. Each mode
changes only where the replacements come from: `uniform` draws them uniformly
from the vocabulary (easy to spot), a number T samples the generator at that
temperature (1 = the paper). Reported every 50 steps: the generator's MLM
accuracy and the discriminator's AUC over those 50 steps' tokens (0.5 = it
cannot rank replaced above original tokens).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py: the machine line
from common import machine_description  # noqa: E402


def auc(logits, replaced) -> float:
    """Probability that a random replaced token scores above a random original one."""
    ranked = replaced[logits.argsort(descending=True)].float()  # (M,) labels from highest score down
    positives, negatives = ranked.sum(), (1 - ranked).sum()
    return float(((1 - ranked) * ranked.cumsum(0)).sum() / (positives * negatives))


@contextlib.contextmanager
def patched(module, name: str, value):
    """module.name = value inside the block only (the uniform mode's draw must not leak into the next mode)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def run_mode(mode: str, data: Path, steps: int, every: int = 50) -> list[tuple[int, float, float]]:
    import torch

    import bertforge.model.electra as electra
    from bertforge.data.instances import fixed_batches, pretraining_dataset
    from bertforge.data.masking import MaskingCollator, MaskingConfig
    from bertforge.engine.hardware import cpu_has_fast_bf16
    from bertforge.labels import IGNORE_INDEX
    from bertforge.model.config import ModelConfig
    from bertforge.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(data)
    train = pretraining_dataset(data, "train", 128, "none", 0)
    batches = fixed_batches(
        train, MaskingCollator(tokenizer, MaskingConfig.for_evaluation(128, False), seed=1), 16, steps
    )
    torch.manual_seed(0)
    config = ModelConfig.preset(
        "tiny",
        vocab_size=tokenizer.get_vocab_size(),
        norm_style="pre",
        hidden_dropout=0.0,
        attention_dropout=0.0,
        attention_bias="alibi",
    )
    model = electra.ElectraForPreTraining(config, 1, temperature=1.0 if mode == "uniform" else float(mode))

    def uniform(logits):
        return torch.randint(5, logits.shape[-1], (len(logits),))  # (N,): any token but the 5 special ids

    draw = uniform if mode == "uniform" else electra.sample
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    seen: dict = {}
    model.discriminator.register_forward_hook(lambda module, args, logits: seen.update(ids=args[0], logits=logits))
    dtype = torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
    rows, scores, labels, correct, masked = [], [], [], 0, 0
    for step, batch in enumerate(batches, 1):
        with torch.autocast("cpu", dtype, enabled=dtype == torch.bfloat16), patched(electra, "sample", draw):
            out = model(batch["input_ids"], batch["token_type_ids"], None, batch["mlm_labels"])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        optimizer.zero_grad()
        chosen = batch["mlm_labels"] != IGNORE_INDEX
        original = torch.where(chosen, batch["mlm_labels"], batch["input_ids"])
        scores.append(seen["logits"].detach().float().flatten())
        labels.append((seen["ids"] != original).flatten())
        correct, masked = correct + int(out.mlm_correct()), masked + len(out.mlm_targets)
        if step % every == 0:
            rows.append((step, correct / masked, auc(torch.cat(scores), torch.cat(labels))))
            scores, labels, correct, masked = [], [], 0, 0
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a prepared data directory")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--modes", default="uniform,1,2,3", help="uniform, or generator temperatures")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(machine_description())
    print(
        "| replacements | " + " | ".join(f"step {s}: generator MLM / AUC" for s in range(50, args.steps + 1, 50)) + " |"
    )
    for mode in args.modes.split(","):
        rows = run_mode(mode, args.data, args.steps)
        label = "uniform" if mode == "uniform" else f"generator, temperature {mode}"
        print(f"| {label} | " + " | ".join(f"{acc:.3f} / {area:.3f}" for _, acc, area in rows) + " |", flush=True)


if __name__ == "__main__":
    main()
