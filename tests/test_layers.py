"""The package's layers are folders, and imports run one way: down.

LAYERS below is the one statement of the structure: each unit (a subpackage, or a foundation module) on its
layer, bottom up. A module may import its own package's modules and the units of lower layers; units that share
a layer never import each other (training and tasks, data and model). docs/architecture.md shows the same table,
and a test keeps the two equal.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bertforge"

LAYERS: list[tuple[str, list[str]]] = [
    ("foundations: the user-error type, labels, tables, progress", ["errors", "labels", "display", "progress"]),
    ("foundations: atomic writes, locks; typed, documented configs; records by name", ["fileio", "config", "registry"]),
    ("foundations: the Hugging Face model families and saved architectures, the pre-training objectives: "
     "records (no torch)", ["families", "objectives"]),
    ("foundations: tokenizers", ["tokenizer"]),
    ("reading documents from every input format (no torch)", ["formats"]),
    ("prepared data, instances and masking; the network; devices, precision, processes, optimizer, checkpoints, "
     "metrics log (no model)", ["data", "model", "engine"]),
    ("model directories: read through the one boundary, written whole; their HF mapping, cards, "
     "sentence-transformers modules; an export's layout", ["modelfiles"]),
    ("the figures: a run's curves, a model's views (matplotlib; no model code); the serving unit: exports, "
     "answer kinds, precisions, graph checks, the served graph", ["plots", "serving"]),
    ("pre-training; fine-tuning (never each other)", ["training", "tasks"]),
    ("the answers a model gives", ["inference"]),
    ("sweeps, downstream scores, replicates, the demo; the HTTP service", ["studies", "service"]),
    ("the command line", ["cli"]),
    ("python -m bertforge, and the package's lazy public names", ["__main__", "__init__"]),
]  # fmt: skip
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
SUBPACKAGES = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """`cli/data.py` -> "cli.data", `cli/__init__.py` -> "cli", `errors.py` -> "errors"."""
    parts = path.relative_to(package).with_suffix("").parts
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def unit_of(module: str) -> str:
    """The unit a module belongs to: its subpackage, or itself (a foundation module, inference, plots)."""
    return module.split(".")[0]


def imported_modules(path: Path, package: tuple[str, ...] = ()) -> set[str]:
    """bertforge modules that `path` imports (relative or absolute), at any depth in the file.

    `package` is the subpackage holding `path` (("training",) for training/trainer.py): relative
    imports resolve against it, and names come back as module_name gives them.
    """
    found = set()

    def add(parts: list[str]) -> None:
        # a subpackage's module ("training.trainer"), else the top-level module ("tokenizer" of "tokenizer.x")
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


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by module_name, subpackages included (the package's own is "__init__").
    Not assets/: files the package ships, like the modeling file for `transformers`, which never imports bertforge
    (test_hf_parity checks that)."""
    return {module_name(p, package): p for p in package.rglob("*.py") if "assets" not in p.relative_to(package).parts}


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """Every import that does not go down, in the package at `package` (a copy, for the test that plants one)."""
    upward = []
    for name, path in sorted(package_modules(package).items()):
        if name == "__init__":
            continue  # its lazy exports name modules of every layer, by design
        unit = unit_of(name)
        for target in imported_modules(path, path.parent.relative_to(package).parts):
            other = unit_of(target)
            if other == unit and unit in SUBPACKAGES:
                continue  # a package's modules use each other
            if LAYER_OF[other] >= LAYER_OF[unit]:
                upward.append(f"{name} (layer {LAYER_OF[unit]}) imports {target} (layer {LAYER_OF[other]})")
    return upward


def test_every_module_has_a_layer():
    units = {unit_of(m) for m in package_modules()}
    assert units == set(LAYER_OF), f"not placed: {sorted(units - set(LAYER_OF))}; gone: {sorted(set(LAYER_OF) - units)}"


def test_imports_only_go_down():
    upward = upward_imports()
    assert not upward, "\n".join(upward)


def test_the_layers_are_folders():
    """At least five subpackages, at most fifteen modules at the top, and no subpackage below another it needs."""
    top = [p for p in PACKAGE.glob("*.py")]
    assert len(SUBPACKAGES) >= 5 and len(top) <= 15, (sorted(SUBPACKAGES), [p.name for p in top])


