"""The package's imports run one way: each module imports only modules of lower layers.

A new module must be placed in LAYERS, so its place in the structure is a decision, not an accident.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bertforge"

# Bottom up. Within a layer, modules do not import each other.
LAYERS = [
    ["errors", "labels", "display"],
    ["fileio", "config"],  # 1 foundations: the user-error type, atomic writes, typed configs
    ["textfiles", "tokenizer", "filters"],  # 2 text in: files and rows, tokenizers, junk filters
    ["corpus", "datadir"],  # 2 documents from corpora; the prepared-data format
    ["prepare"],  # 2 the streaming pipeline from corpus to data directory
    ["model", "hf", "flops"],  # 3 the network; its transformers layout; FLOP counts
    ["modeldir", "electra"],  # 3 model directories on disk; ELECTRA, a generator and a discriminator trained together
    ["data", "batching"],  # 4 pre-training instances and masking; text batches for fine-tuning and inference
    ["runtime", "optim"],  # 5 devices, precision, processes; optimizer and schedule
    ["metrics", "checkpoint", "progress", "batchplan"],  # 5 metric sums and log; checkpoints, run dir; bar; data order
    ["classification", "tagging", "qa"],  # 5 fine-tuning tasks: their data, scores and answers
    ["train", "evaluate", "finetune", "inference"],  # 6 the loops and the answers
    ["plots", "show"],  # 7 presentation
    ["sweep", "demo", "score"],  # 7 orchestration
    ["cli"],  # 7 the command line
    ["__main__", "__init__"],  # python -m bertforge, and the package's lazy public names
]
LAYER_OF = {module: i for i, layer in enumerate(LAYERS) for module in layer}


def imported_modules(path: Path) -> set[str]:
    """bertforge modules that `path` imports (relative or absolute), at any depth in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("bertforge."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("bertforge."))
    return found


def test_every_module_has_a_layer():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == set(LAYER_OF), (
        f"not placed: {sorted(modules - set(LAYER_OF))}; gone: {sorted(set(LAYER_OF) - modules)}"
    )


def test_imports_only_go_down():
    upward = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__init__":
            continue  # its lazy exports name modules of every layer, by design
        for target in imported_modules(path):
            if LAYER_OF[target] >= LAYER_OF[path.stem]:
                upward.append(f"{path.stem} (layer {LAYER_OF[path.stem]}) imports {target} (layer {LAYER_OF[target]})")
    assert not upward, "\n".join(upward)


def test_the_layering_test_can_fail(tmp_path):
    bad = tmp_path / "model.py"
    bad.write_text("from .train import Trainer\nfrom . import cli\n")
    assert imported_modules(bad) == {"train", "cli"}


def test_prepare_and_what_it_reads_never_import_torch():
    """`bertforge prepare` starts fast and forks light workers: torch is never loaded on that path."""
    probe = "import sys, bertforge.prepare, bertforge.corpus, bertforge.datadir; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
