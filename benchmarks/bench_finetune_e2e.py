"""One epoch of fine-tuning on MRPC, whole processes: `bertforge finetune` against the plain `transformers` loop.

    python benchmarks/bench_finetune_e2e.py --glue ../shared/data/glue --rounds 2
    python benchmarks/bench_finetune_e2e.py --glue ../shared/data/glue --family deberta-v2   # another family's mini

Both start from the same directory (a mini with random weights, a tokenizer trained on MRPC's training text) and
do the same work: read train.tsv and dev.tsv, tokenise, one epoch at batch 32 with AdamW and a linear schedule,
the dev set scored, the model saved. The `transformers` loop is the one its documentation teaches: shuffled
examples, `DataCollatorWithPadding` (each batch padded to its longest), fused AdamW. `bertforge finetune` batches
by length and runs padded batches unpadded where that pays (`--unpad auto`); it races also with `--unpad never`,
and with `--precision auto` (its default: bf16 on a CPU measured fast at it, else fp32; the others are fp32).
The contenders alternate, round after round, each a fresh process; the table gives each one's median seconds, and
a second table where they go: each process times its phases (start-up imports, loading the model, reading and
tokenising, training, the dev pass, saving) and prints them on one line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_description  # noqa: E402

# The loop a `transformers` user writes (its course's "full training" chapter), one epoch, as a script.
PLAIN_LOOP = r"""
import time; began = time.perf_counter(); marks = {}
def mark(phase):  # seconds since the last mark, under the phase that just ended
    global began; now = time.perf_counter(); marks[phase] = marks.get(phase, 0) + now - began; began = now
import csv, json, sys, torch
mark("import torch")
from torch.utils.data import DataLoader
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          get_linear_schedule_with_warmup)
model_dir, glue, out = sys.argv[1:4]
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
mark("import the rest")
try:
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2, attn_implementation="sdpa")
except ValueError:  # a family without SDPA (DeBERTa's disentangled attention): its own attention
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
mark("load the model")

def read(name):
    with open(f"{glue}/MRPC/{name}", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    encoded = tokenizer([r["#1 String"] for r in rows], [r["#2 String"] for r in rows], truncation=True,
                        max_length=128)
    segments = encoded.get("token_type_ids") or [None] * len(rows)  # a model without segments takes none
    return [{"input_ids": i, **({"token_type_ids": t} if t is not None else {}), "labels": int(r["Quality"])}
            for i, t, r in zip(encoded["input_ids"], segments, rows)]

collate = DataCollatorWithPadding(tokenizer)
train = DataLoader(read("train.tsv"), batch_size=32, shuffle=True, collate_fn=collate)
dev = DataLoader(read("dev.tsv"), batch_size=64, collate_fn=collate)
mark("read and tokenise")
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, fused=True)
schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * len(train)), len(train))
model.train()
for batch in train:
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
mark("train")
model.eval()
right = total = 0
with torch.no_grad():
    for batch in dev:
        right += int((model(**batch).logits.argmax(-1) == batch["labels"]).sum())
        total += len(batch["labels"])
mark("score dev")
model.save_pretrained(out)
tokenizer.save_pretrained(out)
mark("save")
print(f"dev accuracy {right / total:.4f}")
print("PHASES " + json.dumps(marks), file=sys.stderr)
"""

# `bertforge finetune` with the same phases timed: its functions wrapped, the command run as the CLI runs it.
PHASED_FINETUNE = r"""
import time; began = time.perf_counter(); marks = {}
def mark(phase):
    global began; now = time.perf_counter(); marks[phase] = marks.get(phase, 0) + now - began; began = now
import json, sys, torch
mark("import torch")
import bertforge.cli, bertforge.tasks.finetune as finetune, bertforge.modelfiles.directory as directory
import bertforge.tasks.registry as registry
mark("import the rest")

def timed(owner, name, phase):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        mark("other")
        try:
            return original(*args, **kwargs)
        finally:
            mark(phase)
    setattr(owner, name, wrapper)