def test_the_layering_test_can_fail(tmp_path):
    bad = tmp_path / "bert.py"
    bad.write_text("from ..training.trainer import Trainer\nfrom .. import cli\n")
    assert imported_modules(bad, ("model",)) == {"training.trainer", "cli"}
    bad_verb = tmp_path / "flags.py"
    bad_verb.write_text("from ..tasks.finetune import finetune\nfrom .data import register\nfrom . import training\n")
    assert imported_modules(bad_verb, ("cli",)) == {"tasks.finetune", "cli.data", "cli.training"}
    # Planted in a copy of the package: in the package itself, a test on another worker would meet the file.
    copy = shutil.copytree(PACKAGE, tmp_path / "bertforge", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "training" / "planted.py").write_text("from ..tasks.finetune import finetune\n")  # the same layer
    assert upward_imports(copy) == ["training.planted (layer 8) imports tasks.finetune (layer 8)"]


def test_formats_and_prepare_never_import_torch():
    """`bertforge prepare` and `tokenizer train` start fast and fork light workers: torch is never loaded on that
    path, nor by any document reader."""
    formats = sorted(m for m in package_modules() if unit_of(m) == "formats")
    probe = f"import sys, {', '.join('bertforge.' + m for m in formats)}, bertforge.data.prepare, "
    probe += "bertforge.data.vocabulary, bertforge.data.directory; print('torch' in sys.modules)"
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
        "import bertforge.cli, bertforge.studies.score; "
        "wrong = [n for n in bertforge.__all__ if first[n] is None "
        "or isinstance(getattr(bertforge, n), types.ModuleType) or getattr(bertforge, n) is not first[n]]; "
        "print(light, wrong)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True []"


def test_the_architecture_page_shows_these_layers():
    """docs/architecture.md's table of layers is this one: written for readers, kept true by this test."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|$", page, re.M)
    shown = [(int(layer), [u.strip(" `/") for u in units.split(",")]) for layer, units, _ in rows]
    assert shown == [(i, units) for i, (_, units) in enumerate(LAYERS)]


def test_every_random_draw_names_its_stream():
    """Each `mix_seed(...)` in the package ends with a member of the one table of streams (data/instances.py
    `Stream`), not a bare number that another draw might reuse and so correlate with."""
    unnamed = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "mix_seed":
                last = node.args[-1]
                if not (isinstance(last, ast.Attribute) and getattr(last.value, "id", None) == "Stream"):
                    unnamed.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not unnamed, unnamed


def places_naming(name: str) -> set[str]:
    """The package's files (outside model/, whose `transformers` problem types are that library's vocabulary, and
    the architecture records, whose pipeline tags and export kinds are the Hub's and optimum's) that use `name` as
    a task's name: a string that is the name (docstrings aside), or
    `--task NAME` / `task=NAME` anywhere."""
    used = re.compile(rf"(--task |task=){re.escape(name)}(?![\w-])")
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "model" or path == PACKAGE / "families" / "architectures.py":
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
            if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
        }
        strings = (
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        )
        if name in strings or used.search(text):
            found.add(str(path.relative_to(PACKAGE)))
    return found


def test_each_built_in_task_is_named_in_its_module_and_the_registry_only():
    """Adding or renaming a task is one place to change: the registry's record and the task's own module name it;
    finetune, score, the CLI and the model card ask the record."""
    from bertforge.tasks.registry import TASKS

    built_in = [record for record in TASKS.records() if record.built_in]
    assert len(built_in) == 7
    for record in built_in:
        module = f"tasks/{record.make.partition(':')[0]}.py"
        assert places_naming(record.name) <= {"tasks/registry.py", module}, record.name
    assert places_naming("classification") == {"tasks/registry.py", "tasks/classification.py"}  # the check sees


def test_no_layer_below_the_command_line_starts_the_command_line():
    """A process the library starts (a sweep's grid point) runs a library function, not `python -m bertforge`: a
    dependency on the CLI that the import graph would not show."""
    starts_cli = re.compile(r"""["']-m["'],\s*["']bertforge["']""")
    found = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if unit_of(module_name(path)) not in ("cli", "__main__") and starts_cli.search(path.read_text(encoding="utf-8"))
    ]
    assert not found, found
    assert starts_cli.search('command = [sys.executable, "-m", "bertforge", "pretrain"]')  # the check sees one


