"""Fine-tuning: learn small tasks completely, keep labels straight, agree with transformers, refuse bad input."""

from __future__ import annotations

import csv
import functools
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import bertforge as bertforge_package
from bertforge import BertForPreTraining, BertForSequenceClassification, load_model
from bertforge.data.batching import TextBatcher
from bertforge.errors import UserError
from bertforge.tasks import registry
from bertforge.tasks.classification import Classifier, Columns
from bertforge.tasks.finetune import finetune
from bertforge.tasks.targets import classification_metrics

from conftest import (
    ANIMALS,
    PEOPLE,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    quick_finetuning,
    save_random_model,
)

PLACES = ["the mat", "the river bank", "the garden", "the window"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, wordpiece_tokenizer):
    """A random encoder of two layers of width 48, no dropout: fine-tuning tests need a model, not a trained one."""
    shape = dict(hidden_size=48, num_layers=2, num_heads=4, intermediate_size=96, max_position_embeddings=64)
    directory = tmp_path_factory.mktemp("pretrained") / "model"
    return save_random_model(directory, wordpiece_tokenizer, **shape, hidden_dropout=0.0, attention_dropout=0.0)


def write_tsv(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


fast = functools.partial(quick_finetuning, epochs=25, seq_len=64)


def train_accuracy(model_dir, texts, pairs, labels) -> float:
    results = Classifier(model_dir).classify(texts, pairs)
    return float(np.mean([r["label"] == label for r, label in zip(results, labels)]))


def test_single_sentence_task_is_learned_completely(pretrained, tmp_path):
    rng = random.Random(0)
    rows = []
    for _ in range(48):
        kind = rng.choice(["animal", "person"])
        subject = rng.choice(ANIMALS if kind == "animal" else PEOPLE)
        rows.append((f"{subject} sat on {rng.choice(PLACES)}.", kind))
    write_tsv(tmp_path / "train.tsv", ["sentence", "label"], rows)
    write_tsv(tmp_path / "dev.tsv", ["sentence", "label"], rows[:10])
    summary = finetune(
        pretrained,
        "classification",
        tmp_path / "train.tsv",
        tmp_path / "dev.tsv",
        tmp_path / "out",
        fast(),
        Columns("sentence", "label"),
        progress=False,
    )
    assert summary["labels"] == ["animal", "person"]
    assert train_accuracy(tmp_path / "out" / "model", [r[0] for r in rows], None, [r[1] for r in rows]) == 1.0
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 25 and {"dev_accuracy", "dev_macro_f1", "dev_mcc"} <= set(json.loads(lines[0]))
    # --max-steps ends the run mid-epoch (48 examples in batches of 16: 3 steps an epoch) and scores dev there.
    capped = fast(max_steps=4)
    finetune(pretrained, "classification", tmp_path / "train.tsv", tmp_path / "dev.tsv", tmp_path / "capped", capped,
             Columns("sentence", "label"), progress=False)  # fmt: skip
    records = [json.loads(x) for x in (tmp_path / "capped" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["step"]) for r in records] == [(1, 3), (2, 4)]
    # --no-dev-every-epoch scores dev once, after the last epoch, and keeps that epoch's model.
    once = fast(epochs=3, dev_every_epoch=False)
    summary = finetune(pretrained, "classification", tmp_path / "train.tsv", tmp_path / "dev.tsv", tmp_path / "once",
                       once, Columns("sentence", "label"), progress=False)  # fmt: skip
    records = [json.loads(x) for x in (tmp_path / "once" / "metrics.jsonl").read_text().splitlines()]
    assert [("dev_accuracy" in r) for r in records] == [False, False, True]
    assert summary["best"]["epoch"] == 3
    saved = json.loads((tmp_path / "once" / "model" / "config.json").read_text())
    assert saved["bertforge_finetune"]["best_epoch"] == 3


def test_sentence_pair_task_is_learned_completely(pretrained, tmp_path):
    """The label is which of the two texts (segment A or B) is about an animal: it needs the pair layout."""
    rng = random.Random(1)
    rows = []
    for _ in range(48):
        animal = f"{rng.choice(ANIMALS)} sat on {rng.choice(PLACES)}."
        person = f"{rng.choice(PEOPLE)} looked at {rng.choice(PLACES)}."
        rows.append((animal, person, "first") if rng.random() < 0.5 else (person, animal, "second"))
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"a": a, "b": b, "y": y}) + "\n" for a, b, y in rows))
    summary = finetune(
        pretrained,
        "classification",
        tmp_path / "train.jsonl",
        tmp_path / "train.jsonl",
        tmp_path / "out",
        fast(),
        Columns("a", "y", "b"),
        progress=False,
    )
    assert summary["best"]["dev_accuracy"] == 1.0
    # The command line's three ways to give pairs answer as Classifier.classify(texts, pairs) does, and several
    # texts without pairs as it does too.
    model = tmp_path / "out" / "model"
    a, b = [r[0] for r in rows[:6]], [r[1] for r in rows[:6]]
    expected = Classifier(model).classify(a, b)

    def same(answers, wanted):
        assert [x["label"] for x in answers] == [x["label"] for x in wanted]
        for x, y in zip(answers, wanted):
            assert x["probabilities"] == pytest.approx(y["probabilities"], abs=1e-6)

    same([json.loads(bertforge_ok("classify", model, a[0], "--pair", b[0], "--json").stdout)], expected[:1])
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"a": x, "b": y}) + "\n" for x, y in zip(a, b)))
    columns = ["--text-column", "a", "--pair-column", "b"]
    same(json.loads(bertforge_ok("classify", model, "--input", tmp_path / "pairs.jsonl", *columns, "--json").stdout),
         expected)  # fmt: skip
    (tmp_path / "pairs.txt").write_text("".join(f"{x}\t{y}\n" for x, y in zip(a, b)))
    lines = bertforge_ok("classify", model, "--input", tmp_path / "pairs.txt", "--pair-column", "1", "--json")
    same(json.loads(lines.stdout), expected)
    same(json.loads(bertforge_ok("classify", model, *a[:3], "--json").stdout), Classifier(model).classify(a[:3]))
    # A classifier kept no masked-LM head: fill-mask is refused, not answered from a new random one.
    one_line_error(bertforge("fill-mask", model, "the [MASK] sat."), "no masked-LM head", "fine-tuned")
    assert (
        train_accuracy(tmp_path / "out" / "model", [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
        == 1.0
    )


def test_from_scratch_keeps_the_architecture_but_not_the_weights(pretrained, tmp_path):
    rows = [("the cat sat.", "a"), ("my friend sat.", "b")] * 8
    write_tsv(tmp_path / "t.tsv", ["s", "l"], rows)
    finetune(
        pretrained,
        "classification",
        tmp_path / "t.tsv",
        tmp_path / "t.tsv",
        tmp_path / "scratch",
        fast(epochs=1, from_scratch=True),
        Columns("s", "l"),
        progress=False,
    )
    finetune(
        pretrained,
        "classification",
        tmp_path / "t.tsv",
        tmp_path / "t.tsv",
        tmp_path / "pre",
        fast(epochs=1, lr=1e-9),
        Columns("s", "l"),
        progress=False,
    )
    scratch = Classifier(tmp_path / "scratch" / "model").model.state_dict()
    pre = Classifier(tmp_path / "pre" / "model").model.state_dict()
    original = load_model(BertForPreTraining, pretrained).state_dict()
    assert scratch.keys() - {"classifier.weight", "classifier.bias"} <= original.keys()
    word = "bert.embeddings.token.weight"
    torch.testing.assert_close(pre[word], original[word], rtol=1e-4, atol=1e-6)  # started from the pre-trained weights
    assert not torch.allclose(scratch[word], original[word])


def test_dropout_can_be_switched_on_for_fine_tuning(pretrained, tmp_path):
    """A model pre-trained without dropout is fine-tuned with it: training passes are stochastic; the config says so."""
    from bertforge.model.bert import set_dropout
    from bertforge.model.heads import BertForSequenceClassification
    from bertforge.tokenizer import load_tokenizer

    model = load_model(BertForSequenceClassification, pretrained, keep_heads=False, num_labels=2)
    tokenizer = load_tokenizer(pretrained)
    input_ids = torch.tensor([tokenizer.encode("the cat sat on the mat.").ids])  # (1, T)
    model.train()
    assert torch.equal(model(input_ids)[0], model(input_ids)[0])  # pre-trained with dropout 0
    set_dropout(model, 0.3, 0.3)
    assert not torch.equal(model(input_ids)[0], model(input_ids)[0])
    rows = [("the cat sat.", "a"), ("my friend sat.", "b")] * 8
    write_tsv(tmp_path / "t.tsv", ["s", "l"], rows)
    finetune(
        pretrained,
        "classification",
        tmp_path / "t.tsv",
        tmp_path / "t.tsv",
        tmp_path / "out",
        fast(epochs=1, dropout=0.2),
        Columns("s", "l"),
        progress=False,
    )
    saved = json.loads((tmp_path / "out" / "model" / "config.json").read_text())
    assert saved["hidden_dropout_prob"] == 0.2 and saved["attention_probs_dropout_prob"] == 0.2


def test_label_mapping_round_trips_and_transformers_agrees(pretrained, tmp_path):
    transformers = needs("transformers")
    rows = [
        ("the cat sat on the mat.", "positive"),
        ("my friend sat on the window.", "negative"),
        ("a bird sat.", "neutral"),
    ] * 6
    write_tsv(tmp_path / "t.tsv", ["text", "label"], rows)
    finetune(
        pretrained,
        "classification",
        tmp_path / "t.tsv",
        tmp_path / "t.tsv",
        tmp_path / "out",
        fast(epochs=3),
        Columns("text", "label"),
        progress=False,
    )
    model_dir = tmp_path / "out" / "model"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "neutral", "2": "positive"}
    assert config["label2id"] == {"negative": 0, "neutral": 1, "positive": 2}
    texts = [r[0] for r in rows[:3]] + ["the teacher walked to the garden."]
    ours = Classifier(model_dir)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        reference = theirs(**batch).logits.softmax(-1).numpy()
    results = ours.classify(texts)
    for r, probs in zip(results, reference):
        assert [r["probabilities"][label] for label in ("negative", "neutral", "positive")] == pytest.approx(
            probs.tolist(), abs=1e-5
        )
    pipe = transformers.pipeline("text-classification", model=str(model_dir))
    assert [p["label"] for p in pipe(texts)] == [r["label"] for r in results]


def test_metrics():
    predictions, labels = np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 0, 1])
    m = classification_metrics(predictions, labels, 2)
    assert m["accuracy"] == pytest.approx(0.8)
    assert m["f1"] == pytest.approx(0.8)  # tp 2, fp 1, fn 0
    assert m["mcc"] == pytest.approx((2 * 2 - 1 * 0) / np.sqrt(3 * 2 * 2 * 3))
    assert m["macro_f1"] == pytest.approx((0.8 + 0.8) / 2)