timed(finetune, "load_model", "load the model")
timed(registry.TaskRecord, "build", "read and tokenise")
timed(finetune._Fitting, "_train", "train")
timed(finetune, "save_model", "save")
timed(finetune, "write_json", "save")
import bertforge.tasks.classification as classification
timed(classification.ClassificationTask, "evaluate", "score dev")
code = bertforge.cli.main(sys.argv[1:])
mark("other")
print("PHASES " + json.dumps(marks), file=sys.stderr)
sys.exit(code)
"""


# A mini of another family's shape: the family bertforge saves it as, and the transformers loop loads it as.
FAMILY_SHAPES = {
    "bert": {},
    "deberta-v2": {"position_embedding": "disentangled", "type_vocab_size": 0},
}


def make_model(glue: Path, where: Path, family: str = "bert") -> Path:
    """A mini of `family`'s shape with random weights and a WordPiece tokenizer trained on MRPC's training
    sentences."""
    import csv

    from bertforge import ModelConfig
    from bertforge.model.bert import BertForPreTraining
    from bertforge.modelfiles.directory import save_model
    from bertforge.tokenizer import train_tokenizer

    with open(glue / "MRPC" / "train.tsv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    tokenizer = train_tokenizer((r[c] for r in rows for c in ("#1 String", "#2 String")), vocab_size=8192)
    config = ModelConfig.preset("mini", vocab_size=tokenizer.get_vocab_size(), **FAMILY_SHAPES[family])
    model = BertForPreTraining(config, pair_head=not FAMILY_SHAPES[family])
    save_model(model, where, tokenizer)
    return where


def run(command: list[str]) -> tuple[float, dict[str, float]]:
    """The process's wall seconds, and its phases' (the PHASES line it prints); what they leave is the interpreter's
    start and exit."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed:\n{done.stderr[-2000:]}")
    line = next(line for line in done.stderr.splitlines() if line.startswith("PHASES "))
    phases = json.loads(line.removeprefix("PHASES "))
    return seconds, {**phases, "interpreter start and exit": seconds - sum(phases.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--glue", type=Path, required=True, help="the GLUE folder (holding MRPC/)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--family", choices=list(FAMILY_SHAPES), default="bert", help="the mini's family")
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model = make_model(args.glue, scratch / "model", args.family)
        from bertforge.engine.runtime import resolve_precision

        mrpc = args.glue / "MRPC"

        def bertforge(unpad: str, precision: str = "fp32") -> list[str]:
            return [sys.executable, "-c", PHASED_FINETUNE, "finetune", str(model), "--train", str(mrpc / "train.tsv"),
                    "--dev", str(mrpc / "dev.tsv"), "--text-column", "#1 String", "--pair-column", "#2 String",
                    "--label-column", "Quality", "--epochs", "1", "--batch-size", "32", "--lr", "5e-5",
                    "--seq-len", "128", "--device", "cpu", "--precision", precision, "--unpad", unpad, "--quiet",
                    "--out", str(scratch / f"bertforge-{unpad}-{precision}"), "--overwrite"]  # fmt: skip

        contenders = {
            "bertforge finetune": bertforge("auto"),
            "bertforge finetune --unpad never": bertforge("never"),
            f"bertforge finetune --precision auto ({resolve_precision('auto', 'cpu')} here)": bertforge("auto", "auto"),
            "transformers loop": [sys.executable, "-c", PLAIN_LOOP, str(model), str(args.glue), str(scratch / "hf")],
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        phases: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
        for round_ in range(args.rounds):
            for name, command in contenders.items():
                seconds, phased = run(command)
                times[name].append(seconds)
                phases[name].append(phased)
                print(f"round {round_ + 1}: {name} {seconds:.1f} s", file=sys.stderr)
    reference = statistics.median(times["transformers loop"])
    rows = [
        {
            "contender": name,
            "seconds_median": statistics.median(t),
            "seconds": t,
            "speedup": reference / statistics.median(t),
        }
        for name, t in times.items()
    ]
    print(machine_description())
    print(
        f"MRPC, one epoch (3,668 pairs, batch 32) and a dev pass, a {args.family} mini from random weights, "
        f"{args.rounds} rounds"
    )
    print("\n| contender | seconds (median) | vs the transformers loop |\n|---|---:|---:|")
    for r in rows:
        print(f"| {r['contender']} | {r['seconds_median']:.1f} | {r['speedup']:.2f}× |")
    names = list(dict.fromkeys(phase for runs in phases.values() for run_ in runs for phase in run_))
    print("\nWhere the time goes (median seconds of each phase):\n")
    print("| phase | " + " | ".join(contenders) + " |\n|---|" + "---:|" * len(contenders))
    for phase in names:
        cells = [statistics.median(run_.get(phase, 0.0) for run_ in phases[name]) for name in contenders]
        print(f"| {phase} | " + " | ".join(f"{cell:.2f}" for cell in cells) + " |")
    for r in rows:
        r["phases"] = phases[r["contender"]]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
