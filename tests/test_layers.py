"""The package's imports run one way: each module imports only modules of lower layers.

A new module must be placed in LAYERS, so its place in the structure is a decision, not an accident.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bertforge"
SUBPACKAGES = {"cli"}

# Bottom up. Within a layer, modules do not import each other.
LAYERS = [
    ["errors", "labels", "display", "progress"],  # 1 also: progress bars on a terminal, lines in a log
    ["fileio", "config"],  # 1 foundations: the user-error type, atomic writes, typed configs
    ["packages"],  # 1 zip packages of XML parts (Office, OpenDocument, EPUB): parts by name, relationships
    ["spreadsheets"],  # 1 Excel workbooks read as tables
    ["textfiles", "tokenizer", "filters"],  # 2 text in: files and rows, tokenizers, junk filters
    ["layouts"],  # 2 how a text lays out documents and paragraphs: wrapped lines, Wikipedia, web pages, subtitles
    ["zipdocs", "pdfdocs", "markdowndocs", "archives"],  # 2 documents: EPUB, Office, OpenDocument; PDF; Markdown;
    # and .zip and .tar archives' files, a member at a time
    ["corpus", "datadir"],  # 2 documents from corpora; the prepared-data format
    ["prepare", "vocabulary"],  # 2 the streaming pipeline from corpus to data directory; tokenizers from corpora
    ["dropout"],  # 3 dropout with a cheaper CPU mask
    ["model", "hf", "flops"],  # 3 the network; its transformers layout; FLOP counts
    ["modeldir", "electra"],  # 3 model directories on disk; ELECTRA, a generator and a discriminator trained together
    ["data", "batching"],  # 4 pre-training instances and masking; text batches for fine-tuning and inference
    ["runtime", "optim"],  # 5 devices, precision, processes; optimizer and schedule
    ["metrics", "checkpoint", "batchplan"],  # 5 metric sums and log; checkpoints, run dir; data order
    ["replicates"],  # 5 runs that differ only in their seed: median, range, curve gap
    ["cuts"],  # 5 decision thresholds fitted on dev: the best cut of a ranking
    ["targets"],  # 5 a label, a set of labels or a number as the loss takes it; their scores
    # 5 fine-tuning tasks: their data, scores and answers
    ["classification", "tagging", "qa", "multiple_choice", "similarity"],
    ["continued"],  # 5 continued pre-training: a run that starts from a model directory
    ["runconfig"],  # 5 what a pretrain command trains: a recipe, a resumed run or a starting model
    ["finetune_state"],  # 5 where a fine-tuning run is: its checkpoints, for --resume
    ["train", "evaluate", "finetuning", "inference"],  # 6 the loops and the answers
    ["plots", "show"],  # 7 presentation
    ["sweep", "demo", "score"],  # 7 orchestration
    ["cli.flags"],  # 7 the command line: what every verb's parser shares
    ["cli.data", "cli.training", "cli.inference", "cli.downstream"],  # 7 the verbs, by kind of work
    ["cli"],  # 7 the command line: the parser of all verbs, and main
    ["__main__", "__init__"],  # python -m bertforge, and the package's lazy public names
]
LAYER_OF = {module: i for i, layer in enumerate(LAYERS) for module in layer}


def module_name(path: Path) -> str:
    """`cli/data.py` -> "cli.data", `cli/__init__.py` -> "cli", `model.py` -> "model"."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path, package: tuple[str, ...] = ()) -> set[str]:
    """bertforge modules that `path` imports (relative or absolute), at any depth in the file.

    `package` is the subpackage holding `path` (("cli",) for cli/data.py): relative
    imports resolve against it, and names come back as module_name gives them.
    """
    found = set()

    def add(parts: list[str]) -> None:
        # a subpackage's module ("cli.flags"), else the top-level module ("model" of "model.x")
        found.add(".".join(parts[:2]) if parts[0] in SUBPACKAGES and len(parts) > 1 else parts[0])

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - (node.level - 1)])
                if node.module:
                    add(base + node.module.split("."))
                else:
                    for alias in node.names:
                        add(base + [alias.name])
            elif node.module and node.module.startswith("bertforge."):
                add(node.module.split(".")[1:])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("bertforge."):
                    add(a.name.split(".")[1:])
    return found


def package_modules() -> dict[str, Path]:
    """Every module of the package by module_name, subpackages included (the package's own is "__init__").
    Not assets/: files the package ships, like the modeling file for `transformers`, which never imports bertforge
    (test_hf_parity checks that)."""
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "assets" not in p.relative_to(PACKAGE).parts}


def test_every_module_has_a_layer():
    modules = set(package_modules())
    assert modules == set(LAYER_OF), (
        f"not placed: {sorted(modules - set(LAYER_OF))}; gone: {sorted(set(LAYER_OF) - modules)}"
    )


def test_imports_only_go_down():
    upward = []
    for name, path in sorted(package_modules().items()):
        if name == "__init__":
            continue  # its lazy exports name modules of every layer, by design
        for target in imported_modules(path, path.parent.relative_to(PACKAGE).parts):
            if target != name and LAYER_OF[target] >= LAYER_OF[name]:
                upward.append(f"{name} (layer {LAYER_OF[name]}) imports {target} (layer {LAYER_OF[target]})")
    assert not upward, "\n".join(upward)


def test_the_layering_test_can_fail(tmp_path):
    bad = tmp_path / "model.py"
    bad.write_text("from .train import Trainer\nfrom . import cli\n")
    assert imported_modules(bad) == {"train", "cli"}
    bad_verb = tmp_path / "flags.py"
    bad_verb.write_text("from ..train import Trainer\nfrom .data import register\nfrom . import training\n")
    assert imported_modules(bad_verb, ("cli",)) == {"train", "cli.data", "cli.training"}


def test_prepare_and_what_it_reads_never_import_torch():
    """`bertforge prepare` starts fast and forks light workers: torch is never loaded on that path."""
    probe = "import sys, bertforge.prepare, bertforge.corpus, bertforge.datadir; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_public_name_resolves_and_importing_the_package_stays_light():
    """`bertforge.X` for every name in __all__ (the README's Python API), loaded on first use: a bare
    `import bertforge` (what `bertforge tokenizer` and `prepare` start with) must not pull torch in. Asked twice,
    after every module is loaded: a module named like an export would have replaced it (`bertforge.finetune`
    was the function until the module finetune.py was imported, then the module)."""
    probe = (
        "import sys, types, bertforge; light = 'torch' not in sys.modules; "
        "first = {n: getattr(bertforge, n, None) for n in bertforge.__all__}; "
        "import bertforge.cli, bertforge.score; "
        "wrong = [n for n in bertforge.__all__ if first[n] is None "
        "or isinstance(getattr(bertforge, n), types.ModuleType) or getattr(bertforge, n) is not first[n]]; "
        "print(light, wrong)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True []"