def test_error_paths_exit_2_with_one_line(pretrained, tmp_path):
    write_tsv(tmp_path / "train.tsv", ["sentence", "label"], [("the cat sat.", "0"), ("my friend sat.", "1")])
    write_tsv(tmp_path / "dev.tsv", ["sentence", "label"], [("the cat sat.", "2")])
    (tmp_path / "empty.tsv").write_text("sentence\tlabel\n")
    cases = [
        (
            [
                "--train",
                tmp_path / "train.tsv",
                "--dev",
                tmp_path / "train.tsv",
                "--text-column",
                "text",
                "--label-column",
                "label",
            ],
            "no column 'text'",
        ),
        (
            [
                "--train",
                tmp_path / "train.tsv",
                "--dev",
                tmp_path / "dev.tsv",
                "--text-column",
                "sentence",
                "--label-column",
                "label",
            ],
            "label '2'",
        ),
        (
            [
                "--train",
                tmp_path / "empty.tsv",
                "--dev",
                tmp_path / "dev.tsv",
                "--text-column",
                "sentence",
                "--label-column",
                "label",
            ],
            "empty",
        ),
        (
            [
                "--train",
                tmp_path / "nope.tsv",
                "--dev",
                tmp_path / "dev.tsv",
                "--text-column",
                "sentence",
                "--label-column",
                "label",
            ],
            "no such file",
        ),
    ]
    cases += [
        (["--train", tmp_path / "train.tsv", "--text-column", "sentence"], "or neither"),
        (["--task", "token-classification", "--train", tmp_path / "train.tsv"], "needs --dev"),
    ]
    for flags, message in cases:
        one_line_error(bertforge("finetune", pretrained, *flags, "--out", tmp_path / "out", "--quiet"), message)


