"""Multi-label classification: any number of labels per text, read from every layout people keep them in,
learned completely on a small task, scored by hand, and in agreement with `transformers` on loss and answers."""

from __future__ import annotations

import functools
import json
import random

import numpy as np
import pytest
import torch

from bertforge.errors import UserError
from bertforge.model.heads import MULTI_LABEL
from bertforge.studies.score import parse_task, score
from bertforge.tasks.classification import Classifier, Columns, read_examples
from bertforge.tasks.config import FinetuneConfig
from bertforge.tasks.finetune import finetune
from bertforge.tasks.targets import MIN_POSITIVES_TO_TUNE, LabelSet, best_thresholds, multi_label_metrics

from conftest import ANIMALS, PEOPLE, bertforge, needs, one_line_error, quick_finetuning, save_random_model

WEATHER = ["the wind", "the rain"]
INDOORS, OUTDOORS = ["the mat", "the window"], ["the garden", "the river bank"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, wordpiece_tokenizer):
    """A random encoder of test_finetune's shape: two layers of width 48, no dropout."""
    shape = dict(hidden_size=48, num_layers=2, num_heads=4, intermediate_size=96, max_position_embeddings=64)
    directory = tmp_path_factory.mktemp("pretrained") / "model"
    return save_random_model(directory, wordpiece_tokenizer, **shape, hidden_dropout=0.0, attention_dropout=0.0)


