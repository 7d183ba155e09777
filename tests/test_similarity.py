"""Sentence similarity: the two losses, learning matching and scored pairs, and the saved model's vectors in
`bertforge embed`, `transformers` and Sentence-Transformers' layout."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertforge import Classifier, Columns, ModelConfig
from bertforge.engine.runtime import MixedPrecision
from bertforge.errors import UserError
from bertforge.model.heads import BertForSentenceEmbedding
from bertforge.modelfiles.directory import load_model
from bertforge.studies.score import parse_task
from bertforge.tasks.config import FinetuneConfig
from bertforge.tasks.finetune import finetune
from bertforge.tasks.similarity import PairColumns, SimilarityTask, nearest, read_pairs, retrieval_metrics

from conftest import OBJECTS, SUBJECTS, VERBS, bertforge, bertforge_ok, needs, one_line_error, save_random_model

SMALL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def pair_rows(n: int, seed: int, scored: bool = False) -> list[dict[str, str]]:
    """A sentence and another with the same subject and two objects but another verb: a match is read from three
    of four slots (8 x 8 x 8 ways, so dev pairs rarely share them). A scored row's second sentence redraws each
    slot of the first with even odds, and its score is the number of slots the two share (0-4)."""
    rng = random.Random(seed)
    words = (SUBJECTS, VERBS, OBJECTS, OBJECTS)
    rows = []
    for _ in range(n):
        slots = [rng.choice(choices) for choices in words]
        if scored:
            other = [rng.choice(choices) if rng.random() < 0.5 else slot for slot, choices in zip(slots, words)]
            score = sum(a == b for a, b in zip(slots, other))
        else:
            other = [slots[0], rng.choice([v for v in VERBS if v != slots[1]]), *slots[2:]]
        rows.append({"a": "{} {} {} and {}.".format(*slots), "b": "{} {} {} and {}.".format(*other)})
        if scored:
            rows[-1]["score"] = str(score)
    return rows


def write_tsv(path, rows) -> None:
    header = list(rows[0])
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r[h] for h in header) + "\n" for r in rows))


def test_the_two_losses_are_their_definitions():
    """In-batch negatives: cross-entropy of each first text over every partner, its own the target. CoSENT:
    log(1 + sum over pairs scored y_i > y_j of exp(scale (cos_j - cos_i)))."""
    torch.manual_seed(0)
    model = BertForSentenceEmbedding(ModelConfig(vocab_size=50, **SMALL)).eval()
    input_ids = torch.randint(5, 50, (8, 12))  # 4 pairs: rows 0-3 the first texts, 4-7 their partners
    mask = torch.ones_like(input_ids)
    mask[1, 9:] = 0
    with torch.no_grad():
        vectors = F.normalize(model.embed(input_ids, None, mask), dim=-1)
        first, second = vectors[:4], vectors[4:]
        cosine, matching = model(input_ids, None, mask)
        torch.testing.assert_close(cosine, (first * second).sum(-1))
        expected = F.cross_entropy(20.0 * first @ second.T, torch.arange(4))
        assert matching.item() == pytest.approx(expected.item(), rel=1e-5)
        scores = torch.tensor([3.0, 1.0, 1.0, 0.0])
        _, cosent = model(input_ids, None, mask, labels=scores)
        terms = [20.0 * (cosine[j] - cosine[i]) for i in range(4) for j in range(4) if scores[i] > scores[j]]
        assert cosent.item() == pytest.approx(torch.log(1 + torch.stack(terms).exp().sum()).item(), rel=1e-5)
        # the mean leaves padding out: row 1's vector is the mean of its first 9 tokens alone
        alone = model.bert(input_ids[1:2, :9]).sequence_output.mean(1)
        torch.testing.assert_close(model.embed(input_ids, None, mask)[1], alone[0], rtol=1e-5, atol=1e-5)


def test_retrieval_counts_where_the_partner_ranks():
    first = np.eye(3, dtype=np.float32)
    second = np.array([[1, 0, 0], [0, 0.5, 0.9], [0, 0.9, 0.5]], dtype=np.float32)  # 2 and 3 swapped a little
    assert retrieval_metrics(first, second) == {"recall_at_1": pytest.approx(1 / 3), "mrr": pytest.approx(2 / 3)}


def test_nearest_ranks_by_cosine_a_chunk_of_queries_at_a_time():
    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(50, 8)), rng.normal(size=(300, 8))  # 300 queries: two chunks of 256
    indices, cosines = nearest(queries, 3.0 * corpus, 4)  # a vector's length does not count
    unit = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in (queries, corpus)]
    reference = unit[0] @ unit[1].T  # (300, 50)
    np.testing.assert_array_equal(indices, np.argsort(-reference, axis=1)[:, :4])
    np.testing.assert_allclose(cosines, np.take_along_axis(reference, indices, 1), rtol=1e-6)
    assert nearest(queries[:2], corpus[:3], 10)[0].shape == (2, 3)  # never more than the corpus holds


def test_matching_pairs_are_learned_and_embed_pools_as_the_model_was_trained(wordpiece_tokenizer, tmp_path):
    pretrained = save_random_model(tmp_path / "pretrained", wordpiece_tokenizer, **SMALL)
    write_tsv(tmp_path / "pairs.tsv", pair_rows(240, seed=1))
    held_out = SimilarityTask(wordpiece_tokenizer, tmp_path / "pairs.tsv", None, 64, PairColumns("a", "b", None), 0.2)
    untrained = load_model(BertForSentenceEmbedding, pretrained, keep_heads=False)
    before = held_out.evaluate(untrained, MixedPrecision("cpu", "fp32"))  # the same 48 dev pairs as finetune's
    done = bertforge_ok(
        "finetune", pretrained, "--task", "sentence-similarity", "--train", tmp_path / "pairs.tsv",
        "--text-column", "a", "--pair-column", "b", "--out", tmp_path / "search", "--epochs", "4", "--lr", "3e-3",
        "--batch-size", "16", "--dropout", "0", "--dev-fraction", "0.2", "--device", "cpu", "--json",
    )  # fmt: skip
    summary = json.loads(done.stdout)
    assert summary["main_metric"] == "recall_at_1" and summary["dev_pairs"] == 48 and not summary["scored"]
    metrics = [json.loads(line) for line in (tmp_path / "search" / "metrics.jsonl").read_text().splitlines()]
    # Shared words alone find two thirds of the partners at random weights (a mean of word vectors): 0.667 here.
    # Training finds 0.92-0.98 over six data orders, and one epoch nearly as many as four, so that later epochs
    # tied the first on one CPU's kernels: the test compares with the untrained model instead.
    assert metrics[-1]["dev_recall_at_1"] >= before["recall_at_1"] + 0.2, (before, metrics[-1])

    saved = tmp_path / "search" / "model"
    config = json.loads((saved / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert json.loads((saved / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert [m["path"] for m in json.loads((saved / "modules.json").read_text())] == ["", "1_Pooling"]

    texts = ["the cat sat on the mat.", "my friend painted a small boat.", "the child found the money."]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    bertforge_ok(
        "embed", saved, "--input", tmp_path / "texts.txt", "--out", tmp_path / "vectors.npy", "--precision", "fp32"
    )
    ours = np.load(tmp_path / "vectors.npy")  # (3, H), mean-pooled without being asked
    transformers = needs("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(saved)
    encoder = transformers.AutoModel.from_pretrained(saved).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**batch).last_hidden_state  # (3, T, H)
    weights = batch["attention_mask"].unsqueeze(-1).float()
    theirs = ((hidden * weights).sum(1) / weights.sum(1)).numpy()  # what Sentence-Transformers' Pooling computes
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)

    # search: each query's partner among unseen pairs' second sentences; scores are the vectors' cosines, best first
    fresh = pair_rows(30, seed=5)
    (tmp_path / "queries.txt").write_text("".join(r["a"] + "\n" for r in fresh))
    write_tsv(tmp_path / "corpus.tsv", [{"id": str(i), "sentence": r["b"]} for i, r in enumerate(fresh)])
    corpus_flags = "--corpus", tmp_path / "corpus.tsv", "--text-column", "sentence", "--precision", "fp32"
    done = bertforge_ok("search", saved, "--queries", tmp_path / "queries.txt", *corpus_flags, "--top-k", "3", "--json")
    found = json.loads(done.stdout)
    assert [f["query"] for f in found] == [r["a"] for r in fresh] and all(len(f["results"]) == 3 for f in found)
    assert np.mean([f["results"][0]["index"] == i for i, f in enumerate(found)]) >= 0.9
    bertforge_ok(
        "embed", saved, "--input", tmp_path / "queries.txt", "--out", tmp_path / "q.npy", "--precision", "fp32"
    )
    bertforge_ok("embed", saved, "--input", tmp_path / "corpus.tsv", "--text-column", "sentence", "--out",
                 tmp_path / "c.npy", "--precision", "fp32")  # fmt: skip
    queries, corpus = (
        v / np.linalg.norm(v, axis=1, keepdims=True) for v in map(np.load, (tmp_path / "q.npy", tmp_path / "c.npy"))
    )
    cosines = queries @ corpus.T  # (30, 30)
    for q, f in enumerate(found):  # the three highest cosines, each the cosine of the text it names
        indices, scores = [hit["index"] for hit in f["results"]], [hit["score"] for hit in f["results"]]
        assert scores == pytest.approx(cosines[q, indices].tolist(), abs=1e-5)
        assert scores == pytest.approx(np.sort(cosines[q])[::-1][:3].tolist(), abs=1e-5)
        assert [hit["text"] for hit in f["results"]] == [fresh[i]["b"] for i in indices]
    again = bertforge_ok("search", saved, "--queries", tmp_path / "queries.txt", *corpus_flags, "--top-k", "3",
                         "--json", "--vectors", tmp_path / "c.npy")  # fmt: skip
    assert [[h["index"] for h in f["results"]] for f in json.loads(again.stdout)] == [
        [h["index"] for h in f["results"]] for f in found
    ]
    one = bertforge_ok("search", saved, fresh[0]["a"], *corpus_flags, "--top-k", "1")
    assert one.stdout.splitlines() == [fresh[0]["a"], f"  {found[0]['results'][0]['score']:.3f}  {fresh[0]['b']}"]
    wrong = bertforge("search", saved, "x", *corpus_flags, "--vectors", tmp_path / "vectors.npy")  # another file's
    one_line_error(wrong, "were they embedded from this corpus with this model?")

    no_head = bertforge("fill-mask", saved, "the [MASK] sat.")
    one_line_error(no_head, "fine-tuned for sentence similarity")
    (tmp_path / "held_out.txt").write_text("the cat sat on the mat.\n")
    not_evaluated = bertforge("evaluate", saved, "--data", tmp_path / "held_out.txt")
    one_line_error(not_evaluated, "no masked-LM head")


def test_scored_pairs_learn_the_order_of_their_scores(wordpiece_tokenizer, tmp_path):
    """Shared words alone order the scores somewhat at random weights (a mean of word vectors); training on the
    scores must order them clearly better."""
    pretrained = save_random_model(tmp_path / "pretrained", wordpiece_tokenizer, **SMALL)
    write_tsv(tmp_path / "train.tsv", pair_rows(640, seed=1, scored=True))
    write_tsv(tmp_path / "dev.tsv", pair_rows(80, seed=2, scored=True))
    columns = PairColumns("a", "b", "score")
    task = SimilarityTask(wordpiece_tokenizer, tmp_path / "train.tsv", tmp_path / "dev.tsv", 64, columns, 0.1)
    untrained = load_model(BertForSentenceEmbedding, pretrained, keep_heads=False)
    before = task.evaluate(untrained, MixedPrecision("cpu", "fp32"))["spearman"]
    # lr 1e-3: 0.86-0.89 over four data orders from 0.77 untrained; 3e-3 reached 0.82-0.86
    cfg = FinetuneConfig(epochs=6, lr=1e-3, batch_size=16, dropout=0.0, device="cpu")
    summary = finetune(pretrained, "sentence-similarity", tmp_path / "train.tsv", tmp_path / "dev.tsv",
                       tmp_path / "sts", cfg, columns, progress=False)  # fmt: skip
    assert summary["main_metric"] == "spearman" and summary["scored"]
    assert summary["best"]["dev_spearman"] >= before + 0.05, (before, summary["best"])


def test_bad_pair_files_and_specs_name_the_fault(wordpiece_tokenizer, tmp_path):
    (tmp_path / "p.tsv").write_text("a\tb\tscore\nx y\tz\tmany\n")
    with pytest.raises(UserError, match=r"p\.tsv:2: score 'many' is not a number"):
        read_pairs(tmp_path / "p.tsv", PairColumns("a", "b", "score"))
    model = save_random_model(tmp_path / "m", wordpiece_tokenizer)
    missing = bertforge("finetune", model, "--task", "sentence-similarity", "--train", tmp_path / "p.tsv",
                        "--text-column", "a", "--out", tmp_path / "x")  # fmt: skip
    one_line_error(missing, "--pair-column")
    spec = parse_task(f"qa={tmp_path / 'p.tsv'}:task=sentence-similarity,text=a,pair=b")
    assert spec.metric == "recall_at_1" and spec.dev is None and spec.columns == PairColumns("a", "b", None)
    assert parse_task(f"sts={tmp_path / 'p.tsv'}:task=sentence-similarity,text=a,pair=b,label=score").metric == (
        "spearman"
    )
    with pytest.raises(UserError, match="text=COL, pair=COL"):
        parse_task(f"qa={tmp_path / 'p.tsv'}:task=sentence-similarity,text=a")


def test_a_cross_encoder_reranks_searchs_hits_by_its_own_score(wordpiece_tokenizer, tmp_path):
    """`search --rerank`: the vector search finds --candidates hits, a classifier fine-tuned on (query, text) pairs
    scores each, and the best --top-k by that score come back, each with the cosine it was found by. Here a text is
    relevant to a query (a subject) when its own subject is of the same kind, an animal or a person: the classifier
    must read both texts together, which is what a cross-encoder does and a pair of vectors cannot."""
    animals = set(SUBJECTS[:3])  # the cat, the dog, a bird; the rest are people
    rng = random.Random(3)

    def sentence() -> tuple[str, str]:
        subject = rng.choice(SUBJECTS)
        return subject, f"{subject} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."

    def relevant(query: str, subject: str) -> bool:
        return (query in animals) == (subject in animals)

    encoder = save_random_model(tmp_path / "encoder", wordpiece_tokenizer, **{**SMALL, "num_layers": 2})
    rows = []
    for _ in range(960):
        query, (subject, text) = rng.choice(SUBJECTS), sentence()
        rows.append({"query": query, "text": text, "label": str(int(relevant(query, subject)))})
    write_tsv(tmp_path / "relevance.tsv", rows)
    # 960 rows at lr 1e-3 learned the relation for each of 12 (seed, data) pairs tried; 480 rows at 3e-3, the old
    # setting, for 1 of 4, which made this test fail on one CPU and pass on another.
    settings = FinetuneConfig(epochs=8, lr=1e-3, batch_size=16, dropout=0.0, dev_fraction=0.1, device="cpu")
    finetune(encoder, "classification", tmp_path / "relevance.tsv", None, tmp_path / "cross", settings,
             Columns("query", "label", pair="text"), progress=False)  # fmt: skip
    cross = tmp_path / "cross" / "model"

    queries = SUBJECTS[:2] + SUBJECTS[3:5]
    subjects, texts = zip(*(sentence() for _ in range(20)))
    (tmp_path / "queries.txt").write_text("".join(q + "\n" for q in queries))
    (tmp_path / "corpus.txt").write_text("".join(t + "\n" for t in texts))
    corpus = "--corpus", tmp_path / "corpus.txt", "--precision", "fp32"
    flags = "--queries", tmp_path / "queries.txt", *corpus, "--json"
    found = json.loads(bertforge_ok("search", encoder, *flags, "--top-k", "8").stdout)
    reranked = json.loads(bertforge_ok("search", encoder, *flags, "--top-k", "3", "--rerank", cross,
                                       "--candidates", "8").stdout)  # fmt: skip
    classifier = Classifier(cross)
    for by_cosine, by_cross in zip(found, reranked):
        hits = by_cross["results"]
        assert [h["rank"] for h in hits] == [1, 2, 3]
        candidates = {h["index"]: h["score"] for h in by_cosine["results"]}
        assert {h["index"] for h in hits} <= candidates.keys()  # re-ranked from the vector search's 8, not beyond
        assert [h["cosine"] for h in hits] == pytest.approx([candidates[h["index"]] for h in hits], abs=1e-6)
        every = classifier.relevance(by_cross["query"], [texts[i] for i in candidates])
        assert [h["score"] for h in hits] == pytest.approx(sorted(every, reverse=True)[:3], abs=1e-5)
        assert [h["score"] for h in hits] == pytest.approx(
            [p["probabilities"]["1"] for p in classifier.classify([by_cross["query"]] * 3, [h["text"] for h in hits])]
        )
    # learned: every query's three hits among all 20 texts are of its kind
    everything = json.loads(bertforge_ok("search", encoder, *flags, "--top-k", "3", "--rerank", cross,
                                         "--candidates", "20").stdout)  # fmt: skip
    kinds = [relevant(f["query"], subjects[h["index"]]) for f in everything for h in f["results"]]
    assert np.mean(kinds) >= 0.9, kinds
    text = bertforge_ok("search", encoder, queries[0], *corpus, "--top-k", "1", "--rerank", cross,
                        "--candidates", "8").stdout  # fmt: skip
    assert text.splitlines()[1].endswith(f"(cosine {reranked[0]['results'][0]['cosine']:.3f})")

    one_line_error(bertforge("search", encoder, "x", *corpus, "--rerank", cross, "--relevant-label", "relevant"),
                   "no label 'relevant'", "its labels: 0, 1", "--relevant-label")  # fmt: skip
    one_line_error(bertforge("search", encoder, "x", *corpus, "--relevant-label", "1"), "--rerank")
    one_line_error(bertforge("search", encoder, "x", *corpus, "--rerank", cross, "--top-k", "9", "--candidates", "8"),
                   "--candidates (8) must be at least --top-k (9)")  # fmt: skip
    one_line_error(bertforge("search", encoder, "x", *corpus, "--rerank", encoder), "not a classification model")
