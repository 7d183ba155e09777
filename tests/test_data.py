"""prepare, NSP instances and MLM masking, checked statistically over many samples."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from bertforge.data.directory import data_stats
from bertforge.data.instances import PretrainingDataset
from bertforge.data.masking import MaskingCollator, MaskingConfig, thin_masks
from bertforge.data.prepare import prepare
from bertforge.formats.options import CorpusOptions
from bertforge.labels import IS_NEXT, NOT_NEXT
from bertforge.model.bert import IGNORE_INDEX
from bertforge.tokenizer import save_tokenizer, special_ids, train_tokenizer

from conftest import make_documents, within_binomial, write_corpus


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, wordpiece_tokenizer):
    root = tmp_path_factory.mktemp("prep")
    docs = make_documents(n_docs=60, sentences=10, seed=1)
    write_corpus(root / "corpus.txt", docs)
    save_tokenizer(wordpiece_tokenizer, root / "tok")
    prepare([root / "corpus.txt"], root / "tok", root / "data", valid_fraction=0.1, progress=False)
    return root, wordpiece_tokenizer


def dataset_for(data_dir, tokenizer, **kwargs):
    ids = special_ids(tokenizer)
    return PretrainingDataset(data_dir, cls_id=ids.cls, sep_id=ids.sep, **kwargs)


def test_prepare_writes_uint16_memmap_whole_document_split_and_meta(prepared):
    root, tokenizer = prepared
    meta = json.loads((root / "data" / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == tokenizer.get_vocab_size()
    splits = meta["splits"]
    assert splits["train"]["documents"] + splits["valid"]["documents"] == 60
    assert 0 < splits["valid"]["tokens"] <= 0.15 * (splits["train"]["tokens"] + splits["valid"]["tokens"])
    assert splits["train"]["sentences"] + splits["valid"]["sentences"] == 600  # every sentence, none split or lost
    tokens = np.fromfile(root / "data" / "train" / "tokens.bin", dtype=np.uint16)
    assert len(tokens) == splits["train"]["tokens"]
    stats = data_stats(root / "data")
    assert stats["train"]["documents"] == splits["train"]["documents"] and stats["train"]["unk_rate"] == 0.0


def test_prepare_with_two_workers_writes_identical_bytes(prepared, tmp_path):
    root, _ = prepared
    for workers in (1, 2):
        prepare(
            [root / "corpus.txt"],
            root / "tok",
            tmp_path / f"w{workers}",
            valid_fraction=0.1,
            workers=workers,
            progress=False,
        )
    for name in (
        "train/tokens.bin",
        "train/sentence_offsets.bin",
        "train/document_offsets.bin",
        "valid/tokens.bin",
        "meta.json",
    ):
        assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes(), name


def test_nsp_statistics_and_layout(prepared, wordpiece_tokenizer):
    root, tokenizer = prepared
    dataset = dataset_for(root / "data", tokenizer, max_seq_len=48)
    ids = special_ids(tokenizer)
    doc_offsets = dataset.store.document_offsets
    labels = []
    for epoch in range(6):
        dataset.set_epoch(epoch)
        for index in range(len(dataset)):
            x = dataset[index]
            a_first, a_end, b_first, b_end, label = dataset.plan[index]
            labels.append(x.nsp_label)
            assert len(x.input_ids) <= 48
            seps = np.flatnonzero(x.input_ids == ids.sep)
            assert x.input_ids[0] == ids.cls and len(seps) == 2 and seps[1] == len(x.input_ids) - 1
            assert np.all(x.token_type_ids[: seps[0] + 1] == 0) and np.all(x.token_type_ids[seps[0] + 1 :] == 1)
            if x.nsp_label == NOT_NEXT:
                assert x.b_doc != x.a_doc  # several documents: a NotNext B never comes from A's document
            else:
                assert b_first == a_end and x.b_doc == x.a_doc  # IsNext: B starts at the sentence right after A
            assert doc_offsets[x.a_doc] <= a_first < a_end <= doc_offsets[x.a_doc + 1]
            # A and B, before trimming, are exactly these sentences; trimming only removes tokens at the ends.
            a_tokens = x.input_ids[1 : seps[0]]
            full_a = dataset.store.sentence_range_tokens(a_first, a_end)
            assert any(
                np.array_equal(full_a[s : s + len(a_tokens)], a_tokens) for s in range(len(full_a) - len(a_tokens) + 1)
            )
    n = len(labels)
    assert n > 1000
    assert within_binomial(labels.count(IS_NEXT), n, 0.5)


def test_instances_are_deterministic_per_seed_and_epoch(prepared):
    root, tokenizer = prepared
    a, b = dataset_for(root / "data", tokenizer), dataset_for(root / "data", tokenizer)
    first = [a[i].input_ids.tolist() for i in range(len(a))]
    assert first == [b[i].input_ids.tolist() for i in range(len(b))]
    a.set_epoch(1)
    assert first != [a[i].input_ids.tolist() for i in range(len(a))]
    assert first != [x.input_ids.tolist() for x in (dataset_for(root / "data", tokenizer, seed=1)[i] for i in range(5))]


def test_masking_statistics_over_ten_thousand_sequences(prepared):
    root, tokenizer = prepared
    dataset = dataset_for(root / "data", tokenizer, max_seq_len=64)
    collator = MaskingCollator(tokenizer, MaskingConfig(mask_prob=0.15, max_predictions=64), seed=3)
    ids = special_ids(tokenizer)
    special = set(ids.all)
    chosen = as_mask = as_random = kept = sequences = 0
    epoch = 0
    while sequences < 10_000:
        dataset.set_epoch(epoch)
        for start in range(0, len(dataset), 64):
            batch = collator([dataset[i] for i in range(start, min(start + 64, len(dataset)))])
            originals = np.stack(
                [
                    np.pad(dataset[i].input_ids, (0, batch["input_ids"].shape[1] - len(dataset[i].input_ids)))
                    for i in range(start, min(start + 64, len(dataset)))
                ]
            )
            labels = batch["mlm_labels"].numpy()
            shown = batch["input_ids"].numpy()
            where = labels != IGNORE_INDEX
            # Labels are the original ids exactly where a prediction is due.
            assert np.array_equal(labels[where], originals[where])
            # Per sequence, the number predicted is round(n * 0.15), at least 1.
            real = np.isin(originals, list(special), invert=True)
            expected = np.maximum(1, np.round(real.sum(1) * 0.15)).astype(int)
            assert np.array_equal(where.sum(1), expected)
            assert not np.isin(originals[where], list(special)).any()  # special tokens are never chosen
            assert np.array_equal(shown[~where], originals[~where])  # nothing else is touched
            replaced = shown[where]
            chosen += int(where.sum())
            as_mask += int((replaced == ids.mask).sum())
            random_here = (replaced != ids.mask) & (replaced != originals[where])
            as_random += int(random_here.sum())
            assert not np.isin(replaced[random_here], list(special)).any()  # nor used as replacements
            kept += int((replaced == originals[where]).sum())
            sequences += len(labels)
        epoch += 1
    assert within_binomial(as_mask, chosen, 0.8)
    # A random replacement can draw the original token (1/V); count those as "kept" in the tolerance.
    assert within_binomial(as_random, chosen, 0.1, sigmas=5)
    assert within_binomial(kept, chosen, 0.1, sigmas=5)


def test_a_mask_rate_schedule_thins_the_chosen_masks_uniformly(prepared):
    """Masks chosen at 30% and thinned with keep = 0.5: 15% in expectation, the 80/10/10 split kept, nothing else."""
    root, tokenizer = prepared
    dataset = dataset_for(root / "data", tokenizer, max_seq_len=64)
    config = MaskingConfig(mask_prob=0.3, max_predictions=64, thinning_draws=True)
    collator = MaskingCollator(tokenizer, config, seed=4)
    mask_id = special_ids(tokenizer).mask
    real = chosen = kept = kept_as_mask = 0
    for start in range(0, len(dataset) - 63, 64):
        batch = collator([dataset[i] for i in range(start, start + 64)])
        assert thin_masks(batch, 1.0)["mlm_labels"].equal(batch["mlm_labels"])  # keep everything: no change
        thinned = thin_masks(batch, 0.5)
        assert "thinning_draws" not in thinned
        was, now = batch["mlm_labels"] != IGNORE_INDEX, thinned["mlm_labels"] != IGNORE_INDEX
        assert not (now & ~was).any()  # thinning only removes predictions
        dropped = was & ~now
        # A dropped position shows its original token again; kept ones are untouched.
        assert thinned["input_ids"][dropped].equal(batch["mlm_labels"][dropped])
        assert thinned["input_ids"][~dropped].equal(batch["input_ids"][~dropped])
        real += int(batch["attention_mask"].sum())
        chosen, kept = chosen + int(was.sum()), kept + int(now.sum())
        kept_as_mask += int((thinned["input_ids"][now] == mask_id).sum())
    assert chosen > 1500 and chosen / real > 0.25
    assert within_binomial(kept, chosen, 0.5)
    assert within_binomial(kept_as_mask, kept, 0.8)


def test_masking_depends_on_instance_not_batch(prepared):
    root, tokenizer = prepared
    dataset = dataset_for(root / "data", tokenizer)
    collator = MaskingCollator(tokenizer, seed=0)
    instances = [dataset[i] for i in range(8)]
    whole = collator(instances)
    halves = [collator(instances[:4]), collator(instances[4:])]
    for key in ("input_ids", "mlm_labels"):
        width = whole[key].shape[1]
        for h, half in enumerate(halves):
            w = half[key].shape[1]
            assert np.array_equal(whole[key][h * 4 : h * 4 + 4, :w].numpy(), half[key].numpy())
            assert (whole[key][h * 4 : h * 4 + 4, w:width] == (IGNORE_INDEX if key == "mlm_labels" else 0)).all()
    assert whole["input_ids"].shape[1] % 8 == 0


def test_whole_word_masking_takes_whole_words_only(prepared):
    root, _ = prepared
    texts = ["unbelievable understanding", "wonderful misunderstanding everywhere"] * 30
    tokenizer = train_tokenizer(texts, kind="wordpiece", vocab_size=40, min_frequency=1)
    assert any(t.startswith("##") for t in tokenizer.encode(texts[0], add_special_tokens=False).tokens)
    config = MaskingConfig(mask_prob=0.3, whole_word_mask=True, thinning_draws=True)
    collator = MaskingCollator(tokenizer, config, seed=0)
    from bertforge.data.instances import Instance

    for i in range(300):
        encoding = tokenizer.encode(texts[i % 2], texts[(i + 1) % 2])
        x = Instance(np.array(encoding.ids), np.array(encoding.type_ids), 0, i, 0, 0, 0)
        batch = collator([x])
        words = {}
        for pos, (w, s) in enumerate(zip(encoding.word_ids, encoding.sequence_ids)):
            if w is not None:
                words.setdefault((s, w), []).append(pos)
        # Masks as chosen, and thinned to half by a mask-rate schedule: both whole words.
        for labels in (batch["mlm_labels"][0].numpy(), thin_masks(batch, 0.5)["mlm_labels"][0].numpy()):
            for positions in words.values():
                chosen = labels[positions] != IGNORE_INDEX
                assert chosen.all() or not chosen.any()  # a word is predicted whole or not at all


def test_one_document_corpus_never_labels_the_true_continuation_not_next(tmp_path, wordpiece_tokenizer):
    docs = make_documents(n_docs=1, sentences=400, seed=2)
    write_corpus(tmp_path / "one.txt", docs)
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepare([tmp_path / "one.txt"], tmp_path / "tok", tmp_path / "data", valid_fraction=0.0, progress=False)
    with pytest.warns(UserWarning, match="one document"):
        dataset = dataset_for(tmp_path / "data", wordpiece_tokenizer, max_seq_len=32)
    plan = dataset.plan
    not_next = plan[plan[:, 4] == NOT_NEXT]
    assert len(not_next) > 10
    # B never starts at A's end (the true continuation), nor anywhere near it.
    assert np.all((not_next[:, 2] > not_next[:, 1] + 1) | (not_next[:, 3] < not_next[:, 0]))


def test_explicit_pairs(tmp_path, wordpiece_tokenizer):
    rows = [f"the cat sat on mat {i}.\tthe dog looked at the window {i}." for i in range(100)]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    meta = prepare(
        [tmp_path / "pairs.tsv"],
        tmp_path / "tok",
        tmp_path / "data",
        valid_fraction=0.1,
        options=CorpusOptions(text_column="0", pair_column="1"),
        progress=False,
    )
    assert meta["pairs"] and meta["splits"]["train"]["documents"] == 90
    dataset = dataset_for(tmp_path / "data", wordpiece_tokenizer)
    labels = []
    for i in range(len(dataset)):
        x = dataset[i]
        labels.append(x.nsp_label)
        assert (x.a_doc == x.b_doc) == (x.nsp_label == IS_NEXT)
    assert 25 < labels.count(IS_NEXT) < 65


def test_data_show_jsonl_from_the_outside(prepared):
    root, tokenizer = prepared
    done = subprocess.run(
        [sys.executable, "-m", "bertforge", "data", "show", str(root / "data"), "--n", "20", "--jsonl"],
        capture_output=True,
        text=True,
        check=True,
    )
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(records) == 20
    for r in records:
        assert set(r) >= {"tokens", "input_ids", "token_type_ids", "mlm_labels", "nsp_label", "a_doc", "b_doc"}
        assert len(r["tokens"]) == len(r["input_ids"]) == len(r["token_type_ids"]) == len(r["mlm_labels"])
        for token, shown, label in zip(r["tokens"], r["input_ids"], r["mlm_labels"]):
            if label != IGNORE_INDEX:
                assert tokenizer.token_to_id(token) == label
            else:
                assert tokenizer.id_to_token(shown) == token
    human = subprocess.run(
        [sys.executable, "-m", "bertforge", "data", "show", str(root / "data"), "--n", "2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "A: " in human and "B: " in human and "→" in human


def test_prepared_tokens_equal_encoding_each_sentence(tmp_path, wordpiece_tokenizer):
    """prepare encodes whole paragraphs and cuts at sentence offsets: it must equal encoding sentence by sentence."""
    from bertforge.formats.text import split_sentences

    paragraphs = [
        "Mr. Smith sat on the mat. The dog (a big one) found 3.5 bones!",
        "我爱北京。天安门很大！ The end.",
        'Caf\u00e9 cr\u00e8me... "Really?" she asked. Yes.',
    ]
    (tmp_path / "c.txt").write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    with pytest.warns(UserWarning, match="no held-out documents"):
        prepare([tmp_path / "c.txt"], tmp_path / "tok", tmp_path / "data", valid_fraction=0.0, progress=False)
    sentences = [s for p in paragraphs for s in split_sentences(p)]
    expected = [wordpiece_tokenizer.encode(s, add_special_tokens=False).ids for s in sentences]
    expected = [ids for ids in expected if ids]
    tokens = np.fromfile(tmp_path / "data" / "train" / "tokens.bin", dtype=np.uint16)
    offsets = np.fromfile(tmp_path / "data" / "train" / "sentence_offsets.bin", dtype=np.int64)
    assert [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)] == expected


def test_the_held_out_split_never_exceeds_its_share(tmp_path, wordpiece_tokenizer):
    """Whole documents of very different sizes: the held-out share stays at or under --valid-fraction."""
    rng = np.random.default_rng(0)
    docs = [make_documents(n_docs=1, sentences=int(n), seed=i)[0] for i, n in enumerate(rng.integers(2, 60, 30))]
    write_corpus(tmp_path / "c.txt", docs)
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    for fraction in (0.05, 0.2):
        meta = prepare(
            [tmp_path / "c.txt"], tmp_path / "tok", tmp_path / f"d{fraction}", valid_fraction=fraction, progress=False
        )
        splits = meta["splits"]
        total = splits["train"]["tokens"] + splits["valid"]["tokens"]
        assert 0 < splits["valid"]["tokens"] <= fraction * total
        assert splits["train"]["documents"] + splits["valid"]["documents"] == 30
        assert splits["train"]["sentences"] + splits["valid"]["sentences"] == sum(len(d) for d in docs)
    # Two documents, each far over the share: one is still held out, and a warning says how much.
    write_corpus(tmp_path / "two.txt", make_documents(n_docs=2, sentences=10, seed=3))
    with pytest.warns(UserWarning, match="held out the last one"):
        meta = prepare([tmp_path / "two.txt"], tmp_path / "tok", tmp_path / "two", valid_fraction=0.05, progress=False)
    assert meta["splits"]["valid"]["documents"] == 1 and meta["splits"]["train"]["documents"] == 1


def test_explicit_pairs_stream_from_compressed_tables_with_held_out_files(tmp_path, wordpiece_tokenizer):
    import gzip

    lines = [f"the cat sat on mat {i}.\tthe dog looked at the window {i}.\n" for i in range(60)]
    rows = "".join(lines)
    with gzip.open(tmp_path / "pairs.tsv.gz", "wt", encoding="utf-8") as f:
        f.write("question\tanswer\n" + rows)
    (tmp_path / "held.tsv").write_text("question\tanswer\n" + "".join(lines[:10]), encoding="utf-8")
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    options = CorpusOptions(text_column="question", pair_column="answer")
    one = prepare(
        [tmp_path / "pairs.tsv.gz"],
        tmp_path / "tok",
        tmp_path / "one",
        valid_files=[tmp_path / "held.tsv"],
        options=options,
        progress=False,
    )
    prepare(
        [tmp_path / "pairs.tsv.gz"],
        tmp_path / "tok",
        tmp_path / "two",
        valid_files=[tmp_path / "held.tsv"],
        options=options,
        workers=2,
        progress=False,
    )
    assert one["pairs"] and one["splits"]["train"] == {
        "documents": 60,
        "sentences": 120,
        "tokens": one["splits"]["train"]["tokens"],
    }
    assert one["splits"]["valid"]["documents"] == 10
    for name in ("train/tokens.bin", "train/sentence_offsets.bin", "valid/tokens.bin"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_sentence_order_prediction_swaps_half_the_pairs(prepared):
    root, tokenizer = prepared
    dataset = dataset_for(root / "data", tokenizer, max_seq_len=64, pair_objective="sop")
    ids = special_ids(tokenizer)
    swapped = 0
    for index in range(len(dataset)):
        x = dataset[index]
        a_first, a_end, b_first, b_end, _ = dataset.plan[index]
        assert b_first == a_end and x.a_doc == x.b_doc  # always consecutive text from one document
        first_sep = int(np.flatnonzero(x.input_ids == ids.sep)[0])
        segment_a = x.input_ids[1:first_sep]
        text_a = dataset.store.sentence_range_tokens(a_first, a_end)
        in_order = any(
            np.array_equal(text_a[s : s + len(segment_a)], segment_a) for s in range(len(text_a) - len(segment_a) + 1)
        )
        assert x.nsp_label == (0 if in_order else 1)  # 0 = in order, 1 = swapped
        swapped += x.nsp_label
    assert within_binomial(swapped, len(dataset), 0.5)


def test_packed_windows_are_full_length_and_cover_the_stream(prepared):
    """No pair objective: [CLS] window [SEP], each seq_len long, documents joined by [SEP], nothing lost."""
    from bertforge.data.instances import PackedDataset

    root, tokenizer = prepared
    ids = special_ids(tokenizer)
    dataset = PackedDataset(root / "data", "train", max_seq_len=32, seed=0, cls_id=ids.cls, sep_id=ids.sep)
    store = dataset.store
    stream = np.concatenate(
        [
            np.append(store.sentence_range_tokens(store.document_offsets[d], store.document_offsets[d + 1]), ids.sep)
            for d in range(store.num_documents)
        ]
    )
    for epoch in (0, 1):
        windows = [dataset[(epoch, i)] for i in range(dataset.num_instances(epoch))]
        assert all(len(w.input_ids) == 32 and w.input_ids[0] == ids.cls and w.input_ids[-1] == ids.sep for w in windows)
        body = np.concatenate([w.input_ids[1:-1] for w in windows])
        start = dataset._offset(epoch)
        assert np.array_equal(body, stream[start : start + len(body)])
        assert len(stream) - start - len(body) < 30  # only the tail shorter than a window is left out