def test_headerless_files_with_a_bom_and_the_classify_cli(pretrained, tmp_path):
    rows = "\ufeff" + "".join(f"{t}\t{y}\n" for t, y in [("the cat sat.", "yes"), ("my friend sat.", "no")] * 8)
    (tmp_path / "t.tsv").write_text(rows, encoding="utf-8")
    summary = finetune(
        pretrained,
        "classification",
        tmp_path / "t.tsv",
        tmp_path / "t.tsv",
        tmp_path / "out",
        fast(epochs=2),
        Columns("0", "1"),
        progress=False,
    )
    assert summary["labels"] == ["no", "yes"] and summary["train_examples"] == 16
    card = (tmp_path / "out" / "model" / "README.md").read_text()  # the model card says what was fine-tuned
    assert (
        'pipeline_tag: "text-classification"' in card and "- task: classification (one label per text or pair)" in card
    )
    assert "- labels: `no`, `yes`" in card and f"- fine-tuned from `{pretrained}`" in card
    best = summary["best"]
    assert f"dev scores (epoch {best['epoch']}): accuracy {best['dev_accuracy']:.4f}" in card
    result = json.loads(bertforge_ok("classify", tmp_path / "out" / "model", "the cat sat.", "--json").stdout)
    (expected,) = Classifier(tmp_path / "out" / "model").classify(["the cat sat."])
    assert result["label"] == expected["label"] and set(result["probabilities"]) == {"no", "yes"}
    assert result["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-6)

    # --out: the predictions for a file of texts as a table a spreadsheet opens, or as JSON lines
    (tmp_path / "texts.txt").write_text('the cat sat.\nmy friend sat, and "smiled".\n', encoding="utf-8")
    model, texts = tmp_path / "out" / "model", tmp_path / "texts.txt"
    expected = json.loads(bertforge_ok("classify", model, "--input", texts, "--json").stdout)
    bertforge_ok("classify", model, "--input", texts, "--out", tmp_path / "predictions.csv")
    with open(tmp_path / "predictions.csv", encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert [row["text"] for row in table] == [r["text"] for r in expected]  # a comma and quotes survive
    assert [row["label"] for row in table] == [r["label"] for r in expected]
    for row, r in zip(table, expected):
        assert {k: float(row[f"p_{k}"]) for k in r["probabilities"]} == pytest.approx(r["probabilities"], abs=1e-6)
    bertforge_ok("classify", model, "--input", texts, "--out", tmp_path / "predictions.jsonl")
    lines = (tmp_path / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == expected
    one_line_error(bertforge("classify", model, "--input", texts, "--out", tmp_path / "p.xlsx"), "p.xlsx", ".csv")
    one_line_error(bertforge("classify", model, "the cat sat.", "--out", tmp_path / "p.csv"), "--input")


def test_a_directory_of_classes_without_a_dev_file_is_learned_on_a_held_out_share(pretrained, tmp_path):
    """MR's layout (a file per class, a sentence per line), no --dev: 10% of each class is dev, and the model
    learns the task."""
    rng = random.Random(2)
    classes = tmp_path / "polarity"
    classes.mkdir()
    for label, subjects in (("pos", ANIMALS), ("neg", PEOPLE)):
        lines = [f"{rng.choice(subjects)} sat on {rng.choice(PLACES)}." for _ in range(30)]
        (classes / f"rt-polarity.{label}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = bertforge(
        "finetune", pretrained, "--train", classes, "--out", tmp_path / "out", "--epochs", "20", "--lr", "3e-3",
        "--batch-size", "16", "--max-seq-len", "64", "--device", "cpu", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["labels"] == ["neg", "pos"] and summary["dev_held_out_of_train"] is True
    assert (summary["train_examples"], summary["dev_examples"]) == (54, 6)
    assert summary["best"]["dev_accuracy"] == 1.0
    one_line_error(
        bertforge("classify", tmp_path / "out" / "model", "the cat sat.", "--threshold", "0.7"),
        "a threshold picks the labels of a multi-label model",
    )


class MentionsAnAnimal:
    """A task of one's own, as `register_task` takes it: its own file format (a text per line, the label read off
    the text), its own score, a head of bertforge's."""

    model_class = BertForSequenceClassification
    main_metric = "accuracy"
    names = ["no", "yes"]

    def __init__(self, tokenizer, train, dev, seq_len, cfg, columns):
        self.batcher = TextBatcher(tokenizer, seq_len)
        self.train, self.train_labels = self._read(train)
        self.dev, self.dev_labels = self._read(dev)

    def _read(self, path):
        texts = path.read_text(encoding="utf-8").splitlines()
        labels = torch.tensor([int(any(animal in text for animal in ANIMALS)) for text in texts])
        return self.batcher.encode(texts), labels

    def model_kwargs(self):
        return {"num_labels": 2}

    def train_batches(self, batch_size, rng):
        order = rng.permutation(len(self.train_labels)).tolist()
        return [
            {
                **self.batcher.batch(self.train, order[i : i + batch_size]),
                "labels": self.train_labels[order[i : i + batch_size]],
            }
            for i in range(0, len(order), batch_size)
        ]

    def evaluate(self, model, precision):
        model.eval()
        batch = self.batcher.batch(self.dev, list(range(len(self.dev_labels))))
        with torch.no_grad():
            logits, _ = model(**batch)
        return {"accuracy": float((logits.argmax(-1) == self.dev_labels).float().mean())}

    def saved_config(self):
        return {"id2label": dict(enumerate(self.names)), "label2id": {n: i for i, n in enumerate(self.names)}}

    def summary(self):
        return {"train_texts": len(self.train_labels)}


def test_a_task_of_ones_own_is_fine_tuned_saved_and_answered_like_a_built_in_one(pretrained, tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "TASKS", registry.TASKS.copy())  # the task is forgotten after the test
    bertforge_package.register_task("mentions-an-animal", MentionsAnAnimal)
    rng = random.Random(3)
    texts = [f"{rng.choice(ANIMALS + PEOPLE)} sat on {rng.choice(PLACES)}." for _ in range(48)]
    (tmp_path / "train.txt").write_text("\n".join(texts), encoding="utf-8")
    (tmp_path / "dev.txt").write_text("\n".join(texts[:12]), encoding="utf-8")
    out = tmp_path / "out"
    summary = finetune(pretrained, "mentions-an-animal", tmp_path / "train.txt", tmp_path / "dev.txt", out, fast())
    assert summary["train_texts"] == 48 and summary["main_metric"] == "accuracy"
    assert summary["best"]["dev_accuracy"] == 1.0
    answers = Classifier(out / "model").classify(["the dog sat on the mat.", "my friend sat on the mat."])
    assert [a["label"] for a in answers] == ["yes", "no"]
    with pytest.raises(UserError, match="'classification' is registered already"):
        bertforge_package.register_task("classification", MentionsAnAnimal)


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


class ReadingTimes:
    """The guide's task with a new head: a number for every token (here 1.0 on an animal's tokens, 0.0 elsewhere,
    read off the text), scored by R² on dev."""

    main_metric = "r2"

    def __init__(self, tokenizer, train, dev, seq_len, cfg, columns):
        self.batcher = TextBatcher(tokenizer, seq_len)
        self.animal_ids = torch.tensor(sorted({i for a in ANIMALS for i in tokenizer.encode(a).ids[1:-1]}))
        self.train = self.batcher.encode(train.read_text(encoding="utf-8").splitlines())
        self.dev = self.batcher.encode(dev.read_text(encoding="utf-8").splitlines())

    def _batch(self, encoded, rows):
        batch = self.batcher.batch(encoded, rows)
        values = torch.isin(batch["input_ids"], self.animal_ids).float()  # (B, T)
        return {**batch, "labels": values.masked_fill(batch["attention_mask"] == 0, float("nan"))}

    def model_kwargs(self):
        return {}

    def train_batches(self, batch_size, rng):
        order = rng.permutation(len(self.train)).tolist()
        return [self._batch(self.train, order[i : i + batch_size]) for i in range(0, len(order), batch_size)]

    def evaluate(self, model, precision):
        model.eval()
        batch = self._batch(self.dev, list(range(len(self.dev))))
        with torch.no_grad():
            values, _ = model(**{k: v for k, v in batch.items() if k != "labels"})
        real = batch["labels"].isfinite()
        target, got = batch["labels"][real], values[real]
        return {"r2": float(1 - ((got - target) ** 2).mean() / target.var())}

    def saved_config(self):
        return {}

    def summary(self):
        return {"train_texts": len(self.train)}


def test_the_guides_task_with_a_new_head_touches_only_its_own_files(pretrained, tmp_path, monkeypatch):
    """docs/architecture.md's walkthrough, run as written: a head `transformers` has no class for, its architecture
    record and its task, all from user code, are fine-tuned by the one loop, saved as the family's
    BertForTokenRegression with a card the record wrote, read back, and exported to a graph within tolerance."""
    from bertforge.families.architectures import ARCHITECTURES
    from bertforge.modelfiles.directory import load_model
    from bertforge.serving.export import export_model
    from bertforge.serving.kinds import KINDS

    block = re.search(r"### A task with a new head.*?```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    monkeypatch.setattr(registry, "TASKS", registry.TASKS.copy())  # the task is forgotten after the test
    task = type("ReadingTimes", (ReadingTimes,), {})  # its model_class is the guide's head, made below
    namespace = {"ReadingTimes": task}
    try:
        exec(block.group(1), namespace)  # the guide's own code, as a reader would paste it
        task.model_class = namespace["BertForTokenRegression"]
        rng = random.Random(5)
        texts = [f"{rng.choice(ANIMALS + PEOPLE)} sat on {rng.choice(PLACES)}." for _ in range(48)]
        (tmp_path / "train.txt").write_text("\n".join(texts), encoding="utf-8")
        (tmp_path / "dev.txt").write_text("\n".join(texts[:12]), encoding="utf-8")
        out = tmp_path / "out"
        summary = finetune(pretrained, "token-regression", tmp_path / "train.txt", tmp_path / "dev.txt", out, fast())
        assert summary["best"]["dev_r2"] > 0.5
        config = json.loads((out / "model" / "config.json").read_text())
        assert config["architectures"] == ["BertForTokenRegression"] and config["model_type"] == "bert"
        assert 'pipeline_tag: "token-classification"' in (out / "model" / "README.md").read_text()
        cls = namespace["BertForTokenRegression"]
        model = load_model(cls, out / "model")
        ids = torch.tensor([[2, 5, 6, 3]])
        assert model(ids)[0].shape == (1, 4)
        made = export_model(out / "model", tmp_path / "onnx")
        assert made.answers == "token-regression" and made.outputs == ["logits"] and made.max_difference < 1e-3
    finally:
        if "BertForTokenRegression" in ARCHITECTURES:
            ARCHITECTURES.unregister("BertForTokenRegression")
        if "token-regression" in KINDS:
            KINDS.unregister("token-regression")