def test_the_network_reads_and_writes_no_file():
    """model/ is the learner's folder: what computes. Nothing under it opens, reads or writes a file (modelfiles/
    does): no file module imported, no open() or Path I/O called."""
    file_access = {"fileio", "safetensors", "safetensors.torch", "json", "shutil", "pathlib", "os"}
    io_calls = {
        "open",
        "read_text",
        "write_text",
        "read_bytes",
        "write_bytes",
        "save",
        "load",
        "save_file",
        "load_file",
    }
    found = []
    for path in sorted((PACKAGE / "model").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            found += [f"{path.name} imports {n}" for n in names if n.lstrip(".") in file_access]
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if called in io_calls and not (called == "load" and "state_dict" in ast.unparse(node.func)):
                    found.append(f"{path.name}:{node.lineno} calls {called}")
    assert not found, found


def objective_comparisons(package: Path = PACKAGE) -> list[str]:
    """Places outside objectives.py that compare an objective with its name (`pair_objective == "none"`, `in ("nsp",
    "sop")`) instead of asking its record."""
    from bertforge.objectives import OBJECTIVES, PAIR_OBJECTIVES

    names = set(OBJECTIVES) | set(PAIR_OBJECTIVES)
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "objectives.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            constants = {
                c.value
                for side in sides
                for c in ast.walk(side)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            if constants & names and any("objective" in ast.unparse(side) for side in sides):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    return found


def test_no_objective_is_compared_by_name_outside_its_records(tmp_path):
    assert not objective_comparisons(), objective_comparisons()
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "loop.py").write_text('if cfg.pair_objective != "none":\n    pass\n')
    assert objective_comparisons(planted) == ["loop.py:1"]  # the check sees one


ANSWER_NAMES = {"MASKED_LM", "SEQUENCE", "TOKENS", "SPANS", "CHOICE", "ENCODER"}  # families/architectures.py's
ANSWERS_OWNED_BY = ("families/architectures.py", "serving/kinds.py")  # the records, and the kinds that act on them


def answer_comparisons(package: Path = PACKAGE) -> list[str]:
    """Places outside the architecture records and the answer kinds that compare what a model answers with one of
    its names (`record.answers == MASKED_LM`, `answers in (SEQUENCE, TOKENS)`) instead of asking its kind."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() in ANSWERS_OWNED_BY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                named = {
                    n.id for side in (node.left, *node.comparators) for n in ast.walk(side) if isinstance(n, ast.Name)
                }
                if named & ANSWER_NAMES:
                    found.append(f"{path.relative_to(package)}:{node.lineno}")
    return found


def test_no_answer_kind_is_compared_by_name_outside_its_records(tmp_path):
    """What differs between a masked LM's, a classifier's, a reader's ... graph is its kind's (serving/kinds.py):
    the export, the graph checks and the served graph ask it, and compare no names."""
    assert not answer_comparisons(), answer_comparisons()
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "graph.py").write_text("if record.answers == SPANS:\n    pass\n")
    assert answer_comparisons(planted) == ["graph.py:1"]  # the check sees one


MAX_MODULE_LINES = 600


def test_no_module_grows_into_a_hall():
    """A module has one job: none past MAX_MODULE_LINES lines (a longer one is split by job, as tokenizer/ was)."""
    long = {
        name: n
        for name, path in package_modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_vectors_are_pooled_and_normalised_in_one_place():
    """A sentence vector is pooled by model/heads.py `pool` and made unit length by its `unit_length`: the head,
    the export graph, serving and search call them, and no other module normalises vectors its own way."""
    found = []
    for name, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                if called.endswith(("functional.normalize", "F.normalize", "linalg.norm")):
                    found.append(f"{name}:{node.lineno} {called}")
    assert [f for f in found if not f.startswith("model.heads:")] == [], found
    assert len(found) == 1  # unit_length's own