def scenes(n: int, seed: int) -> list[tuple[str, tuple[str, ...]]]:
    """Sentences with their labels: "animal" and "person" for who is in it (both, either or neither), "outdoors"
    for where; a sentence with nobody indoors has no label at all. Every sentence names two subjects, so that
    its length does not give its labels away (training batches are cut from texts of similar lengths)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        subjects = [rng.choice([ANIMALS, PEOPLE, WEATHER]) for _ in range(2)]
        outdoors = rng.random() < 0.5
        place = rng.choice(OUTDOORS if outdoors else INDOORS)
        labels = tuple(
            label for label, kind in (("animal", ANIMALS), ("outdoors", None), ("person", PEOPLE))
            if (kind is None and outdoors) or kind in subjects
        )  # fmt: skip
        rows.append((f"{rng.choice(subjects[0])} and {rng.choice(subjects[1])} sat on {place}.", labels))
    return rows


def write_labelled(path, rows) -> None:
    path.write_text("text\tlabels\n" + "".join(f"{t}\t{','.join(labels)}\n" for t, labels in rows), encoding="utf-8")


def fine_tuned(pretrained, tmp_path, train, dev, cfg: FinetuneConfig, task: str = "multi-label") -> dict:
    """`train` and `dev` rows as TSV files in tmp_path, fine-tuned into tmp_path/out; the summary."""
    write_labelled(tmp_path / "train.tsv", train)
    write_labelled(tmp_path / "dev.tsv", dev)
    files = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    return finetune(pretrained, task, *files, tmp_path / "out", cfg, Columns("text", "labels"), progress=False)


fast = functools.partial(quick_finetuning, epochs=60, seq_len=64)


# ---------------------------------------------------------------- reading


def test_every_layout_gives_the_same_label_sets(tmp_path):
    rows = [("the cat sat.", ("animal",)), ("my friend and the dog sat.", ("animal", "person")), ("wind.", ())]
    expected = [("the cat sat.", ("animal",)), ("my friend and the dog sat.", ("animal", "person")), ("wind.", ())]
    write_labelled(tmp_path / "cells.tsv", rows)
    (tmp_path / "lists.jsonl").write_text("".join(json.dumps({"t": t, "y": list(y)}) + "\n" for t, y in rows))
    (tmp_path / "flags.csv").write_text(
        "t,animal,person\n" + "".join(f'"{t}",{int("animal" in y)},{int("person" in y)}\n' for t, y in rows)
    )
    (tmp_path / "semicolons.tsv").write_text(
        "text\tlabels\n" + "".join(f"{t}\t{' ; '.join(y)}\n" for t, y in rows), encoding="utf-8"
    )
    layouts = {
        "cells.tsv": Columns("text", "labels"),
        "lists.jsonl": Columns("t", "y"),
        "flags.csv": Columns("t", label_columns=("animal", "person")),
        "semicolons.tsv": Columns("text", "labels", label_separator=";"),
    }
    for name, columns in layouts.items():
        examples = read_examples(tmp_path / name, columns, multi_label=True)
        assert [(e.text, e.label) for e in examples] == expected, name


def test_a_parquet_list_column_holds_the_labels(tmp_path):
    """GoEmotions as the Hub keeps it: a list of label ids per row."""
    pa, pq = needs("pyarrow"), needs("pyarrow.parquet")
    pq.write_table(pa.table({"text": ["calm.", "wow, thanks!"], "labels": [[], [26, 15]]}), tmp_path / "t.parquet")
    examples = read_examples(tmp_path / "t.parquet", Columns("text", "labels"), multi_label=True)
    assert [(e.text, e.label) for e in examples] == [("calm.", ()), ("wow, thanks!", ("26", "15"))]


def test_fasttext_lines_with_several_labels(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("__label__a __label__b  first  text\n\n__label__b second\n__label__a __label__a third\n")
    examples = read_examples(path, Columns(), multi_label=True)
    assert [(e.text, e.label) for e in examples] == [("first  text", ("a", "b")), ("second", ("b",)), ("third", ("a",))]
    with pytest.raises(UserError, match=r"train.txt:1: several labels on one line \(multi-label\): use --task multi"):
        read_examples(path, Columns())
    # TREC-style fine labels cut to coarse ones, kept once each
    (tmp_path / "fine.txt").write_text("__label__NUM:dist __label__NUM:date __label__LOC:city where\n")
    cut = read_examples(tmp_path / "fine.txt", Columns(label_until=":"), multi_label=True)
    assert cut[0].label == ("NUM", "LOC")


def test_bad_multi_label_input_is_refused_by_name(tmp_path):
    (tmp_path / "flags.csv").write_text("t,toxic\nhello,1\nyou,maybe\n")
    with pytest.raises(UserError, match=r"flags.csv:3: column 'toxic' holds 'maybe'; a label's own column holds 0"):
        read_examples(tmp_path / "flags.csv", Columns("t", label_columns=("toxic",)), multi_label=True)
    with pytest.raises(UserError, match="a 0/1 column per label is a multi-label table: use --task multi-label"):
        read_examples(tmp_path / "flags.csv", Columns("t", label_columns=("toxic",)))
    with pytest.raises(UserError, match="not both"):
        Columns("t", "y", label_columns=("toxic",))
    with pytest.raises(UserError, match="the label separator is empty"):
        Columns("t", "y", label_separator="")
    (tmp_path / "classes").mkdir()
    for name in ("pos", "neg"):
        (tmp_path / "classes" / name).write_text("a line\n")
    with pytest.raises(UserError, match="a directory of classes gives each text one label"):
        read_examples(tmp_path / "classes", Columns(), multi_label=True)
    with pytest.raises(UserError, match="dev.tsv: label 'plant' does not occur in the training file"):
        LabelSet([("animal",), ("person",)], [("plant",)], "dev.tsv")
    with pytest.raises(UserError, match="1 distinct label"):
        LabelSet([("animal",), ()], [()], "dev.tsv")


def test_label_sets_become_rows_of_zeros_and_ones():
    target = LabelSet([("b",), ("a", "c"), ()], [], "dev")
    assert target.names == ["a", "b", "c"]
    rows = target.encode([("c", "a"), (), ("b",)], "x")
    assert rows.tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]


def test_multi_label_metrics_by_hand():
    truth = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 0]], dtype=bool)
    predicted = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=bool)
    m = multi_label_metrics(predicted, truth)
    # per label (tp, fp, fn): a (2, 0, 0), b (1, 0, 1), c (0, 1, 1); summed (3, 1, 2)
    assert m["micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 1 + 2))
    assert m["macro_f1"] == pytest.approx((1.0 + 2 / 3 + 0.0) / 3)
    assert m["subset_accuracy"] == pytest.approx(1 / 4)


def test_each_label_gets_the_cut_with_its_best_f1():
    """Against every cut there is (above each distinct probability, and above all), with ties in the scores, a
    label no probability of which reaches 0.5, and a label too rare to fit."""
    rng = np.random.default_rng(0)
    truth = rng.random((200, 4)) < [0.3, 0.1, 0.5, 0.0]
    truth[:4, 3] = True  # 4 texts: under MIN_POSITIVES_TO_TUNE
    probabilities = np.round(rng.random((200, 4)) * 0.6 + 0.3 * truth, 2).astype(np.float32)  # ties
    probabilities[:, 1] *= 0.5  # label 1 never reaches 0.5
    thresholds = best_thresholds(probabilities, truth)
    assert MIN_POSITIVES_TO_TUNE > 4 and thresholds[3] == 0.5

    def f1(label: int, cut: float) -> float:
        return multi_label_metrics((probabilities[:, label] >= cut)[:, None], truth[:, label, None])["micro_f1"]

    for label in range(3):
        best = max(f1(label, cut) for cut in [*np.unique(probabilities[:, label]), np.inf])
        assert f1(label, thresholds[label]) == best > 0
        assert not np.any(probabilities[:, label] == thresholds[label])  # the cut lies between probabilities
    # at 0.5, label 1 would never be predicted; its own cut lies below every probability it takes in
    assert probabilities[:, 1].max() < 0.5 and thresholds[1] < 0.5


def test_tuned_thresholds_are_saved_with_the_best_epoch_and_used_by_classify(pretrained, tmp_path):
    dev = scenes(30, seed=1)
    # fp32: classify scores in fp32, and a loop scoring dev in bf16 (auto, on a CPU with fast bf16) gives
    # probabilities ~1e-4 off, which moved a cut lying among the near-tied probabilities of repeated texts
    cfg = fast(epochs=6, tune_thresholds=True, precision="fp32")
    summary = fine_tuned(pretrained, tmp_path, scenes(64, seed=0), dev, cfg)
    assert summary["main_metric"] == "tuned_micro_f1"
    records = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert summary["best"] == max(records, key=lambda r: r["dev_tuned_micro_f1"])
    # what is saved is what suits the saved model on dev: refitted from its own dev probabilities
    model_dir = tmp_path / "out" / "model"
    saved = json.loads((model_dir / "config.json").read_text())["label_thresholds"]
    ours = Classifier(model_dir)
    results = ours.classify([t for t, _ in dev])
    probabilities = np.array([[r["probabilities"][label] for label in ours.labels] for r in results])
    truth = LabelSet([y for _, y in dev], [], "dev").encode([y for _, y in dev], "x").numpy() > 0.5
    refitted = best_thresholds(probabilities, truth)
    # The training loop's dev pass and classify batch texts differently; padded sums may differ in the last bits
    # of fp32 (~1e-7), and a cut midway between two probabilities moves as much: the same cuts, the same decisions.
    saved_cuts = np.array([saved[label] for label in ours.labels])
    assert saved_cuts == pytest.approx(refitted, abs=1e-5)
    assert np.array_equal(probabilities >= saved_cuts, probabilities >= refitted)
    tuned = multi_label_metrics(probabilities >= saved_cuts, truth)
    assert tuned["micro_f1"] == pytest.approx(summary["best"]["dev_tuned_micro_f1"])  # as fine-tuning reported it
    assert tuned["micro_f1"] >= multi_label_metrics(probabilities >= 0.5, truth)["micro_f1"]
    for r in results:  # classify applies each label's own threshold, and --threshold overrides them all
        assert r["labels"] == [label for label, p in r["probabilities"].items() if p >= saved[label]]
    for r in ours.classify([t for t, _ in dev], threshold=0.5):
        assert r["labels"] == [label for label, p in r["probabilities"].items() if p >= 0.5]


def test_bad_thresholds_are_refused_by_name(pretrained, tmp_path):
    rows = [(text, labels[:1]) for text, labels in scenes(16, seed=0)]
    with pytest.raises(UserError, match="of multi-label and question-answering; --task classification has none"):
        fine_tuned(pretrained, tmp_path, rows, rows, fast(tune_thresholds=True), task="classification")
    fine_tuned(pretrained, tmp_path, scenes(16, seed=0), scenes(16, seed=0), fast(epochs=1, tune_thresholds=True))
    model = tmp_path / "out" / "model"
    config_path = model / "config.json"
    config = json.loads(config_path.read_text())
    # each label its own: 0 always gives a label, 1 never (a sigmoid does not reach 1 here)
    config_path.write_text(json.dumps({**config, "label_thresholds": {"animal": 0, "outdoors": 1, "person": 0}}))
    answers = Classifier(model).classify(["the cat sat.", "the rain on the river bank."])
    assert [r["labels"] for r in answers] == [["animal", "person"]] * 2
    for thresholds, message in (
        ({"animal": 0.5}, "must give a threshold for each label in id2label"),
        ({**config["label_thresholds"], "animal": 1.5}, "'animal' has 1.5, not a probability from 0 to 1"),
    ):
        config_path.write_text(json.dumps({**config, "label_thresholds": thresholds}))
        with pytest.raises(UserError, match=message):
            Classifier(model)


# ---------------------------------------------------------------- learning and interop


def test_a_multi_label_task_is_learned_and_transformers_agrees(pretrained, tmp_path):
    transformers = needs("transformers")
    rows = scenes(64, seed=0)
    summary = fine_tuned(pretrained, tmp_path, rows, scenes(24, seed=1), fast())
    assert summary["labels"] == ["animal", "outdoors", "person"] and summary["main_metric"] == "micro_f1"
    # A tiny random encoder learns three labels at once slowly (transformers' BertForSequenceClassification in
    # the same loop too), and the seeds differ (dev micro-F1 0.91 to 0.98 over four), so the bar is well above
    # what saying yes to every label scores, not perfection.
    truth = LabelSet([y for _, y in rows], [], "dev").encode([y for _, y in scenes(24, seed=1)], "x").numpy() > 0.5
    every_label = multi_label_metrics(np.ones_like(truth), truth)["micro_f1"]
    assert every_label < 0.8 and summary["best"]["dev_micro_f1"] > every_label + 0.1
    model_dir = tmp_path / "out" / "model"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["problem_type"] == MULTI_LABEL
    ours = Classifier(model_dir)
    results = ours.classify([t for t, _ in rows])
    for r in results:
        assert r["labels"] == [label for label, p in r["probabilities"].items() if p >= 0.5]
    right = [label in y for r, (_, y) in zip(results, rows) for label in r["probabilities"] if label in r["labels"]]
    assert np.mean(right) > 0.85  # precision on the training texts

    # transformers reads problem_type: sigmoid answers and its BCE loss, on the same weights
    texts = [t for t, _ in rows[:6]]
    pipe = transformers.pipeline("text-classification", model=str(model_dir), top_k=None)
    for r, answers in zip(ours.classify(texts), pipe(texts)):
        theirs = {a["label"]: a["score"] for a in answers}
        assert r["probabilities"] == pytest.approx(theirs, abs=1e-5)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    batch = transformers.AutoTokenizer.from_pretrained(model_dir)(texts, padding=True, return_tensors="pt")
    targets = LabelSet([y for _, y in rows], [], "dev").encode([y for _, y in rows[:6]], "x")
    with torch.no_grad():
        reference = hf(**batch, labels=targets).loss
        _, loss = ours.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels=targets)
    torch.testing.assert_close(loss, reference, atol=1e-6, rtol=1e-5)


def test_multi_label_cli_holds_out_dev_and_classify_lists_the_labels(pretrained, tmp_path):
    rows = scenes(80, seed=2)
    (tmp_path / "train.csv").write_text(
        "text,animal,person,outdoors\n"
        + "".join(f"{t},{int('animal' in y)},{int('person' in y)},{int('outdoors' in y)}\n" for t, y in rows)
    )
    done = bertforge(
        "finetune", str(pretrained), "--task", "multi-label", "--train", str(tmp_path / "train.csv"),
        "--text-column", "text", "--label-columns", "animal,person,outdoors", "--out", str(tmp_path / "out"),
        "--epochs", "3", "--lr", "3e-3", "--batch-size", "16", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["dev_held_out_of_train"] and summary["dev_examples"] == 8 and summary["multi_label"]
    assert {"dev_micro_f1", "dev_macro_f1", "dev_subset_accuracy"} <= set(summary["best"])
    done = bertforge("classify", str(tmp_path / "out" / "model"), "the wind and the rain sat on the mat.", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer["probabilities"]) == {"animal", "outdoors", "person"}
    assert answer["labels"] == [label for label, p in answer["probabilities"].items() if p >= 0.5]
    done = bertforge("classify", str(tmp_path / "out" / "model"), "the wind and the rain sat on the mat.")
    assert done.stdout.split()[0] == (",".join(answer["labels"]) or "(none)")
    # --threshold: 0 gives every label, 1 none (a sigmoid never reaches 1 here)
    model = str(tmp_path / "out" / "model")
    everything, nothing = (
        json.loads(bertforge("classify", model, "the cat.", "--threshold", t, "--json").stdout) for t in ("0", "1")
    )
    assert everything["labels"] == ["animal", "outdoors", "person"] and nothing["labels"] == []
    wrong = bertforge("classify", str(tmp_path / "out" / "model"), "the cat.", "--threshold", "1.5")
    assert wrong.returncode == 2 and "--threshold: 1.5 is not between 0 and 1" in wrong.stderr
    one_line_error(
        bertforge(
            "finetune",
            str(pretrained),
            "--train",
            str(tmp_path / "train.csv"),
            "--text-column",
            "text",
            "--label-columns",
            "animal,person",
            "--out",
            str(tmp_path / "bad"),
        ),  # fmt: skip
        "use --task multi-label",
    )


def test_score_reads_a_multi_label_task_of_your_own(tmp_path):
    (tmp_path / "t.csv").write_text("text,a,b\nx,1,0\n")
    task = parse_task(f"tox={tmp_path / 't.csv'}:task=multi-label,text=text,labels=a+b")
    assert (task.kind, task.metric, task.dev) == ("multi-label", "micro_f1", None)
    assert task.columns.label_columns == ("a", "b")
    task = parse_task(f"emo={tmp_path / 't.csv'}:task=multi-label,text=text,label=a,separator=;")
    assert task.columns.label_separator == ";"


def test_score_tunes_thresholds_where_asked_and_refuses_tune_elsewhere(pretrained, tmp_path):
    write_labelled(tmp_path / "train.tsv", scenes(64, seed=0))
    write_labelled(tmp_path / "dev.tsv", scenes(30, seed=1))
    spec = f"emo={tmp_path / 'train.tsv'},{tmp_path / 'dev.tsv'}:task=multi-label,text=text,label=labels"
    task = parse_task(f"{spec},tune=yes")
    assert (task.metric, task.tune_thresholds) == ("tuned_micro_f1", True)
    assert not parse_task(spec).tune_thresholds
    rows = score(pretrained, [task], tmp_path / "score", fast(epochs=4), seeds=1, progress=False)
    assert [r["metric"] for r in rows if r["main"]] == ["tuned_micro_f1"]
    assert {"micro_f1", "tuned_micro_f1"} <= {r["metric"] for r in rows}  # the score at 0.5 is kept beside it
    (run,) = (tmp_path / "score" / "emo").glob("pre-trained/*/seed_0")
    best = json.loads((run / "summary.json").read_text())["best"]
    by_metric = {r["metric"]: r["median"] for r in rows}
    assert (by_metric["tuned_micro_f1"], by_metric["micro_f1"]) == (best["dev_tuned_micro_f1"], best["dev_micro_f1"])
    assert set(json.loads((run / "model" / "config.json").read_text())["label_thresholds"]) == {
        "animal",
        "outdoors",
        "person",
    }
    (tmp_path / "squad").mkdir()
    for name in ("train-v2.0.json", "dev-v2.0.json"):
        (tmp_path / "squad" / name).write_text("{}")
    squad = parse_task(f"squad={tmp_path / 'squad'}:tune=yes")
    assert (squad.kind, squad.metric, squad.tune_thresholds) == ("question-answering", "tuned_f1", True)
    refused = {
        f"sst2={tmp_path}:tune=yes": "not classification",
        f"{spec.replace('multi-label', 'classification')},tune=yes": "not classification",
        f"{spec},tune=maybe": "tune is yes or no",
        f"squad={tmp_path / 'squad'}:text=question": "squad is a known task",
    }
    for bad, message in refused.items():
        with pytest.raises(UserError, match=message):
            parse_task(bad)
    with pytest.raises(UserError, match="metric=f1 is not one of its scores: micro_f1, macro_f1"):
        score(pretrained, [parse_task(f"{spec},metric=f1")], tmp_path / "score", fast(epochs=4), 1, progress=False)
