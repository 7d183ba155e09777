"""Tokenizers: BERT's WordPiece and the tutorials' word-level vocabulary, in Hugging Face format."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer

from bertforge.errors import UserError
from bertforge.tokenizer import SPECIAL_TOKENS, load_tokenizer, save_tokenizer, train_tokenizer

from conftest import bertforge_ok, make_documents, needs

TEXTS = ["The cat sat on the mat.", "The dog sat on the log.", "A cat and a dog played by the river bank."] * 20


@pytest.mark.parametrize("kind", ["wordpiece", "word"])
def test_special_tokens_come_first_and_pad_is_zero(kind):
    tokenizer = train_tokenizer(TEXTS, kind=kind, vocab_size=100, min_frequency=1)
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    encoding = tokenizer.encode("the cat", "the dog")
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens.count("[SEP]") == 2
    assert encoding.type_ids == [0, 0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("kind", ["wordpiece", "word"])
def test_saved_files_load_in_transformers_with_the_same_ids(kind, tmp_path):
    transformers = needs("transformers")
    tokenizer = train_tokenizer(TEXTS, kind=kind, vocab_size=100, min_frequency=1)
    save_tokenizer(tokenizer, tmp_path)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / name).is_file()
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for text, pair in [("The cat sat on the [MASK].", None), ("A dog by the river.", "The cat sat.")]:
        ours = tokenizer.encode(text, pair) if pair else tokenizer.encode(text)
        reference = theirs(text, pair) if pair else theirs(text)
        assert reference["input_ids"] == ours.ids
        assert reference["token_type_ids"] == ours.type_ids
    assert theirs.mask_token == "[MASK]" and theirs.pad_token_id == 0
    assert load_tokenizer(tmp_path).to_str() == tokenizer.to_str()


def test_the_same_texts_give_the_same_tokenizer_every_time(tmp_path):
    """`tokenizers`' WordPiece trainer numbers "##" pieces in hash-map order and breaks ties between equal merges
    by those numbers (huggingface/tokenizers#1794): without ids fixed first, four trainings on these texts in one
    process gave four vocabularies. The fixed pieces are ordinary ones: neither added tokens nor matched in raw
    text. The word-level trainer orders ties by the word itself."""
    sentences = [s for document in make_documents() for s in document]

    def train(kind: str) -> str:
        return train_tokenizer((s for s in sentences), kind, vocab_size=120, min_frequency=1).to_str()

    trained = {kind: {train(kind) for _ in range(4)} for kind in ("word", "wordpiece")}  # the distinct results
    assert {kind: len(results) for kind, results in trained.items()} == {"word": 1, "wordpiece": 1}
    (wordpiece,) = trained["wordpiece"]
    tokenizer = Tokenizer.from_str(wordpiece)
    assert [t["content"] for t in json.loads(wordpiece)["added_tokens"]] == SPECIAL_TOKENS
    assert tokenizer.encode("##a", add_special_tokens=False).tokens == ["[UNK]", "[UNK]", "a"]  # '#' is unseen
    (tmp_path / "c.txt").write_text("\n".join(sentences) + "\n")
    for out in ("one", "two"):  # the command reads its files twice: the same words counted once, the same files
        done = bertforge_ok("tokenizer", "train", tmp_path / "c.txt", "--out", tmp_path / out, "--vocab-size", "120",
                            "--min-frequency", "1")  # fmt: skip
        assert f"on {sum(len(s.split()) for s in sentences):,} words" in done.stdout
    assert (tmp_path / "one" / "tokenizer.json").read_bytes() == (tmp_path / "two" / "tokenizer.json").read_bytes()


def test_wordpiece_round_trips_and_splits_unknown_words():
    tokenizer = train_tokenizer(TEXTS, kind="wordpiece", vocab_size=80, min_frequency=1)
    text = "the cat sat on the mat."
    assert tokenizer.decode(tokenizer.encode(text).ids) == text
    pieces = tokenizer.encode("dat", add_special_tokens=False).tokens  # unseen word, seen pieces
    assert len(pieces) >= 2 and all(p.startswith("##") for p in pieces[1:])


def test_word_level_maps_rare_words_to_unk_and_caps_the_vocabulary():
    texts = ["common common common rare"] * 3 + ["other other"]  # common 9 times, rare 3
    tokenizer = train_tokenizer(texts, kind="word", vocab_size=1000, min_frequency=4)
    assert tokenizer.encode("common rare", add_special_tokens=False).tokens == ["common", "[UNK]"]
    capped = train_tokenizer(TEXTS, kind="word", vocab_size=10, min_frequency=1)
    assert capped.get_vocab_size() == 10


def test_vietnamese_diacritics_survive_with_keep_accents_and_cjk_is_split():
    texts = ["Tôi là sinh viên ở Hà Nội.", "Chúng tôi học tiếng Việt."] * 10 + ["我爱北京天安门。"] * 10
    kept = train_tokenizer(texts, kind="wordpiece", vocab_size=200, min_frequency=1, strip_accents=False)
    tokens = kept.encode("Tôi là sinh viên", add_special_tokens=False).tokens
    assert tokens == ["tôi", "là", "sinh", "viên"]
    stripped = train_tokenizer(texts, kind="wordpiece", vocab_size=200, min_frequency=1)
    assert stripped.encode("viên", add_special_tokens=False).tokens == ["vien"]
    assert kept.encode("我爱北京", add_special_tokens=False).tokens == ["我", "爱", "北", "京"]


def test_cased_tokenizer_keeps_case():
    tokenizer = train_tokenizer(
        ["Paris is in France."] * 5, kind="word", vocab_size=50, min_frequency=1, lowercase=False
    )
    assert tokenizer.encode("Paris", add_special_tokens=False).tokens == ["Paris"]


def test_a_run_directory_gives_its_models_tokenizer(wordpiece_tokenizer, tmp_path):
    save_tokenizer(wordpiece_tokenizer, tmp_path / "run" / "model")  # where a run keeps it
    assert load_tokenizer(tmp_path / "run").to_str() == load_tokenizer(tmp_path / "run" / "model").to_str()
    assert load_tokenizer(tmp_path / "run").to_str() == wordpiece_tokenizer.to_str()


def test_empty_input_is_a_user_error():
    with pytest.raises(UserError, match="no text to train a tokenizer on"):
        train_tokenizer(["", "   "], kind="wordpiece", vocab_size=50)
    with pytest.raises(
        UserError,
        match=r"^/nonexistent/dir: no tokenizer \(tokenizer.json, vocab.txt, vocab.json with merges.txt, or a "
        r"SentencePiece model\)$",
    ):
        load_tokenizer("/nonexistent/dir")


def test_training_counts_the_words_and_advises_a_smaller_vocabulary_for_a_small_corpus(tmp_path):
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=8)) for _ in range(20_000)]
    (tmp_path / "c.txt").write_text(" ".join(words * 2) + "\n")  # every word twice: min_frequency 2 keeps it
    done = bertforge_ok("tokenizer", "train", tmp_path / "c.txt", "--out", tmp_path / "big")
    assert "on 40,000 words" in done.stdout and "advice: for a corpus of 40,000 words, --vocab-size 8192" in done.stderr
    small = bertforge_ok("tokenizer", "train", tmp_path / "c.txt", "--out", tmp_path / "small", "--vocab-size", "8192")
    assert "on 40,000 words" in small.stdout and "advice" not in small.stderr
