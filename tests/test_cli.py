"""One command language: every flag shows its default, one name per concept, --json wherever there are results."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings

import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig, save_model
from bertforge.cli import build_parser
from bertforge.errors import UserError
from bertforge.inference import load

from conftest import (
    bertforge,
    bertforge_ok,
    make_documents,
    needs,
    one_line_error,
    save_random_model,
    write_corpus,
)

# Verbs that print a result a program may want to read.
RESULT_VERBS = [
    "tokenizer train",
    "prepare",
    "data show",
    "data stats",
    "pretrain",
    "sweep",
    "evaluate",
    "fill-mask",
    "pll",
    "nsp",
    "embed",
    "finetune",
    "classify",
    "choose",
    "tag",
    "answer",
    "search",
    "neighbours",
    "score",
]
# Older spellings that still work but are no longer listed.
HIDDEN_ALIASES = ["--field", "--column", "--doc-field", "--max-seq-len", "--pairs", "--jsonl"]


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """ "tokenizer train" -> its parser, for every verb."""
    found = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
                return
        found[prefix] = parser

    walk(build_parser(), "")
    return found


def test_every_listed_flag_that_takes_a_value_shows_its_default():
    missing = []
    for name, parser in verb_parsers().items():
        assert parser.description, f"{name} has no description"
        assert "--help" in parser.format_help(), name  # renders: no stray % in a help text
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS or action.nargs == 0 or action.required:
                continue
            text = parser.formatter_class(prog="x")._get_help_string(action)
            if "default" not in text and action.default not in (None, argparse.SUPPRESS):
                missing.append(f"{name} {action.option_strings[0]}")
            if action.default is argparse.SUPPRESS and "(default:" not in (action.help or ""):
                missing.append(f"{name} {action.option_strings[0]}")
    assert not missing, missing


def test_one_flag_name_per_concept_everywhere():
    parsers = verb_parsers()
    listed = {
        name: {o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
        for name, p in parsers.items()
    }
    for verb in RESULT_VERBS:
        assert "--json" in listed[verb], verb
    for verb in ("tokenizer train", "prepare", "finetune", "classify", "nsp", "embed"):
        assert "--text-column" in listed[verb], verb
    for verb in ("prepare", "finetune", "classify", "nsp"):
        assert "--pair-column" in listed[verb], verb
    for verb in ("attention", "classify", "nsp", "plot-embeddings"):
        assert "--pair" in listed[verb], verb
    for verb in ("evaluate", "fill-mask", "nsp", "embed", "attention", "plot-embeddings", "classify"):
        assert {"--device", "--trust-pickle"} <= listed[verb], verb
    for verb in ("pretrain", "finetune", "data show"):
        assert "--seq-len" in listed[verb], verb
    for verb in ("tokenizer train", "prepare", "pretrain", "sweep", "finetune"):
        assert "--quiet" in listed[verb], verb
    for flags in listed.values():
        assert not flags & set(HIDDEN_ALIASES)


def test_older_spellings_still_work():
    parser = build_parser()
    old = parser.parse_args(
        ["prepare", "c.txt", "--tokenizer", "t", "--out", "d", "--field", "body", "--doc-field", "id"]
    )
    new = parser.parse_args(
        ["prepare", "c.txt", "--tokenizer", "t", "--out", "d", "--text-column", "body", "--doc-column", "id"]
    )
    assert (old.text_column, old.doc_column) == (new.text_column, new.doc_column) == ("body", "id")
    assert (
        parser.parse_args(
            [
                "finetune",
                "m",
                "--train",
                "a",
                "--dev",
                "b",
                "--text-column",
                "t",
                "--label-column",
                "l",
                "--out",
                "o",
                "--max-seq-len",
                "64",
            ]
        ).seq_len
        == 64
    )
    assert not hasattr(
        parser.parse_args(["pretrain", "--data", "d", "--out", "o"]), "pair_objective"
    )  # unset: the config decides


def test_fill_mask_never_answers_with_an_id_the_tokenizer_cannot_write(wordpiece_tokenizer, tmp_path):
    """A model table larger than its tokenizer: a warning at load, and only real tokens in the answers."""
    size = wordpiece_tokenizer.get_vocab_size()
    torch.manual_seed(0)
    model = BertForPreTraining(
        ModelConfig(vocab_size=size + 40, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )
    with torch.no_grad():
        model.mlm_head.bias[size:] = 50.0  # the rows without a token would win every prediction
    save_model(model, tmp_path / "m", wordpiece_tokenizer)
    done = bertforge_ok("fill-mask", tmp_path / "m", "the cat sat on the [MASK].", "--json")
    predictions = json.loads(done.stdout)["masks"][0]["predictions"]
    assert all(p["token"] is not None and p["token_id"] < size for p in predictions)
    assert f"tokenizer has {size} tokens" in done.stderr


def test_our_warnings_are_one_line_each_as_errors_are(wordpiece_tokenizer, tmp_path):
    """Python's format adds the file and line that raised a warning, and that line's source: nothing a user needs."""
    save_random_model(tmp_path / "m", wordpiece_tokenizer)  # its directory holds the tokenizer
    (tmp_path / "c.txt").write_text("One document.\n\nAnother document.\n", encoding="utf-8")
    done = bertforge_ok(
        "prepare", tmp_path / "c.txt", "--tokenizer", tmp_path / "m", "--out", tmp_path / "d", "--quiet"
    )
    warned = "bertforge prepare: warning: every document is larger than --valid-fraction 0.01 of the corpus; held out"
    lines = done.stderr.splitlines()  # the warning alone: no file, line number or source with it
    assert len(lines) == 1 and lines[0].startswith(warned), done.stderr
    assert done.stdout.startswith("prepared "), done.stdout  # the result, on stdout


def test_a_model_saved_without_its_tokenizer_says_so(tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(
        ModelConfig(vocab_size=100, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )
    with pytest.warns(UserWarning, match="without a tokenizer"):
        save_model(model, tmp_path / "m", None)
    one_line_error(bertforge("fill-mask", tmp_path / "m", "the [MASK] sat."), "saved without one")


def test_fill_mask_without_a_mask_exits_2_with_one_line(wordpiece_tokenizer, tmp_path):
    save_random_model(tmp_path / "m", wordpiece_tokenizer)
    one_line_error(bertforge("fill-mask", tmp_path / "m", "no blank here"), "[MASK]")
    with pytest.raises(UserError, match=r"no \[MASK\] to fill \(write it in capitals: \[MASK\]\)"):
        load(tmp_path / "m").fill_mask("the [mask] sat.")  # the tokenizer matches special tokens by case


def test_classify_and_nsp_read_tables_and_pair_lines(wordpiece_tokenizer, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_random_model(tmp_path / "m", wordpiece_tokenizer)
    (tmp_path / "pairs.txt").write_text(
        "the cat sat.\tthe dog ran.\na bird sang.\tthe mat was red.\n", encoding="utf-8"
    )
    (tmp_path / "pairs.csv").write_text(
        "first,second\nthe cat sat.,the dog ran.\na bird sang.,the mat was red.\n", encoding="utf-8"
    )
    from_lines = json.loads(bertforge_ok("nsp", tmp_path / "m", "--input", tmp_path / "pairs.txt", "--json").stdout)
    from_table = json.loads(
        bertforge_ok(
            "nsp",
            tmp_path / "m",
            "--input",
            tmp_path / "pairs.csv",
            "--text-column",
            "first",
            "--pair-column",
            "second",
            "--json",
        ).stdout
    )
    assert from_lines == from_table and len(from_lines) == 2
    single = json.loads(bertforge_ok("nsp", tmp_path / "m", "the cat sat.", "--pair", "the dog ran.", "--json").stdout)
    positional = json.loads(bertforge_ok("nsp", tmp_path / "m", "the cat sat.", "the dog ran.", "--json").stdout)
    assert single == positional == from_lines[0]
    # The probability is IsNext's (class 0 of BERT's head), as transformers computes it from the same directory.
    transformers = needs("transformers")
    reference = transformers.BertForPreTraining.from_pretrained(tmp_path / "m").eval()
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    for answer, (a, b) in zip(from_lines, [("the cat sat.", "the dog ran."), ("a bird sang.", "the mat was red.")]):
        with torch.no_grad():
            logits = reference(**their_tokenizer(a, b, return_tensors="pt")).seq_relationship_logits[0]
        is_next = logits.softmax(-1)[0].item()
        assert answer["is_next_prob"] == pytest.approx(is_next, abs=1e-5)
        assert answer["label"] == ("IsNext" if is_next >= 0.5 else "NotNext")
        assert abs(is_next - 0.5) > 1e-3  # far enough from a coin that the classes swapped would show


def test_a_mistake_on_the_command_line_is_the_verbs_short_usage_and_the_error():
    done = bertforge("pretrain", "--data", "d", "--max-steps", "many")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 2, done.stderr  # argparse's own printed every flag: ~50 lines
    assert lines[0] == "usage: bertforge pretrain --data DATA --out OUT [options]"
    assert lines[1].startswith("bertforge pretrain: error: argument --max-steps") and "--help" in lines[1]
    assert bertforge_ok("--version").stdout.startswith("bertforge ")
    # a flag no verb has: the verb's usage too (the top level's said nothing of what the verb needs)
    unknown = bertforge("tokenizer", "train", "corpus.txt", "--out", "tok", "--bogus").stderr.strip().splitlines()
    assert unknown == [
        "usage: bertforge tokenizer train CORPUS [...] --out OUT [options]",
        "bertforge tokenizer train: error: unrecognized arguments: --bogus (see bertforge tokenizer train --help)",
    ]


def test_durations_read_as_people_write_them():
    from bertforge.config import parse_duration

    written = {"90": 90, "90s": 90, "30m": 1800, "5min": 300, "5 min": 300, "1.5h": 5400, "2 hours": 7200,
               "1h30m": 5400, "45 secs": 45, "10minutes": 600}  # fmt: skip
    assert {text: parse_duration(text) for text in written} == written
    for wrong in ("", "soon", "5 parsecs", "-5m", "5m h"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(wrong)


def test_max_steps_beside_a_time_budget_is_refused_not_ignored(wordpiece_tokenizer, tmp_path):
    from bertforge.training.plan import plan_run

    with pytest.raises(UserError, match="--max-steps and --time-budget both"):
        plan_run(tmp_path, tmp_path / "run", train_values={"time_budget": 60.0, "max_steps": 100})
    assert plan_run.__module__ == "bertforge.training.plan"  # the rule lives in the library, where the API reaches it


def test_a_tokenizer_far_smaller_than_the_models_vocabulary_is_refused(wordpiece_tokenizer, tmp_path):
    size = wordpiece_tokenizer.get_vocab_size()
    model = BertForPreTraining(
        ModelConfig(vocab_size=size + 500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )
    save_model(model, tmp_path / "m", wordpiece_tokenizer)  # a tokenizer the model was not trained with
    one_line_error(bertforge("fill-mask", tmp_path / "m", "the [MASK] sat."), f"tokenizer has {size} tokens")


# Runs main in a fresh interpreter, then says whether torch was imported.
WITHOUT_TORCH = """
import sys
from bertforge.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("torch" in sys.modules)
"""


def test_verbs_that_run_no_model_start_without_importing_torch(tmp_path):
    """Importing torch takes seconds (3 s of `bertforge --version`'s 5 s, measured): --version, --help, `tokenizer
    train`, `prepare` and `data stats` never import it."""
    corpus, tok, data = tmp_path / "corpus.txt", tmp_path / "tok", tmp_path / "data"
    write_corpus(corpus, make_documents(n_docs=10, sentences=4))
    verbs = [
        ["--version"],
        ["pretrain", "--help"],
        ["tokenizer", "train", corpus, "--out", tok, "--vocab-size", "120", "--min-frequency", "1"],
        ["prepare", corpus, "--tokenizer", tok, "--out", data, "--valid-fraction", "0.2"],
        ["data", "stats", data],
    ]
    for args in verbs:
        done = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *map(str, args)], capture_output=True, text=True)
        assert done.stdout.splitlines()[-1] == "False", (args, done.stderr[-2000:])
    assert "tokens" in done.stdout and (data / "meta.json").is_file()  # each did its work
