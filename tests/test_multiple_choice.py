"""Multiple choice (SWAG): reading the files, (B, C, T) batches, the head, learning a small task, `choose`."""

from __future__ import annotations

import json
import random

import pytest
import torch

from bertforge import ModelConfig
from bertforge.errors import UserError
from bertforge.model.heads import BertForMultipleChoice
from bertforge.tasks.multiple_choice import ChoiceBatcher, ChoiceColumns, ChoiceExample, read_choice_examples

from conftest import ANIMALS, bertforge, bertforge_ok, one_line_error, save_random_model

SWAG_COLUMNS = ChoiceColumns("sent1", ["ending0", "ending1", "ending2"], "label", "sent2")
RIGHT, WRONG = "purred and slept .", ["talked and laughed .", "rained all day ."]


def swag_rows(n: int, seed: int) -> list[dict[str, str]]:
    """The right ending is the one about a cat's day, wherever the shuffle puts it: labels must follow it.

    (An ending that depends on the context asks the model to relate the two texts. A randomly initialised
    model learns that from a few dozen examples in some runs and not in others, in bertforge and in
    `transformers` alike; the head's use of each whole pair is tested on its own, below.)
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        endings = [RIGHT, *WRONG]
        rng.shuffle(endings)
        rows.append(
            {"sent1": f"{rng.choice(ANIMALS)} sat down .", "sent2": "then it"}
            | {f"ending{i}": e for i, e in enumerate(endings)}
            | {"label": str(endings.index(RIGHT))}
        )
    return rows


def write_csv(path, rows) -> None:
    header = list(rows[0])
    path.write_text(",".join(header) + "\n" + "".join(",".join(r[h] for h in header) + "\n" for r in rows))


def test_swag_csv_puts_the_lead_before_every_ending(tmp_path):
    write_csv(tmp_path / "t.csv", swag_rows(3, seed=0))
    examples = read_choice_examples(tmp_path / "t.csv", SWAG_COLUMNS)
    assert len(examples) == 3 and all(len(e.choices) == 3 for e in examples)
    first = swag_rows(3, seed=0)[0]
    assert examples[0].context == first["sent1"]
    assert examples[0].choices == [f"then it {first[f'ending{i}']}" for i in range(3)]
    assert examples[0].label == int(first["label"])


def test_jsonl_with_a_list_of_choices_and_letter_labels(tmp_path):
    rows = [
        {"question": "What purrs?", "options": ["a cat", "a rock"], "answer": "A"},
        {"question": "What flies?", "options": ["a stone", "a bird"], "answer": "b"},
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = read_choice_examples(tmp_path / "q.jsonl", ChoiceColumns("question", ["options"], "answer"))
    assert examples == [
        ChoiceExample("What purrs?", ["a cat", "a rock"], 0),
        ChoiceExample("What flies?", ["a stone", "a bird"], 1),
    ]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"q": "x", "c": ["a", "b"], "y": "2"}], ":1: label '2' points past the 2 choices"),
        ([{"q": "x", "c": ["a", "b"], "y": "yes"}], ":1: label 'yes' is neither"),
        ([{"q": "x", "c": ["a", "b"], "y": "0"}, {"q": "x", "c": ["a", "b", "c"], "y": "0"}], "same number of choices"),
        ([{"q": "x", "c": ["a"], "y": "0"}], "at least two"),
        ([{"q": "x", "y": "0"}], "missing field 'c'"),
    ],
)
def test_bad_choice_files_name_the_fault(tmp_path, rows, message):
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=message):
        read_choice_examples(tmp_path / "q.jsonl", ChoiceColumns("q", ["c"], "y"))


def test_batches_are_questions_by_choices_and_the_head_scores_each_pair_alone(wordpiece_tokenizer):
    batcher = ChoiceBatcher(wordpiece_tokenizer, 32)
    examples = [
        ChoiceExample("the cat sat .", ["it purred .", "it rained all day long ."], 0),
        ChoiceExample("my friend sat down .", ["she talked .", "it purred ."], 0),
    ]
    encoded, choices = batcher.encode(examples)
    batch = batcher.batch(encoded, choices, [1, 0])
    assert choices == 2 and batch["input_ids"].shape[:2] == (2, 2)  # (B, C, T), questions in the order asked
    flat = batcher.pairs.batch(encoded, [2, 3, 0, 1])
    assert torch.equal(batch["input_ids"].flatten(0, 1), flat["input_ids"])
    torch.manual_seed(0)
    config = ModelConfig(wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2,
                         intermediate_size=64, hidden_dropout=0.0, attention_dropout=0.0)  # fmt: skip
    model = BertForMultipleChoice(config).eval()
    with torch.no_grad():
        logits, loss = model(**batch, labels=torch.tensor([0, 1]))
        for q in range(2):  # each question's choices scored one pair at a time, without the others' padding
            for c in range(2):
                ids = encoded[[2, 3, 0, 1][q * 2 + c]]
                single = model.bert(torch.tensor([ids[0]]), torch.tensor([ids[1]])).pooled_output
                torch.testing.assert_close(logits[q, c], model.classifier(single)[0, 0], rtol=1e-5, atol=1e-5)
    assert loss == pytest.approx(torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1])).item(), rel=1e-5)


def test_a_swag_like_task_is_learned_and_choose_answers(wordpiece_tokenizer, tmp_path):
    model = save_random_model(tmp_path / "pretrained", wordpiece_tokenizer, hidden_size=48, num_layers=2,
                              num_heads=4, intermediate_size=96, max_position_embeddings=64,
                              hidden_dropout=0.0, attention_dropout=0.0)  # fmt: skip
    write_csv(tmp_path / "train.csv", swag_rows(48, seed=1))
    write_csv(tmp_path / "val.csv", swag_rows(12, seed=2))
    # --no-dev-every-epoch keeps the last epoch's model: `choose` below asks a trained one, not a lucky first epoch
    done = bertforge_ok(
        "finetune", model, "--task", "multiple-choice", "--train", tmp_path / "train.csv", "--dev",
        tmp_path / "val.csv", "--text-column", "sent1", "--pair-column", "sent2", "--choice-columns",
        "ending0,ending1,ending2", "--label-column", "label", "--out", tmp_path / "swag", "--epochs", "8",
        "--no-dev-every-epoch", "--lr", "3e-3", "--batch-size", "16", "--max-seq-len", "48", "--device", "cpu",
        "--json",
    )  # fmt: skip
    summary = json.loads(done.stdout)
    assert summary["choices"] == 3 and summary["best"]["dev_accuracy"] == 1.0
    saved = json.loads((tmp_path / "swag" / "model" / "config.json").read_text())
    assert saved["architectures"] == ["BertForMultipleChoice"]
    answer = json.loads(
        bertforge_ok(
            "choose",
            tmp_path / "swag" / "model",
            "--context",
            "the dog sat down .",
            "--choices",
            *[f"then it {e}" for e in (WRONG[0], RIGHT, WRONG[1])],
            "--json",
        ).stdout  # fmt: skip
    )
    assert answer["choice"] == 1 and sum(answer["probabilities"]) == pytest.approx(1.0)
    not_fine_tuned = bertforge("choose", model, "--context", "x", "--choices", "a", "b")
    one_line_error(not_fine_tuned, "not a multiple-choice model")
    missing = bertforge("finetune", model, "--task", "multiple-choice", "--train", tmp_path / "train.csv",
                        "--dev", tmp_path / "val.csv", "--text-column", "sent1", "--out", tmp_path / "x")  # fmt: skip
    one_line_error(missing, "--choice-columns")
